//! The first pass of validation: the scenario file against the JSON Schema derived
//! from the format's types (missing fields, wrong types, misspelt keys with the
//! nearest known name), each problem as `path.to.field: message`.

use std::fmt;
use std::sync::OnceLock;

use serde_json::Value;

use super::format::Scenario;
use super::path::FieldPath;

/// One problem found in a scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub path: FieldPath,
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
        let mut schema = serde_json::to_value(schemars::schema_for!(Scenario))
            .expect("a derived schema serialises");
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
        let pointer = err.instance_path().to_string();
        let path = FieldPath::from_pointer(&pointer, doc);
        if let jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } =
            err.kind()
        {
            for key in unexpected {
                // A name the format has at another level is no typo to correct.
                let hint = if field_names().contains(key) {
                    "; the format has it elsewhere, not in this object".to_string()
                } else {
                    closest(key, field_names())
                        .map(|k| format!("; did you mean {k:?}?"))
                        .unwrap_or_default()
                };
                problems.push(Problem {
                    path: path.key(key),
                    message: format!("unknown field{hint}"),
                });
            }
            continue;
        }
        problems.push(Problem {
            path,
            message: schema_message(&err.to_string()),
        });
    }
    problems.dedup();
    problems
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
fn closest<'k>(key: &str, known: &'k [String]) -> Option<&'k str> {
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
