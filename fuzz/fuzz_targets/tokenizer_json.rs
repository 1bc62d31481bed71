//! An embedder folder's `tokenizer.json`, loaded as MiniLM loads it and used once.
#![no_main]

use libfuzzer_sys::fuzz_target;

static SEQUENTIAL: std::sync::Once = std::sync::Once::new();

fuzz_target!(|data: &[u8]| {
    // Encoding on one thread, so that a panic is the fuzzer's crash with its input
    // saved, rather than an abort in a worker thread.
    SEQUENTIAL.call_once(|| std::env::set_var("TOKENIZERS_PARALLELISM", "false"));
    if let Ok(t) = sopsim::embed::tokenizer_from_json(data) {
        let _ = t.encode_batch(vec!["Hello, world", "a"], true);
    }
});
