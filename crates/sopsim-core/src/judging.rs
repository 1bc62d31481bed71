//! Judging a finished run, as pure functions: the items a rubric makes of a run (each
//! agent on each of its dimensions, and the episode on the episode's), the prompt of
//! each (the transcript first, so every item's prompt continues the same text), the
//! scores the answers give (each sample's value, their mean and spread, and the
//! expected value where the judge's probabilities are known), `judgement.json`'s
//! form, and the figures a benchmark reports of it. The calls are the runtime's.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::memory::Message;
use crate::prompt::ChatMessage;
use crate::scenario::judge::{Rubric, Scored};
use crate::scenario::Scenario;

/// One thing the judge scores: an agent (or the episode) on a dimension.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// The agent's name, or [`EPISODE`].
    pub subject: String,
    /// The name of the rubric's dimension it is scored on.
    pub dimension: String,
    /// The scale's points, lowest first, as the judge chooses among them.
    pub options: Vec<String>,
}

/// What the episode's scores are filed under.
pub const EPISODE: &str = "episode";

/// The items `rubric` makes of a run of `scenario`: every named agent (a population's
/// members are not judged one by one) on each dimension that scores agents, then the
/// episode on each that scores it.
pub fn items(rubric: &Rubric, scenario: &Scenario) -> Vec<Item> {
    let scale = |min: i32, max: i32| (min..=max).map(|v| v.to_string()).collect::<Vec<_>>();
    let agents: Vec<&String> = scenario
        .agents
        .iter()
        .filter(|(_, a)| a.member.is_none())
        .map(|(n, _)| n)
        .collect();
    let mut out = Vec::new();
    for agent in &agents {
        for (name, d) in rubric
            .dimensions
            .iter()
            .filter(|(_, d)| d.scores == Scored::Agent)
        {
            out.push(Item {
                subject: (*agent).clone(),
                dimension: name.clone(),
                options: scale(d.min, d.max),
            });
        }
    }
    for (name, d) in rubric
        .dimensions
        .iter()
        .filter(|(_, d)| d.scores == Scored::Episode)
    {
        out.push(Item {
            subject: EPISODE.into(),
            dimension: name.clone(),
            options: scale(d.min, d.max),
        });
    }
    out
}

/// The transcript as the judge reads it: one line a message, its speaker named.
pub fn transcript_text(log: &[impl AsRef<Message>]) -> String {
    log.iter()
        .map(|m| m.as_ref())
        .filter(|m| !m.kind.is_tool())
        .map(|m| format!("{}: {}", m.name, m.content.trim()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What an agent was in the run, as the judge is told: its stake, else its style,
/// and the roles it played.
pub fn persona_text(scenario: &Scenario, agent: &str) -> String {
    let Some(a) = scenario.agents.get(agent) else {
        return String::new();
    };
    let roles: Vec<&str> = a.roles.values().map(String::as_str).collect();
    let mut parts = Vec::new();
    if !a.stake.trim().is_empty() {
        parts.push(a.stake.trim().to_string());
    } else if !a.style.trim().is_empty() {
        parts.push(a.style.trim().to_string());
    }
    if !roles.is_empty() {
        parts.push(format!("(played: {})", roles.join(", ")));
    }
    parts.join(" ")
}

/// The prompt of `item`: the rubric's system prompt, then its item template filled
/// in, and how to answer.
pub fn prompt(
    rubric: &Rubric,
    scenario: &Scenario,
    transcript: &str,
    item: &Item,
) -> Vec<ChatMessage> {
    let Some(d) = rubric.dimensions.get(&item.dimension) else {
        return Vec::new();
    };
    let (agent, persona) = match item.subject.as_str() {
        EPISODE => ("the conversation as a whole".to_string(), String::new()),
        name => (name.to_string(), persona_text(scenario, name)),
    };
    let filled = crate::template::render(&rubric.prompts.item, |key| {
        Some(match key {
            "transcript" => transcript.into(),
            "agent" => agent.as_str().into(),
            "persona" => persona.as_str().into(),
            "dimension" => item.dimension.as_str().into(),
            "description" => d.description.as_str().into(),
            "min" => d.min.to_string().into(),
            "max" => d.max.to_string().into(),
            _ => return None,
        })
    })
    .unwrap_or_else(|_| rubric.prompts.item.clone());
    vec![
        ChatMessage::system(rubric.prompts.system.clone()),
        ChatMessage::user(format!(
            "{filled}\n\nAnswer with exactly one integer from {} to {}.",
            d.min, d.max
        )),
    ]
}

/// One item's scores: each sample's value and what the judge answered, their mean and
/// spread, and the mean expected value where the judge gave probabilities.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ItemScore {
    /// The mean of the samples that chose a point of the scale.
    pub score: f64,
    /// The samples' standard deviation (n − 1), with two samples or more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sd: Option<f64>,
    /// The mean over samples of the scale's expected value under the judge's
    /// probabilities, where the backend gave them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<f64>,
    /// Each sample's point of the scale; a sample that chose none is left out.
    pub samples: Vec<f64>,
    /// The judge's answers as given, one a sample: a judgement replays from them.
    pub raw: Vec<String>,
}

/// One sample's answer to an item: the option chosen, and every option's
/// probability where the backend could tell.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The position of the option chosen in the item's `options`, if the answer chose one.
    pub chosen: Option<usize>,
    /// Each option's probability, in the order of the item's `options`.
    pub probabilities: Option<Vec<f64>>,
    /// The judge's answer as given.
    pub raw: String,
}

/// The scores `answers` give `item`; `None` when no sample chose a point of the scale.
pub fn score(item: &Item, answers: &[Answer]) -> Option<ItemScore> {
    let value = |i: usize| item.options.get(i).and_then(|o| o.parse::<f64>().ok());
    let samples: Vec<f64> = answers.iter().filter_map(|a| value(a.chosen?)).collect();
    if samples.is_empty() {
        return None;
    }
    let n = samples.len() as f64;
    let mean = samples.iter().sum::<f64>() / n;
    let sd = (samples.len() > 1)
        .then(|| (samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt());
    let expected: Vec<f64> = answers
        .iter()
        .filter_map(|a| {
            let p = a.probabilities.as_ref()?;
            Some(
                p.iter()
                    .enumerate()
                    .filter_map(|(i, q)| Some(q * value(i)?))
                    .sum(),
            )
        })
        .collect();
    Some(ItemScore {
        score: mean,
        sd,
        expected: (!expected.is_empty())
            .then(|| expected.iter().sum::<f64>() / expected.len() as f64),
        samples,
        raw: answers.iter().map(|a| a.raw.clone()).collect(),
    })
}

/// An item the judge could not score: counted and listed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ItemFailure {
    /// The agent scored, or `episode`.
    pub subject: String,
    /// The rubric's dimension.
    pub dimension: String,
    /// Why: the backend's error, or an answer that named no point of the scale.
    pub error: String,
}

/// `judgement.json`: a run's scores by subject (each agent, and `episode`) and
/// dimension, with the judge and rubric that gave them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Judgement {
    /// The rubric's name.
    pub rubric: String,
    /// Where the rubric comes from, as its file cites it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The model that judged.
    pub judge: String,
    /// The run's models: a judge that shares one with the agents may prefer its own
    /// replies (self-preference), which a report says.
    pub run_models: Vec<String>,
    /// Whether the judge is one of `run_models`.
    pub shares_a_model: bool,
    /// Samples the judge drew per item.
    pub samples: u32,
    /// Each dimension's scale, lowest and highest point.
    #[serde(default)]
    pub scales: IndexMap<String, [i32; 2]>,
    /// Subject (each agent, and `episode`) → dimension → its scores.
    pub scores: IndexMap<String, IndexMap<String, ItemScore>>,
    /// The items no sample could score.
    pub failed: Vec<ItemFailure>,
    /// The judge's model calls.
    pub calls: u64,
    /// Prompt tokens the judge read.
    pub prompt_tokens: u64,
    /// Tokens the judge generated.
    pub completion_tokens: u64,
}

/// The figures a benchmark reports of a rubric: each dimension's mean over the agents
/// (`judge.DIMENSION`), each agent's (`judge.DIMENSION.AGENT`), and the episode's
/// (`judge.DIMENSION.episode`).
pub fn figure_names(rubric_items: &[Item]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut push = |n: String| {
        if !names.contains(&n) {
            names.push(n);
        }
    };
    for item in rubric_items {
        if item.subject != EPISODE {
            push(format!("judge.{}", item.dimension));
        }
        push(format!("judge.{}.{}", item.dimension, item.subject));
    }
    names
}

/// A run's figures from its judgement (see [`figure_names`]); a dimension no agent
/// was scored on is `None`.
pub fn figures(judgement: &Judgement) -> IndexMap<String, Option<f64>> {
    let mut out: IndexMap<String, Option<f64>> = IndexMap::new();
    let mut by_dimension: IndexMap<&str, Vec<f64>> = IndexMap::new();
    for (subject, dims) in &judgement.scores {
        for (dimension, s) in dims {
            out.insert(format!("judge.{dimension}.{subject}"), Some(s.score));
            if subject != EPISODE {
                by_dimension.entry(dimension).or_default().push(s.score);
            }
        }
    }
    for (dimension, scores) in by_dimension {
        let mean = scores.iter().sum::<f64>() / scores.len() as f64;
        out.insert(format!("judge.{dimension}"), Some(mean));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::judge::{built_in, rubric_of, JudgeSpec};

    fn debate() -> Scenario {
        crate::scenario::from_document(
            std::path::Path::new("t.json"),
            serde_json::json!({
                "name": "t",
                "agents": {"Ann": {"stake": "Wants the ban.", "roles": {"talk": "A"}},
                           "Bo": {"style": "Blunt.", "roles": {"talk": "B"}}},
                "sop": {"start": "talk", "states": {"talk": {"roles": ["A", "B"],
                        "transition": {"max_turns": 2}, "next": ["end"]}}}
            }),
        )
        .unwrap()
    }

    #[test]
    fn a_rubric_makes_an_item_per_agent_and_dimension_with_the_transcript_first() {
        let spec = JudgeSpec {
            rubric: Some("sotopia".into()),
            leave_out: [
                "relationship",
                "knowledge",
                "secret",
                "social_rules",
                "financial_and_material_benefits",
            ]
            .map(String::from)
            .to_vec(),
            ..JudgeSpec::default()
        };
        let rubric = rubric_of(&spec, std::path::Path::new(".")).unwrap();
        let s = debate();
        let items = items(&rubric, &s);
        let named: Vec<(&str, &str)> = items
            .iter()
            .map(|i| (i.subject.as_str(), i.dimension.as_str()))
            .collect();
        assert_eq!(
            named,
            [
                ("Ann", "believability"),
                ("Ann", "goal"),
                ("Bo", "believability"),
                ("Bo", "goal")
            ]
        );
        assert_eq!(items[0].options.len(), 11);
        let messages = prompt(&rubric, &s, "Ann: Ban cars.\nBo: No.", &items[1]);
        let asked = &messages[1].content;
        assert!(asked.starts_with("Ann: Ban cars.\nBo: No."), "{asked}");
        assert!(
            asked.contains("What Ann was there for: Wants the ban."),
            "{asked}"
        );
        assert!(
            asked.ends_with("Answer with exactly one integer from 0 to 10."),
            "{asked}"
        );
        assert_eq!(
            figure_names(&items)[..2],
            ["judge.believability", "judge.believability.Ann"]
        );
        assert!(built_in("nobody").is_none());
    }

    #[test]
    fn answers_become_scores_exactly() {
        let item = Item {
            subject: "Ann".into(),
            dimension: "goal".into(),
            options: (0..=10).map(|v| v.to_string()).collect(),
        };
        let mut p = vec![0.0; 11];
        p[6] = 0.5;
        p[8] = 0.5;
        let answers = [
            Answer {
                chosen: Some(8),
                probabilities: Some(p),
                raw: "8".into(),
            },
            Answer {
                chosen: Some(6),
                probabilities: None,
                raw: "6".into(),
            },
            Answer {
                chosen: None,
                probabilities: None,
                raw: "".into(),
            },
        ];
        let s = score(&item, &answers).unwrap();
        assert_eq!(s.samples, [8.0, 6.0]);
        assert_eq!(s.score, 7.0);
        assert_eq!(s.sd, Some(2f64.sqrt()));
        assert_eq!(s.expected, Some(7.0));
        assert_eq!(s.raw, ["8", "6", ""]);
        assert!(score(&item, &answers[2..]).is_none());
    }
}
