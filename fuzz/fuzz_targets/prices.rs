//! A `--prices` file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sopsim::llm::cost::PriceTable;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(table) = PriceTable::with_json(text) {
        let _ = table.price("gpt-4o-mini");
    }
});
