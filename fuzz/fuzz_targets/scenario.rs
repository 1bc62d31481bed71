//! A scenario file as a user might download it: native or aiwaves, loaded and validated.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use sopsim::fuzzing::{from_document, import_aiwaves, parse_json};
use sopsim::scenario::{aiwaves::is_aiwaves, member_count};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let path = Path::new("/nonexistent/fuzz/scenario.json");
    let Ok(doc) = parse_json(path, text) else { return };
    let doc = if is_aiwaves(&doc) {
        match import_aiwaves(path, &doc) {
            Ok((native, _)) => native,
            Err(_) => return,
        }
    } else {
        doc
    };
    // Making a population's members is linear in their number: ten thousand say what
    // millions would, which would only find the fuzzer's memory limit.
    if member_count(&doc) > 10_000 {
        return;
    }
    let _ = from_document(path, doc);
});
