//! A server's event stream, split into chunks wherever the first byte says: the events
//! must not depend on how the bytes arrived.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sopsim::llm::openai::SseParser;

fuzz_target!(|data: &[u8]| {
    let Some((&split, stream)) = data.split_first() else { return };
    let whole = SseParser::default().push(stream);
    let mut parser = SseParser::default();
    let step = usize::from(split).max(1);
    let mut events = Vec::new();
    let mut failed = false;
    for chunk in stream.chunks(step) {
        match parser.push(chunk) {
            Ok(e) => events.extend(e),
            Err(_) => {
                failed = true;
                break;
            }
        }
    }
    if let (Ok(whole), false) = (whole, failed) {
        assert_eq!(whole, events);
    }
});
