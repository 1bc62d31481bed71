//! Any JSON document put through the aiwaves translation, then validated.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use sopsim::fuzzing::{from_document, import_aiwaves, parse_json};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let path = Path::new("/nonexistent/fuzz/config.json");
    let Ok(doc) = parse_json(path, text) else { return };
    if let Ok((native, _)) = import_aiwaves(path, &doc) {
        let _ = from_document(path, native);
    }
});
