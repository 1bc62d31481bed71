//! An embedder folder's `tokenizer.json`, loaded as MiniLM loads it and used once.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = sopsim::embed::tokenizer_from_json(data) {
        let _ = t.encode_batch(vec!["Hello, world", "a"], true);
    }
});
