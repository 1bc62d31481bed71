//! A model file: the GGUF header and metadata, the model's shape, its tokenizer and
//! chat template, and the model built from its tensors.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sopsim_infer::gguf::{chat_template, tokenizer, GgufFile, ModelShape};
use sopsim_infer::chat_template::ChatTemplate;
use sopsim_infer::transformer::Model;

fuzz_target!(|data: &[u8]| {
    let Ok(file) = GgufFile::from_bytes(data.to_vec()) else { return };
    let _ = ModelShape::read(&file);
    let rows = file
        .get("tokenizer.ggml.tokens")
        .and_then(|v| v.as_array())
        .map_or(0, <[_]>::len);
    if let Ok((tok, special)) = tokenizer(&file, rows) {
        let _ = tok.encode("Hello, world", false);
        let _ = special;
    }
    if let Ok(t) = ChatTemplate::new(chat_template(&file), None, "</s>".into()) {
        for thinking in [false, true] {
            let _ = t.render(&[("system", "s"), ("user", "u")], thinking);
        }
    }
    let _ = Model::from_file(file);
});
