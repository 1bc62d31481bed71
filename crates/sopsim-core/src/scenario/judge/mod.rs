//! The `judge` section (and `--judge FILE`): a rubric by which a model scores a
//! finished run, each agent (or the episode) on each dimension, with its prompts, its
//! model and how many samples it draws. Rubrics are JSON files of the same form, and
//! one is built in: Sotopia's seven dimensions (`"rubric": "sotopia"`, cited in
//! `sotopia.json`). Here are the format, a rubric made whole (the built-in or a file's,
//! with the section's own dimensions and what it leaves out) and its checks; the items
//! and the scores are `crate::judging`'s.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::scenario::llm_settings::LlmSettings;
use crate::scenario::path::FieldPath;

/// How a finished run is judged.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct JudgeSpec {
    /// The rubric to start from: `"sotopia"` (built in), or a rubric file's path
    /// (relative to the scenario's folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rubric: Option<String>,
    /// Dimensions by name, added to the rubric's (or replacing one of the same name).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub dimensions: IndexMap<String, Dimension>,
    /// The rubric's dimensions that do not apply here (a debate has no secret).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leave_out: Vec<String>,
    /// The judge's prompts (default: the rubric's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<RubricPrompts>,
    /// Answers drawn for each item, averaged (their spread is reported); default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_SAMPLES))]
    pub samples: Option<u32>,
    /// The judge's model and sampling over the run's (`backend`, `model`,
    /// `temperature`): a second server, another local model, or the run's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmSettings>,
}

/// A rubric file: its dimensions and prompts, and where it comes from.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Rubric {
    /// The rubric's name, which the judgement records.
    pub name: String,
    /// The citation a report names it by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The dimensions by name.
    pub dimensions: IndexMap<String, Dimension>,
    /// The judge's prompts.
    pub prompts: RubricPrompts,
}

/// One dimension of a rubric: an integer scale and what it measures.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Dimension {
    /// The scale's lowest point.
    pub min: i32,
    /// The scale's highest point.
    pub max: i32,
    /// What the judge is told the dimension is.
    pub description: String,
    /// Whom it scores: each agent (the default) or the episode as a whole.
    #[serde(default, skip_serializing_if = "is_agent")]
    pub scores: Scored,
}

/// Whom a dimension scores.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Scored {
    /// Each agent gets its own score.
    #[default]
    Agent,
    /// The episode as a whole gets one score.
    Episode,
}

fn is_agent(s: &Scored) -> bool {
    *s == Scored::Agent
}

/// What the judge is told: the system prompt, and each item's question, a template
/// with `{transcript}`, `{agent}`, `{persona}`, `{dimension}`, `{description}`,
/// `{min}` and `{max}` (the transcript comes first, so each item's prompt continues
/// the same text and a local model reads it once).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RubricPrompts {
    /// The judge's system prompt.
    pub system: String,
    /// Each item's question (the template above).
    pub item: String,
}

/// The rubric built in as `"sotopia"`.
pub const SOTOPIA: &str = include_str!("sotopia.json");

/// The most answers drawn for one item.
const MAX_SAMPLES: u32 = 64;

/// The longest scale a dimension may have.
const MAX_SCALE_POINTS: i64 = 101;

/// Why a judge's rubric cannot be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RubricError {
    /// A rubric file cannot be read or is not a rubric.
    #[error("{path}: {why}")]
    File {
        /// The file's path.
        path: String,
        /// What is wrong with it.
        why: String,
    },
}

/// The built-in rubric named `name`, if there is one.
pub fn built_in(name: &str) -> Option<Rubric> {
    match name {
        "sotopia" => serde_json::from_str(SOTOPIA).ok(),
        _ => None,
    }
}

/// Reads a rubric: a built-in's name, or a file's path relative to `folder`.
pub fn read_rubric(name: &str, folder: &std::path::Path) -> Result<Rubric, RubricError> {
    if let Some(rubric) = built_in(name) {
        return Ok(rubric);
    }
    let path = folder.join(name);
    let file = |why: String| RubricError::File {
        path: path.display().to_string(),
        why,
    };
    let text = crate::files::read_text_bounded(&path, 1 << 20).map_err(|e| file(e.to_string()))?;
    let value = crate::user_json::parse(&text).map_err(|e| file(e.to_string()))?;
    serde_path_to_error::deserialize(value).map_err(|e| file(e.to_string()))
}

/// The rubric `spec` makes: its rubric's dimensions and prompts (none when it names
/// no rubric), with its own dimensions added and those it leaves out taken away.
pub fn rubric_of(spec: &JudgeSpec, folder: &std::path::Path) -> Result<Rubric, RubricError> {
    let mut rubric = match &spec.rubric {
        Some(name) => read_rubric(name, folder)?,
        None => Rubric {
            name: "judge".into(),
            source: None,
            dimensions: IndexMap::new(),
            prompts: default_prompts(),
        },
    };
    for (name, d) in &spec.dimensions {
        rubric.dimensions.insert(name.clone(), d.clone());
    }
    rubric
        .dimensions
        .retain(|name, _| !spec.leave_out.contains(name));
    if let Some(p) = &spec.prompts {
        rubric.prompts = p.clone();
    }
    Ok(rubric)
}

/// Prompts for a judge whose section names no rubric.
fn default_prompts() -> RubricPrompts {
    RubricPrompts {
        system:
            "You evaluate a finished conversation between participants, as a careful reader would."
                .into(),
        item: "{transcript}\n\nEvaluate {agent}. What {agent} was there for: {persona}\n\n\
               Dimension: {dimension}. {description}\n\n\
               Give {agent} an integer score from {min} to {max}."
            .into(),
    }
}

/// Every problem with the scenario's judge: its rubric, its dimensions' scales and
/// prompts, what it leaves out.
pub fn check(
    spec: &JudgeSpec,
    folder: &std::path::Path,
    at: FieldPath,
) -> Vec<(FieldPath, String)> {
    let mut out = Vec::new();
    let rubric = match rubric_of(spec, folder) {
        Ok(r) => r,
        Err(e) => {
            out.push((at.key("rubric"), e.to_string()));
            return out;
        }
    };
    let known: Vec<String> = match &spec.rubric {
        Some(name) => read_rubric(name, folder)
            .map(|r| r.dimensions.keys().cloned().collect())
            .unwrap_or_default(),
        None => Vec::new(),
    };
    for (i, name) in spec.leave_out.iter().enumerate() {
        if !known.contains(name) && !spec.dimensions.contains_key(name) {
            out.push((
                at.key("leave_out").index(i),
                format!(
                    "{name:?} is no dimension of the rubric (it has: {})",
                    known.join(", ")
                ),
            ));
        }
    }
    if rubric.dimensions.is_empty() {
        out.push((
            at.clone(),
            "judges nothing: name a `rubric` or give `dimensions`".into(),
        ));
    }
    if let Some(n) = spec.samples.filter(|n| !(1..=MAX_SAMPLES).contains(n)) {
        out.push((
            at.key("samples"),
            format!("{n}: must be within 1 to {MAX_SAMPLES}"),
        ));
    }
    for (name, d) in &rubric.dimensions {
        let dat = at.key("dimensions").key(name);
        if d.min >= d.max {
            out.push((
                dat.key("max"),
                format!("{}: must be above min ({})", d.max, d.min),
            ));
        } else if i64::from(d.max) - i64::from(d.min) + 1 > MAX_SCALE_POINTS {
            out.push((
                dat.clone(),
                format!(
                    "{} to {}: a scale has at most {MAX_SCALE_POINTS} points",
                    d.min, d.max
                ),
            ));
        }
        if d.description.trim().is_empty() {
            out.push((dat.key("description"), "must not be empty".into()));
        }
    }
    let prompts = at.key("prompts").key("item");
    match crate::template::placeholders(&rubric.prompts.item) {
        Ok(keys) => {
            for key in keys {
                if !ITEM_FIELDS.contains(&key.as_str()) {
                    out.push((
                        prompts.clone(),
                        format!(
                            "unknown placeholder {{{key}}} (known: {})",
                            ITEM_FIELDS.join(", ")
                        ),
                    ));
                }
            }
        }
        Err(e) => out.push((prompts, e.to_string())),
    }
    out
}

/// What an item's template may show.
pub const ITEM_FIELDS: &[&str] = &[
    "transcript",
    "agent",
    "persona",
    "dimension",
    "description",
    "min",
    "max",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sotopias_rubric_is_built_in_and_a_section_narrows_it() {
        let rubric = built_in("sotopia").unwrap();
        let ranges: Vec<(&str, i32, i32)> = rubric
            .dimensions
            .iter()
            .map(|(k, d)| (k.as_str(), d.min, d.max))
            .collect();
        assert_eq!(
            ranges,
            [
                ("believability", 0, 10),
                ("relationship", -5, 5),
                ("knowledge", 0, 10),
                ("secret", -10, 0),
                ("social_rules", -10, 0),
                ("financial_and_material_benefits", -5, 5),
                ("goal", 0, 10)
            ]
        );
        let spec = JudgeSpec {
            rubric: Some("sotopia".into()),
            leave_out: vec!["secret".into(), "financial_and_material_benefits".into()],
            ..JudgeSpec::default()
        };
        let narrowed = rubric_of(&spec, std::path::Path::new(".")).unwrap();
        assert_eq!(narrowed.dimensions.len(), 5);
        assert!(check(
            &spec,
            std::path::Path::new("."),
            FieldPath::root().key("judge")
        )
        .is_empty());
        let bad = JudgeSpec {
            rubric: Some("sotopia".into()),
            leave_out: vec!["charm".into()],
            dimensions: [(
                "wit".to_string(),
                Dimension {
                    min: 5,
                    max: 1,
                    description: "How witty.".into(),
                    scores: Scored::Agent,
                },
            )]
            .into_iter()
            .collect(),
            ..JudgeSpec::default()
        };
        let problems = check(
            &bad,
            std::path::Path::new("."),
            FieldPath::root().key("judge"),
        );
        let said: Vec<String> = problems.iter().map(|(p, m)| format!("{p}: {m}")).collect();
        assert!(
            said.iter()
                .any(|s| s.starts_with("judge.leave_out[0]: \"charm\"")),
            "{said:?}"
        );
        assert!(
            said.iter()
                .any(|s| s.starts_with("judge.dimensions.wit.max: 1: must be above min (5)")),
            "{said:?}"
        );
    }
}
