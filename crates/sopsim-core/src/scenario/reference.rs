//! The scenario format's reference in Markdown, generated from its JSON Schema — whose
//! descriptions are the format's own doc comments — so the reference cannot drift from
//! the format (`docs/reference/scenario-format.md` is this, checked by a test).

use std::fmt::Write as _;

use serde_json::{Map, Value};

/// The reference: the top level, then every part of the format, each with its fields.
pub fn markdown() -> String {
    let schema = super::schema();
    let defs = schema["$defs"].as_object().cloned().unwrap_or_default();
    let mut out = String::new();
    let _ = writeln!(out, "# The scenario format\n");
    let _ = writeln!(
        out,
        "Generated from the format's JSON Schema (`sopsim schema`); every description is \
         the format's own documentation. A field without a default is required where its \
         section says so. Run `sopsim schema --format markdown` for this page.\n"
    );
    section(&mut out, "Scenario", schema, &defs);
    for (name, def) in &defs {
        section(&mut out, name, def, &defs);
    }
    out.push_str(&tool_settings());
    out
}

/// A reference page for files sopsim writes: for each file (its name, a line on how it
/// is laid out, and the JSON Schema of the type it is written from), its fields, then
/// every part those types hold, once.
pub fn files_markdown(title: &str, intro: &str, files: &[(&str, &str, Value)]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# {title}\n\n{intro}\n");
    let mut parts = Map::new();
    for (file, layout, schema) in files {
        let defs = schema["$defs"].as_object().cloned().unwrap_or_default();
        let _ = writeln!(out, "## {file}\n\n{layout}\n");
        section_body(&mut out, schema, &defs);
        for (name, def) in defs {
            parts.entry(name).or_insert(def);
        }
    }
    if !parts.is_empty() {
        let _ = writeln!(out, "## Parts\n");
    }
    for (name, def) in &parts {
        let _ = writeln!(out, "### {name}\n");
        section_body(&mut out, def, &parts);
    }
    out
}

/// Each tool kind's settings (its `config`), from the types they are read into: a
/// part of the reference, and the tools guide's settings tables.
pub fn tool_settings() -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## Tool settings
"
    );
    let _ = writeln!(
        out,
        "A tool's `config` holds its kind's settings below and any of the settings every \
         kind takes; another key is refused, naming it.\n"
    );
    for kind in tool_kinds() {
        let schema = kind.settings_schema();
        let _ = writeln!(out, "### `{}`\n", kind.as_str());
        if let Some(d) = schema["description"].as_str() {
            let _ = writeln!(out, "{}\n", one_paragraph(d));
        }
        settings_table(&mut out, &schema, "No settings of its own.");
    }
    let _ = writeln!(out, "### Every kind: how results are shown\n");
    settings_table(&mut out, &super::ToolKind::display_schema(), "");
    out
}

/// The tools guide's table of settings: a row per kind, each setting with its default
/// and range, then the settings every kind takes.
pub fn tool_settings_table() -> String {
    let mut out = String::from("| `kind` | `config` |\n|---|---|\n");
    let row = |out: &mut String, name: &str, schema: &Value| {
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let settings: Vec<String> = schema["properties"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(key, p)| {
                let mut notes = Vec::new();
                if required.contains(&key.as_str()) {
                    notes.push("required".to_string());
                } else if let Some(d) = p.get("default").filter(|d| !d.is_null()) {
                    notes.push(format!("default {d}"));
                }
                if let (Some(lo), Some(hi)) = (p.get("minimum"), p.get("maximum")) {
                    notes.push(format!("{lo}–{hi}"));
                }
                match notes.is_empty() {
                    true => format!("`{key}`"),
                    false => format!("`{key}` ({})", notes.join(", ")),
                }
            })
            .collect();
        let cell = match settings.is_empty() {
            true => "—".to_string(),
            false => settings.join(", "),
        };
        let _ = writeln!(out, "| {name} | {cell} |");
    };
    for kind in tool_kinds() {
        row(
            &mut out,
            &format!("`{}`", kind.as_str()),
            &kind.settings_schema(),
        );
    }
    row(&mut out, "every kind", &super::ToolKind::display_schema());
    out
}

/// The tool kinds, in the order the format lists them.
fn tool_kinds() -> Vec<super::ToolKind> {
    let kinds = schemars::schema_for!(super::ToolKind).to_value();
    kinds["oneOf"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| serde_json::from_value(v["const"].clone()).ok())
        .collect()
}

fn settings_table(out: &mut String, schema: &Value, none: &str) {
    match schema["properties"].as_object() {
        Some(props) if !props.is_empty() => {
            let defs = schema["$defs"].as_object().cloned().unwrap_or_default();
            fields(out, props, schema, &defs);
        }
        _ => {
            let _ = writeln!(out, "{none}\n");
        }
    }
}

fn section(out: &mut String, name: &str, schema: &Value, defs: &Map<String, Value>) {
    let _ = writeln!(out, "## {name}\n");
    section_body(out, schema, defs);
}

fn section_body(out: &mut String, schema: &Value, defs: &Map<String, Value>) {
    if let Some(d) = schema["description"].as_str() {
        let _ = writeln!(out, "{}\n", one_paragraph(d));
    }
    if schema.get("properties").is_none() && schema["additionalProperties"].is_object() {
        let _ = writeln!(out, "A {}, by name.\n", type_of(schema));
    }
    if let Some(props) = schema["properties"].as_object() {
        fields(out, props, schema, defs);
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(variants) = schema[key].as_array() {
            variants_list(out, variants);
        }
    }
    if let Some(values) = schema["enum"].as_array() {
        let shown: Vec<String> = values.iter().map(|v| format!("`{v}`")).collect();
        let _ = writeln!(out, "One of {}.\n", shown.join(", "));
    }
}

fn fields(out: &mut String, props: &Map<String, Value>, owner: &Value, defs: &Map<String, Value>) {
    let required: Vec<&str> = owner["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let _ = writeln!(out, "| field | type | default | what |\n|---|---|---|---|");
    for (field, p) in props {
        // A required setting may still have a default, for the message that asks for it.
        let default = match p.get("default") {
            _ if required.contains(&field.as_str()) => "required".into(),
            Some(d) => format!("`{d}`"),
            None => String::new(),
        };
        let what = p["description"]
            .as_str()
            .or_else(|| described_ref(p, defs))
            .map(one_paragraph)
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "| `{field}` | {} | {default} | {} |",
            type_of(p),
            cell(&what)
        );
    }
    let _ = writeln!(out);
}

fn variants_list(out: &mut String, variants: &[Value]) {
    let _ = writeln!(out, "One of:\n");
    for v in variants {
        let what = v["description"]
            .as_str()
            .map(one_paragraph)
            .unwrap_or_default();
        let shape = match (v["const"].as_str(), v["enum"].as_array()) {
            (Some(c), _) => format!("`\"{c}\"`"),
            (None, Some(e)) if e.len() == 1 => format!("`{}`", e[0]),
            _ => match v["properties"].as_object() {
                Some(p) => {
                    let keys: Vec<String> = p
                        .iter()
                        .map(|(k, f)| match f["const"].as_str() {
                            Some(c) => format!("`{k}: \"{c}\"`"),
                            None => format!("`{k}`"),
                        })
                        .collect();
                    format!("an object: {}", keys.join(", "))
                }
                None => type_of(v),
            },
        };
        let _ = writeln!(
            out,
            "- {shape}{}",
            if what.is_empty() {
                String::new()
            } else {
                format!(": {what}")
            }
        );
    }
    let _ = writeln!(out);
}

/// The description of the part a field refers to, when the field has none of its own.
fn described_ref<'a>(p: &'a Value, defs: &'a Map<String, Value>) -> Option<&'a str> {
    let name = ref_name(p)?;
    defs.get(name)?["description"].as_str()
}

fn ref_name(p: &Value) -> Option<&str> {
    p["$ref"].as_str().and_then(|r| r.strip_prefix("#/$defs/"))
}

/// A field's type as the reference writes it, with its bounds.
fn type_of(p: &Value) -> String {
    if let Some(name) = ref_name(p) {
        return format!("[{name}](#{})", name.to_lowercase());
    }
    if let Some(any) = p["anyOf"].as_array().or_else(|| p["oneOf"].as_array()) {
        let kinds: Vec<String> = any
            .iter()
            .filter(|v| v["type"] != "null")
            .map(type_of)
            .collect();
        return kinds.join(" or ");
    }
    if let Some(c) = p.get("const") {
        return format!("`{c}`");
    }
    let kinds: Vec<&str> = match &p["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect(),
        _ => Vec::new(),
    };
    let mut text = kinds
        .iter()
        .map(|k| match *k {
            "array" => format!("list of {}", type_of(&p["items"])),
            "object" if p["additionalProperties"].is_object() => {
                format!("map of {}", type_of(&p["additionalProperties"]))
            }
            other => other.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" or ");
    if text.is_empty() {
        text = "any".into();
    }
    let bound = |key: &str| p.get(key).map(Value::to_string);
    match (bound("minimum"), bound("maximum")) {
        (Some(lo), Some(hi)) => text.push_str(&format!(", {lo}–{hi}")),
        (Some(lo), None) => text.push_str(&format!(", ≥ {lo}")),
        (None, Some(hi)) => text.push_str(&format!(", ≤ {hi}")),
        _ => {}
    }
    match (bound("minItems"), bound("maxItems")) {
        (Some(lo), Some(hi)) => text.push_str(&format!(", {lo}–{hi} items")),
        (Some(lo), None) => text.push_str(&format!(", ≥ {lo} items")),
        _ => {}
    }
    text
}

/// A description on one line (the schema keeps doc comments' line breaks).
fn one_paragraph(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Text safe inside a table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_part_and_field_of_the_format_is_in_the_reference() {
        let md = super::markdown();
        for part in [
            "## Scenario",
            "## LlmSettings",
            "## State",
            "## SpeakerRule",
            "## ToolSpec",
            "### `http`",
        ] {
            assert!(md.contains(part), "{part}");
        }
        assert!(
            md.contains("| `dry_multiplier` | number, 0.0–5.0 |"),
            "{md}"
        );
        assert!(md.contains("| `sop` | [Sop](#sop) | required |"), "{md}");
        assert!(md.contains("- an object: `rule: \"random\"`"), "{md}");
        assert!(
            md.contains("| `timeout_ms` | integer, 1–600000 | `5000` |"),
            "{md}"
        );
    }
}
