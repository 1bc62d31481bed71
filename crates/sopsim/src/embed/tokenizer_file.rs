//! Checks of a `tokenizer.json` that the tokenizers crate (0.23) does not make before
//! it relies on them: it panics on them instead of returning an error. Each check here
//! was found by fuzzing (`fuzz/regressions/tokenizer_json/`).

use serde_json::Value;

/// Why a tokenizer file cannot be used.
#[derive(Debug, thiserror::Error)]
pub(super) enum TokenizerFileError {
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("post_processor: special token {name:?} has {ids} ids for {tokens} tokens")]
    UnevenSpecial {
        name: String,
        ids: usize,
        tokens: usize,
    },
    #[error(
        "post_processor.{which}: the template uses {id:?}, which special_tokens does not define"
    )]
    UndefinedSpecial { which: &'static str, id: String },
    #[error("post_processor.single: a single sequence has no second part ($B)")]
    SecondInSingle,
}

/// Refuses what would make tokenizers panic: malformed JSON anywhere (a syntax error
/// inside `decoder` panics), and a `TemplateProcessing` post-processor whose template
/// names a special token it does not define, uses the second sequence in `single`, or
/// gives a special token different numbers of ids and tokens (each panics at encode).
pub(super) fn check(bytes: &[u8]) -> Result<(), TokenizerFileError> {
    // Read into values, not skipped: skipping does not check strings' escapes and UTF-8.
    let doc: Value = serde_json::from_slice(bytes)?;
    check_processor(&doc["post_processor"])
}

/// Post-processors are read by shape, not by their `type` (tokenizers does not check
/// it): whatever has `processors` is a sequence, whatever has a template is one.
fn check_processor(p: &Value) -> Result<(), TokenizerFileError> {
    for inner in p["processors"].as_array().into_iter().flatten() {
        check_processor(inner)?;
    }
    if p.get("single").is_some() || p.get("pair").is_some() {
        check_template(p)?;
    }
    Ok(())
}

fn check_template(p: &Value) -> Result<(), TokenizerFileError> {
    let specials = p["special_tokens"].as_object();
    for (name, token) in specials.into_iter().flatten() {
        let ids = token["ids"].as_array().map_or(0, Vec::len);
        let tokens = token["tokens"].as_array().map_or(0, Vec::len);
        if ids != tokens {
            return Err(TokenizerFileError::UnevenSpecial {
                name: name.clone(),
                ids,
                tokens,
            });
        }
    }
    for (which, template) in [("single", &p["single"]), ("pair", &p["pair"])] {
        for piece in template.as_array().into_iter().flatten() {
            if let Some(id) = piece["SpecialToken"]["id"].as_str() {
                if !specials.is_some_and(|s| s.contains_key(id)) {
                    return Err(TokenizerFileError::UndefinedSpecial {
                        which,
                        id: id.to_string(),
                    });
                }
            }
            if which == "single" && piece["Sequence"]["id"].as_str() == Some("B") {
                return Err(TokenizerFileError::SecondInSingle);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn template(single: Value, specials: Value) -> Vec<u8> {
        json!({"post_processor": {"type": "Sequence", "processors": [
            {"type": "TemplateProcessing", "single": single, "pair": [], "special_tokens": specials}
        ]}})
        .to_string()
        .into_bytes()
    }

    #[test]
    fn templates_tokenizers_would_panic_on_are_refused() {
        let cls = json!({"[CLS]": {"id": "[CLS]", "ids": [101], "tokens": ["[CLS]"]}});
        let ok = template(
            json!([{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]),
            cls.clone(),
        );
        assert!(check(&ok).is_ok());
        let unknown = template(
            json!([{"SpecialToken": {"id": "[SEP]", "type_id": 0}}]),
            cls.clone(),
        );
        assert!(check(&unknown).unwrap_err().to_string().contains("[SEP]"));
        let second = template(json!([{"Sequence": {"id": "B", "type_id": 0}}]), cls);
        assert!(check(&second).is_err());
        let uneven = template(
            json!([]),
            json!({"[CLS]": {"id": "[CLS]", "ids": [1, 2], "tokens": ["[CLS]"]}}),
        );
        assert!(check(&uneven).is_err());
        let untyped = json!({"post_processor": {"type": "Whatever", "single": [{"SpecialToken": {"id": "[X]", "type_id": 0}}], "pair": [], "special_tokens": {}}});
        assert!(
            check(untyped.to_string().as_bytes()).is_err(),
            "the type is not what makes a template"
        );
        assert!(check(b"{\"a\": \"\\ud800\"}").is_err(), "a lone surrogate");
    }
}
