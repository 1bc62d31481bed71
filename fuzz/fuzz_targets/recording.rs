//! One file of a `--record` folder, as `--replay` reads it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = sopsim::llm::record::parse_entry(data);
});
