//! A chat template as a model file carries it, rendered for a short conversation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sopsim_infer::chat_template::ChatTemplate;

fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else { return };
    if let Ok(t) = ChatTemplate::new(Some(source.to_string()), Some("<s>".into()), "</s>".into()) {
        let messages = [("system", "Be brief."), ("user", "Hi"), ("assistant", "Hello")];
        for thinking in [false, true] {
            let _ = t.render(&messages, thinking);
        }
    }
});
