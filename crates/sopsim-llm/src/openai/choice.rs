//! Closed choices over a server: asked as structured output (a JSON object whose
//! `choice` is one of the options, with log-probabilities) or, where a server refuses
//! that, in plain text; and the answer read as one option with the probabilities the
//! log-probabilities give.

use serde_json::{json, Map, Value};

use super::retry::{AttemptError, Cause};
use crate::{ChoiceMethod, Chosen};
use sopsim_core::tokens::{Estimator, TokenCounter};

/// Alternatives asked for at each token of a structured choice: OpenAI's maximum, so
/// that the options' probabilities can be read even where many options part.
const TOP_LOGPROBS: u32 = 20;

/// How a closed choice is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Asking {
    /// `response_format`: a JSON object whose `choice` is one of the options, with
    /// `logprobs` for the probabilities.
    Structured,
    /// The prompt's own instruction; the answer is read as text.
    Text,
}

/// What a request asking for a structured choice among `options` adds to its body:
/// the schema of the answer, log-probabilities, and room for the JSON around the
/// longest option.
pub(super) fn ask_structured(options: &[String], body: &mut Map<String, Value>) {
    let schema = json!({
        "type": "object",
        "properties": {"choice": {"type": "string", "enum": options}},
        "required": ["choice"],
        "additionalProperties": false,
    });
    body.insert(
        "response_format".into(),
        json!({"type": "json_schema", "json_schema": {"name": "choice", "strict": true, "schema": schema}}),
    );
    body.insert("logprobs".into(), json!(true));
    body.insert("top_logprobs".into(), json!(TOP_LOGPROBS));
    let longest = options
        .iter()
        .map(|o| Estimator.count(o))
        .max()
        .unwrap_or(1);
    body.insert("max_tokens".into(), json!(16 + 2 * longest));
}

/// The option a choice answer names, with the probabilities the logprobs give. A
/// structured answer that is not JSON or names no option is retried; a text answer
/// naming none is no choice (`None`).
pub(super) fn read_choice(
    content: &str,
    options: &[String],
    asking: Asking,
    logprobs: &Value,
) -> Result<Option<Chosen>, AttemptError> {
    match asking {
        Asking::Text => Ok(
            sopsim_core::sop::parse_choice_in(content, options, "end", options).map(|index| {
                Chosen {
                    index,
                    probabilities: None,
                    method: ChoiceMethod::Text,
                }
            }),
        ),
        Asking::Structured => {
            let bad = |cause: Cause| AttemptError::Again(cause);
            let v: Value = serde_json::from_str(content.trim()).map_err(|e| {
                bad(Cause::caused_by(
                    format!("the structured answer is not JSON: {e}"),
                    e,
                ))
            })?;
            let value = v["choice"]
                .as_str()
                .ok_or_else(|| bad("the structured answer has no \"choice\"".into()))?;
            let index = options.iter().position(|o| o == value).ok_or_else(|| {
                bad(format!("the structured answer {value:?} is not one of the options").into())
            })?;
            Ok(Some(Chosen {
                index,
                probabilities: option_probabilities(content, value, options, logprobs),
                method: ChoiceMethod::Structured,
            }))
        }
    }
}

/// The options' probabilities from the answer's log-probabilities.
///
/// A structured answer (`{"choice": "10"}`) is generated token by token. As the local
/// backend does over its option trie, an option's probability is the product, along
/// the tokens that spell it, of each token's probability renormalised over the tokens
/// there that continue some option still possible. The generated tokens are one path;
/// an option that parts from it does so at one position, where `top_logprobs` gives the
/// alternative that starts it: if that alternative leads to this option alone, the
/// constrained rest of it is certain; if it leads to several ("1" when "1" and "10" are
/// options and "10" was generated), their split lies at a position the server never
/// generated, so the answer is `None` — never a wrong number. `None` too without
/// logprobs, when the tokens do not spell the answer, or when an option missing from a
/// position's alternatives could hold more than a hundredth of the probability there.
fn option_probabilities(
    content: &str,
    value: &str,
    options: &[String],
    logprobs: &Value,
) -> Option<Vec<f64>> {
    /// How much probability an option left out of the alternatives may hide.
    const MISSING: f64 = 0.01;
    let tokens = logprobs["content"].as_array()?;
    let texts: Vec<&str> = tokens
        .iter()
        .map(|t| t["token"].as_str())
        .collect::<Option<_>>()?;
    if texts.concat() != content {
        return None;
    }
    // Each option as the answer writes it after the opening quote, closing quote included.
    let spelled: Vec<String> = options
        .iter()
        .map(|o| serde_json::to_string(o).ok().map(|q| q[1..].to_string()))
        .collect::<Option<_>>()?;
    // The value follows its key, so its last occurrence is the value.
    let start = content.rfind(&serde_json::to_string(value).ok()?)? + 1;
    let mut p = vec![0.0; options.len()];
    let mut alive: Vec<usize> = (0..options.len()).collect();
    let mut along = 1.0f64; // the probability of the generated path so far
    let mut written = 0; // bytes of the value (after its opening quote) generated so far
    let mut at = 0;
    for (t, text) in tokens.iter().zip(&texts) {
        let end = at + text.len();
        if end <= start || text.is_empty() {
            at = end;
            continue;
        }
        // The token may begin before the value (`: "1`): alternatives must too.
        let lead = text.get(..start.saturating_sub(at))?;
        let own = &text[lead.len()..];
        let listed = t["top_logprobs"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let mut alternatives: Vec<(&str, f64)> = Vec::new();
        let mut listed_mass = 0.0;
        for alt in listed {
            let (Some(tok), Some(lp)) = (alt["token"].as_str(), alt["logprob"].as_f64()) else {
                continue;
            };
            listed_mass += lp.exp();
            if let Some(rest) = tok.strip_prefix(lead) {
                if !alternatives.iter().any(|(r, _)| *r == rest) {
                    alternatives.push((rest, lp.exp()));
                }
            }
        }
        if !alternatives.iter().any(|(r, _)| *r == own) {
            let lp = t["logprob"].as_f64()?;
            listed_mass += lp.exp();
            alternatives.push((own, lp.exp()));
        }
        // For each alternative, the options still possible it completes or continues.
        let rest_of = |o: usize| &spelled[o][written..];
        let leads_to = |alt: &str| -> Vec<(usize, bool)> {
            alive
                .iter()
                .filter_map(|&o| {
                    let r = rest_of(o);
                    if alt.starts_with(r) {
                        Some((o, true))
                    } else if r.starts_with(alt) {
                        Some((o, false))
                    } else {
                        None
                    }
                })
                .collect()
        };
        let z: f64 = alternatives
            .iter()
            .filter(|(alt, _)| !leads_to(alt).is_empty())
            .map(|(_, q)| q)
            .sum();
        if z <= 0.0 {
            return None;
        }
        let mut reached = vec![false; options.len()];
        for (alt, q) in &alternatives {
            let to = leads_to(alt);
            for (o, _) in &to {
                reached[*o] = true;
            }
            if *alt == own {
                continue;
            }
            match to.as_slice() {
                [] => {}
                [(o, _)] => p[*o] += along * q / z,
                _ => return None,
            }
        }
        let missing = (1.0 - listed_mass).max(0.0);
        if alive.iter().any(|&o| !reached[o]) && missing / (z + missing) > MISSING {
            return None;
        }
        let path = leads_to(own);
        along *= alternatives.iter().find(|(r, _)| *r == own)?.1 / z;
        match path.as_slice() {
            [(o, true)] => {
                p[*o] += along;
                let total: f64 = p.iter().sum();
                return (total > 0.0).then(|| p.into_iter().map(|x| x / total).collect());
            }
            to if to.iter().all(|(_, completes)| !completes) && !to.is_empty() => {
                alive = to.iter().map(|(o, _)| *o).collect();
                written += own.len();
            }
            _ => return None,
        }
        at = end;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// A generated token, its probability, and its alternatives with theirs.
    type Token<'a> = (&'a str, f64, &'a [(&'a str, f64)]);

    /// Log-probabilities as servers return them.
    fn logprobs(tokens: &[Token]) -> Value {
        json!({"content": tokens.iter().map(|(t, p, top)| json!({
            "token": t,
            "logprob": p.ln(),
            "top_logprobs": top.iter().map(|(a, q)| json!({"token": a, "logprob": q.ln()})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>()})
    }

    fn close(p: &[f64], want: &[f64]) -> bool {
        p.len() == want.len() && p.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-9)
    }

    #[test]
    fn an_option_sharing_a_first_token_with_others_is_never_credited_twice() {
        let options = strings(&["1", "2", "10"]);
        // "10" generated; the alternative "1" begins both "1" and "10", and how it
        // would have split lies at a position the server never generated.
        let content = r#"{"choice": "10"}"#;
        let lp = logprobs(&[
            (r#"{"choice": ""#, 1.0, &[]),
            ("10", 0.6, &[("10", 0.6), ("1", 0.3), ("2", 0.1)]),
            (r#""}"#, 1.0, &[]),
        ]);
        assert_eq!(option_probabilities(content, "10", &options, &lp), None);
        // With "1" generated the split is there: `"` ends "1", `0` goes on to "10".
        let content = r#"{"choice": "1"}"#;
        let lp = logprobs(&[
            (r#"{"choice": ""#, 1.0, &[]),
            ("1", 0.5, &[("1", 0.5), ("10", 0.3), ("2", 0.2)]),
            (r#""}"#, 0.8, &[(r#""}"#, 0.8), ("0", 0.2)]),
        ]);
        let p = option_probabilities(content, "1", &options, &lp).unwrap();
        assert!(close(&p, &[0.5 * 0.8, 0.2, 0.3 + 0.5 * 0.2]), "{p:?}");
    }

    #[test]
    fn options_of_several_tokens_are_renormalised_over_what_continues_an_option() {
        let options = strings(&["COOPERATE", "COOL", "DEFECT"]);
        let content = r#"{"choice": "COOPERATE"}"#;
        let lp = logprobs(&[
            (r#"{"choice": "#, 1.0, &[]),
            // The token starts before the value; "XY" continues no option.
            (
                r#""CO"#,
                0.6,
                &[(r#""CO"#, 0.6), (r#""DE"#, 0.3), (r#""XY"#, 0.1)],
            ),
            ("OPER", 0.5, &[("OPER", 0.5), ("OL", 0.3), ("zz", 0.2)]),
            (r#"ATE"}"#, 1.0, &[]),
        ]);
        let p = option_probabilities(content, "COOPERATE", &options, &lp).unwrap();
        assert!(close(&p, &[5.0 / 12.0, 0.25, 1.0 / 3.0]), "{p:?}");
        // An alternative that begins two options that are both still possible ("O"
        // for COOPERATE and COOL) cannot be split: no number rather than a wrong one.
        let lp = logprobs(&[
            (r#"{"choice": "#, 1.0, &[]),
            (r#""CO"#, 0.6, &[(r#""CO"#, 0.6), (r#""DE"#, 0.4)]),
            ("OPER", 0.5, &[("OPER", 0.5), ("O", 0.5)]),
            (r#"ATE"}"#, 1.0, &[]),
        ]);
        assert_eq!(
            option_probabilities(content, "COOPERATE", &options, &lp),
            None
        );
    }

    #[test]
    fn probabilities_are_none_when_the_logprobs_cannot_tell() {
        let options = strings(&["COOPERATE", "DEFECT"]);
        let content = r#"{"choice": "DEFECT"}"#;
        assert_eq!(
            option_probabilities(content, "DEFECT", &options, &Value::Null),
            None
        );
        // Tokens that do not spell the answer.
        let lp = logprobs(&[(r#"{"choice": "DEF"#, 1.0, &[]), ("ECT", 1.0, &[])]);
        assert_eq!(option_probabilities(content, "DEFECT", &options, &lp), None);
        // COOPERATE is not among the alternatives, and a third of the mass is unlisted.
        let lp = logprobs(&[
            (r#"{"choice": ""#, 1.0, &[]),
            ("DE", 0.6, &[("DE", 0.6), ("XY", 0.1)]),
            (r#"FECT"}"#, 1.0, &[]),
        ]);
        assert_eq!(option_probabilities(content, "DEFECT", &options, &lp), None);
        // Left out, but with next to nothing unlisted: it had next to no chance.
        let lp = logprobs(&[
            (r#"{"choice": ""#, 1.0, &[]),
            ("DE", 0.999, &[("DE", 0.999)]),
            (r#"FECT"}"#, 1.0, &[]),
        ]);
        let p = option_probabilities(content, "DEFECT", &options, &lp).unwrap();
        assert!(close(&p, &[0.0, 1.0]), "{p:?}");
    }
}
