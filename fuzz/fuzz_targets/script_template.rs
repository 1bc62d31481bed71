//! Script lines: placeholders listed and rendered as the scripted backend renders them.
#![no_main]

use std::borrow::Cow;

use libfuzzer_sys::fuzz_target;
use sopsim::fuzzing::{placeholders, render};

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else { return };
    let listed = placeholders(line);
    let rendered = render(line, |key| match key {
        "name" => Some(Cow::Borrowed("Ann")),
        "turn" => Some(Cow::Borrowed("3")),
        k => k.strip_prefix("one_of:").map(|o| Cow::Owned(o.split('|').next().unwrap_or("").to_string())),
    });
    // A line whose placeholders are all known renders.
    if let Ok(keys) = listed {
        if keys.iter().all(|k| k == "name" || k == "turn" || k.starts_with("one_of:")) {
            assert!(rendered.is_ok(), "{line:?}: {rendered:?}");
        }
    }
});
