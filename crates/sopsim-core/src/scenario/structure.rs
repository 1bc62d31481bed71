//! The first pass of validation: the scenario file against the JSON Schema derived
//! from the format's types (missing fields, wrong types, misspelt keys with the
//! nearest known name), each problem as `path.to.field: message`.

use std::fmt;
use std::sync::OnceLock;

use jsonschema::error::ValidationErrorKind;
use jsonschema::ValidationError;
use serde_json::Value;

use super::format::Scenario;
use super::path::FieldPath;

/// One problem found in a scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The field the problem is in.
    pub path: FieldPath,
    /// What is wrong there.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// The JSON Schema of the native format, as `sopsim schema` prints it.
pub fn schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let mut schema = schemars::schema_for!(Scenario).to_value();
        unwrap_optional(&mut schema);
        if let Some(obj) = schema.as_object_mut() {
            obj.insert(
                "$id".into(),
                "https://sopsim.dev/schema/scenario.json".into(),
            );
        }
        schema
    })
}

/// An optional field's schema is `anyOf: [its type, null]`; against that, a mistake
/// inside the field is reported as "not valid under any of the schemas" at the field.
/// Optional fields are simply left out, so the schema keeps the type alone and a
/// mistake is reported where it is.
fn unwrap_optional(v: &mut Value) {
    match v {
        Value::Object(map) => {
            let inner = match map.get("anyOf") {
                Some(Value::Array(branches)) if branches.len() == 2 => {
                    let is_null = |b: &Value| b.get("type") == Some(&Value::from("null"));
                    match (is_null(&branches[0]), is_null(&branches[1])) {
                        (false, true) => Some(branches[0].clone()),
                        (true, false) => Some(branches[1].clone()),
                        _ => None,
                    }
                }
                _ => None,
            };
            if let Some(Value::Object(inner)) = inner {
                map.remove("anyOf");
                for (k, x) in inner {
                    map.entry(k).or_insert(x);
                }
            }
            map.values_mut().for_each(unwrap_optional);
        }
        Value::Array(items) => items.iter_mut().for_each(unwrap_optional),
        _ => {}
    }
}

/// Structural problems of a parsed JSON document against the schema.
pub fn check_structure(doc: &Value) -> Vec<Problem> {
    static VALIDATOR: OnceLock<
        Result<jsonschema::Validator, jsonschema::ValidationError<'static>>,
    > = OnceLock::new();
    let validator = match VALIDATOR.get_or_init(|| jsonschema::options().build(schema())) {
        Ok(v) => v,
        Err(e) => {
            return vec![Problem {
                path: FieldPath::root(),
                message: format!("internal schema error: {e}"),
            }]
        }
    };
    let mut problems: Vec<Problem> = Vec::new();
    for err in validator.iter_errors(doc) {
        problems_of(&err, doc, &mut problems);
    }
    problems.dedup();
    problems
}

/// The problems one schema error stands for. An object that fits none of its
/// alternatives (a speaker rule, a network, a draw) is explained by the alternative it
/// names, or by the values its tag may take, or by the field no alternative has.
fn problems_of(err: &ValidationError<'_>, doc: &Value, problems: &mut Vec<Problem>) {
    let path = FieldPath::from_pointer(&err.instance_path().to_string(), doc);
    match err.kind() {
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            for key in unexpected {
                problems.push(Problem {
                    path: path.key(key),
                    message: format!("unknown field{}", unknown_field_hint(key)),
                });
            }
        }
        ValidationErrorKind::OneOfNotValid { context } | ValidationErrorKind::AnyOf { context } => {
            let at = err.instance_path().to_string();
            if !explain_alternatives(&at, context, doc, problems) {
                problems.push(Problem {
                    path,
                    message: schema_message(&err.to_string()),
                });
            }
        }
        _ => problems.push(Problem {
            path,
            message: schema_message(&err.to_string()),
        }),
    }
}

/// Explains why the value at `at` fits none of `branches` (each alternative's errors);
/// false when no explanation is clearer than the schema's own message.
/// A constant as the problem names it: a string's text, any other value's JSON.
fn constant(value: &Value) -> String {
    value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_string)
}

/// The value at `pointer` is none of `values`: list them, with the closest as a hint.
fn not_one_of(pointer: &str, values: &[String], doc: &Value) -> Problem {
    let written = doc
        .pointer(pointer)
        .map(|v| v.to_string())
        .unwrap_or_default();
    let hint = closest(written.trim_matches('"'), values)
        .map(|v| format!("; did you mean {v:?}?"))
        .unwrap_or_default();
    let listed: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    Problem {
        path: FieldPath::from_pointer(pointer, doc),
        message: format!("{written} is not one of {}{hint}", listed.join(", ")),
    }
}

fn explain_alternatives(
    at: &str,
    branches: &[Vec<ValidationError<'static>>],
    doc: &Value,
    problems: &mut Vec<Problem>,
) -> bool {
    // A value that must be one of several constants, each an alternative of its own
    // (an enum whose values are documented one by one): list them.
    let constants: Option<Vec<String>> = branches
        .iter()
        .map(|b| match b.as_slice() {
            [e] if e.instance_path().to_string() == at => match e.kind() {
                ValidationErrorKind::Constant { expected_value } => Some(constant(expected_value)),
                _ => None,
            },
            _ => None,
        })
        .collect();
    if let Some(values) = constants.filter(|v| !v.is_empty()) {
        problems.push(not_one_of(at, &values, doc));
        return true;
    }
    // A tag is a field of the object whose value picks the alternative; a value that is
    // itself one of several constants (`"all"` or a number) has no tag.
    let below = format!("{at}/");
    let wrong_tag = |e: &ValidationError<'_>| {
        matches!(
            e.kind(),
            ValidationErrorKind::Constant { .. } | ValidationErrorKind::Enum { .. }
        ) && e.instance_path().to_string().starts_with(&below)
    };
    // The alternative whose tag the value has: its own problems are the ones to fix.
    let named: Vec<&Vec<ValidationError<'static>>> = branches
        .iter()
        .filter(|b| !b.is_empty() && !b.iter().any(wrong_tag))
        .collect();
    if let [only] = named.as_slice() {
        for e in only.iter() {
            problems_of(e, doc, problems);
        }
        return true;
    }
    // Every alternative wants another value of the same tag: list them.
    let tags: Vec<(String, String)> = branches
        .iter()
        .flatten()
        .filter(|e| wrong_tag(e))
        .filter_map(|e| match e.kind() {
            ValidationErrorKind::Constant { expected_value } => {
                Some((e.instance_path().to_string(), constant(expected_value)))
            }
            _ => None,
        })
        .collect();
    let one_place = tags.windows(2).all(|w| w[0].0 == w[1].0);
    if !tags.is_empty() && one_place && branches.iter().all(|b| b.iter().any(wrong_tag)) {
        let values: Vec<String> = tags.iter().map(|(_, v)| v.clone()).collect();
        problems.push(not_one_of(&tags[0].0, &values, doc));
        return true;
    }
    // A field no alternative has (a misspelt tag).
    let unknown = |branch: &[ValidationError<'static>]| -> Vec<(String, String)> {
        branch
            .iter()
            .flat_map(|e| match e.kind() {
                ValidationErrorKind::AdditionalProperties { unexpected } => unexpected
                    .iter()
                    .map(|k| (e.instance_path().to_string(), k.clone()))
                    .collect(),
                _ => Vec::new(),
            })
            .collect()
    };
    let mut unknown_everywhere = branches.first().map(|b| unknown(b)).unwrap_or_default();
    for branch in branches.iter().skip(1) {
        let here = unknown(branch);
        unknown_everywhere.retain(|u| here.contains(u));
    }
    for (at, key) in &unknown_everywhere {
        problems.push(Problem {
            path: FieldPath::from_pointer(at, doc).key(key),
            message: format!("unknown field{}", unknown_field_hint(key)),
        });
    }
    !unknown_everywhere.is_empty()
}

/// "; did you mean …?" for a field the format does not have.
fn unknown_field_hint(key: &str) -> String {
    // A name the format has at another level is no typo to correct.
    if field_names().iter().any(|k| k == key) {
        "; the format has it elsewhere, not in this object".to_string()
    } else {
        closest(key, field_names())
            .map(|k| format!("; did you mean {k:?}?"))
            .unwrap_or_default()
    }
}

/// Every field name the format has anywhere, for "did you mean" hints.
fn field_names() -> &'static [String] {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        fn walk(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(map) => {
                    if let Some(Value::Object(props)) = map.get("properties") {
                        out.extend(props.keys().cloned());
                    }
                    map.values().for_each(|x| walk(x, out));
                }
                Value::Array(items) => items.iter().for_each(|x| walk(x, out)),
                _ => {}
            }
        }
        let mut names = Vec::new();
        walk(schema(), &mut names);
        names.sort();
        names.dedup();
        names
    })
}

/// The known name within two edits of `key`, if any.
pub(super) fn closest<'k>(key: &str, known: &'k [String]) -> Option<&'k str> {
    known
        .iter()
        .map(|k| (strsim::levenshtein(key, k), k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| k.as_str())
}

/// jsonschema's messages quote whole sub-documents; keep them readable.
fn schema_message(raw: &str) -> String {
    const MAX: usize = 200;
    if raw.chars().count() <= MAX {
        return raw.to_string();
    }
    let cut: String = raw.chars().take(MAX).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The problems of a shipped scenario after `edit`, as `path: message` lines.
    fn problems_after(file: &str, edit: impl FnOnce(&mut Value)) -> Vec<String> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../scenarios")
            .join(file);
        let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        edit(&mut doc);
        check_structure(&doc)
            .into_iter()
            .map(|p| format!("{}: {}", p.path, p.message))
            .collect()
    }

    #[test]
    fn a_value_that_is_none_of_an_enums_documented_values_lists_them() {
        assert_eq!(
            problems_after("debate.json", |d| d["environment"]["type"] = "cooperativ".into()),
            ["environment.type: \"cooperativ\" is not one of \"cooperative\", \"competitive\"; did you mean \"cooperative\"?"]
        );
        assert_eq!(
            problems_after("debate.json", |d| d["llm"] = serde_json::json!({"backend": "locall"})),
            ["llm.backend: \"locall\" is not one of \"local\", \"openai\", \"scripted\"; did you mean \"local\"?"]
        );
    }

    #[test]
    fn an_object_that_fits_no_alternative_is_explained_by_the_one_it_names() {
        let speaker = |rule: Value| {
            problems_after("debate.json", |d| {
                d["sop"]["states"]["debate"]["speaker"] = rule
            })
        };
        assert_eq!(
            speaker(serde_json::json!({ "rul": "order" })),
            ["sop.states.debate.speaker.rul: unknown field; did you mean \"rule\"?"]
        );
        assert_eq!(
            speaker(serde_json::json!({ "rule": "loud" })),
            ["sop.states.debate.speaker.rule: \"loud\" is not one of \"order\", \"random\", \"llm\""]
        );
        let citizens = |field: &str, value: Value| {
            problems_after("networked_public_goods.json", |d| {
                d["populations"]["citizens"][field] = value
            })
        };
        let network = citizens(
            "network",
            serde_json::json!({ "kind": "smallworld", "k": 4 }),
        );
        assert_eq!(network.len(), 1, "{network:?}");
        assert!(
            network[0].ends_with("; did you mean \"small_world\"?"),
            "{network:?}"
        );
        let network = citizens(
            "network",
            serde_json::json!({ "kind": "small_world", "k": 4, "p": 0.1, "pp": 0.1 }),
        );
        assert_eq!(
            network,
            ["populations.citizens.network.pp: unknown field; did you mean \"p\"?"]
        );
        assert_eq!(
            citizens(
                "draw",
                serde_json::json!({ "age": { "integer": [18, 80] } })
            ),
            ["populations.citizens.draw.age.integer: unknown field; did you mean \"integers\"?"]
        );
    }
}
