//! The `probes` section: surveys and interviews put to agents during a run that
//! leave no trace in it. Each probe has a question, whom it asks (agents, roles, a
//! population, or a seeded sample of them), when (at the start, after each round of
//! a state, every N turns, at the end) and the form of its answer (free text, a number
//! in a range, a closed choice). The answers go to `probes.jsonl`, never into any
//! memory, transcript or prompt. Validation and the pure decisions a run makes of it
//! (who is asked when, in which order the options are shown) live here; `svo.rs` is the
//! one validated instrument built in.

pub mod svo;

use indexmap::IndexMap;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::scenario::format::{LlmSettings, Scenario};
use crate::scenario::path::FieldPath;

/// Probes by name, as the scenario holds them.
pub type Probes = IndexMap<String, ProbeSpec>;

/// A question put to agents without changing the run.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProbeSpec {
    /// The question, as the agent reads it after its memory of the run so far.
    pub question: String,
    /// Whom it asks.
    pub ask: ProbeAsk,
    /// When it is asked: `"start"` (before the first turn), `"end"` (after the last),
    /// `{"after": STATE}` (after each visit of the state, or each round of a
    /// simultaneous one) and `{"every": N}` (after every N turns), any of them.
    pub when: Vec<ProbeWhen>,
    /// The answer's form.
    pub answer: AnswerForm,
    /// Settings of the probe's model calls over the scenario's (`temperature`,
    /// `max_tokens`, a `backend` and `model` of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmSettings>,
    /// Where the instrument comes from (a citation), for people reading the results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// Whom a probe asks: the agents named, every agent playing a role named, a
/// population's members; `sample` draws that many of them each time (seeded).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProbeAsk {
    /// Agents by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<String>,
    /// Every agent that plays one of these roles in some state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<String>,
    /// A population's members.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub population: Option<String>,
    /// Ask only this many of them each time, drawn from the run's seed (a panel of
    /// a large population).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub sample: Option<u32>,
}

/// When a probe is asked.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum ProbeWhen {
    /// `"start"` or `"end"`.
    At(RunEdge),
    /// After each visit of this state (each round, when its turns are simultaneous).
    After {
        /// The state's name.
        after: String,
    },
    /// After every this many turns.
    Every {
        /// How many turns between askings.
        #[schemars(range(min = 1))]
        every: u64,
    },
}

/// The start or the end of a run.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RunEdge {
    /// Before the first turn.
    Start,
    /// After the last turn.
    End,
}

/// The form of an answer.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum AnswerForm {
    /// Free text, at most `max_tokens` long (default 120).
    Text {
        /// The longest answer, in tokens (default 120).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(range(min = 1))]
        max_tokens: Option<u32>,
    },
    /// A number from `min` to `max` by `step` (default 1), chosen as a closed choice
    /// (with every number's probability where the backend can tell).
    Number {
        /// The lowest number.
        min: f64,
        /// The highest number.
        max: f64,
        /// The step between numbers (default 1); it must divide the range.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step: Option<f64>,
    },
    /// One of `options`, in the question's order (a Likert scale lists its points),
    /// with every option's probability where the backend can tell. They are shown to
    /// each agent in an order of its own, drawn from the seed, unless `shuffle` is
    /// false.
    Choice {
        /// The options, in the question's order.
        options: Vec<String>,
        /// Whether each agent sees the options in an order of its own (default true).
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        shuffle: bool,
    },
    /// The Social Value Orientation slider measure (Murphy, Ackermann and Handgraaf
    /// 2011): its six primary items asked in turn, each a choice among nine
    /// allocations of money between the agent and another person. The answer is the
    /// category (`altruistic`, `prosocial`, `individualistic`, `competitive`), the
    /// value the SVO angle in degrees; `question` introduces the items.
    SvoSlider {},
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

/// The most probes a scenario may have, and the longest question.
pub const MAX_PROBES: usize = 256;
const MAX_QUESTION_BYTES: usize = 8 * 1024;

impl AnswerForm {
    /// The options of a closed answer in the question's order (none for free text).
    pub fn options(&self) -> Vec<String> {
        match self {
            AnswerForm::Text { .. } | AnswerForm::SvoSlider {} => Vec::new(),
            AnswerForm::Choice { options, .. } => options.clone(),
            AnswerForm::Number { min, max, step } => crate::scenario::ChoiceSpec {
                range: Some([*min, *max, step.unwrap_or(1.0)]),
                ..crate::scenario::ChoiceSpec::default()
            }
            .options(),
        }
    }

    /// Whether the options are shown in an order drawn for each agent.
    pub fn shuffled(&self) -> bool {
        matches!(self, AnswerForm::Choice { shuffle: true, .. })
    }
}

/// A moment of a run at which probes may be due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Occasion<'a> {
    /// Before the first turn.
    Start,
    /// After the last turn.
    End,
    /// A visit of `state` ended, or a round of it when its turns are simultaneous.
    AfterRound {
        /// The state's name.
        state: &'a str,
    },
    /// Turns were taken: the run had taken `before` and now has taken `after`.
    Turns {
        /// Turns taken before.
        before: u64,
        /// Turns taken now.
        after: u64,
    },
}

/// The probes due at `occasion`, in the scenario's order, each with how its `when`
/// is written in `probes.jsonl` (`start`, `end`, `after:STATE`, `every:N`).
pub fn due<'p>(probes: &'p Probes, occasion: Occasion<'_>) -> Vec<(&'p str, String)> {
    probes
        .iter()
        .filter_map(|(name, p)| {
            let when = p.when.iter().find_map(|w| match (w, occasion) {
                (ProbeWhen::At(RunEdge::Start), Occasion::Start) => Some("start".to_string()),
                (ProbeWhen::At(RunEdge::End), Occasion::End) => Some("end".to_string()),
                (ProbeWhen::After { after }, Occasion::AfterRound { state }) if after == state => {
                    Some(format!("after:{state}"))
                }
                (ProbeWhen::Every { every }, Occasion::Turns { before, after })
                    if *every > 0 && after / every > before / every =>
                {
                    Some(format!("every:{every}"))
                }
                _ => None,
            })?;
            Some((name.as_str(), when))
        })
        .collect()
}

/// One answer to a probe: a line of `probes.jsonl`, written as the answer comes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProbeLine {
    /// The probe's name in the scenario's `probes`.
    pub probe: String,
    /// The agent (or population member) that answered.
    pub agent: String,
    /// What it was asked at: `start`, `end`, `after:STATE`, `every:N`.
    pub when: String,
    /// How many times the probe had been asked before (the panel's wave, from 0).
    pub asking: u64,
    /// The turns the run had taken.
    pub turn: u64,
    /// The world's rounds closed, in a scenario with a world.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<u32>,
    /// The state the run was in.
    pub state: String,
    /// The answer: the text, or the option chosen (empty when none could be read).
    pub answer: String,
    /// A number's value, or a choice's place in the question's order (from 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// Every option's probability, in the question's order, where the backend could
    /// tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probabilities: Option<IndexMap<String, f64>>,
    /// The order the options were shown in, as places in the question's order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shown: Option<Vec<usize>>,
    /// An instrument's answer to each of its items (the SVO slider's positions, 0 to
    /// 8 from the left).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Vec<usize>>,
}

/// The figures a benchmark reports of the probes: a number's and the SVO angle's
/// mean (`probe.NAME.mean`), and each option's share of the answers
/// (`probe.NAME.share.OPTION`; the SVO's categories as its options). Free text has
/// none.
pub fn figure_names(probes: &Probes) -> Vec<String> {
    let mut names = Vec::new();
    for (name, p) in probes {
        if matches!(
            p.answer,
            AnswerForm::Number { .. } | AnswerForm::SvoSlider {}
        ) {
            names.push(format!("probe.{name}.mean"));
        }
        for option in shared_options(&p.answer) {
            names.push(format!("probe.{name}.share.{option}"));
        }
    }
    names
}

/// The options whose shares are reported: a choice's, and the SVO's categories.
fn shared_options(form: &AnswerForm) -> Vec<String> {
    match form {
        AnswerForm::Choice { options, .. } => options.clone(),
        AnswerForm::SvoSlider {} => svo::CATEGORIES.iter().map(|c| c.to_string()).collect(),
        AnswerForm::Text { .. } | AnswerForm::Number { .. } => Vec::new(),
    }
}

/// A run's probe figures from its `probes.jsonl`: each of [`figure_names`] over all
/// its answers, and the same by asking (the panel's waves: series indexed by
/// `asking`). A figure with no answer is `None`.
#[allow(clippy::type_complexity)]
pub fn figures(
    probes: &Probes,
    lines: &[ProbeLine],
) -> (
    IndexMap<String, Option<f64>>,
    IndexMap<String, Vec<Option<f64>>>,
) {
    let mut all = IndexMap::new();
    let mut by_asking: IndexMap<String, Vec<Option<f64>>> = IndexMap::new();
    for (name, p) in probes {
        let answers: Vec<&ProbeLine> = lines.iter().filter(|l| &l.probe == name).collect();
        let waves = answers.iter().map(|l| l.asking + 1).max().unwrap_or(0) as usize;
        let mean = |of: &[&&ProbeLine]| -> Option<f64> {
            let values: Vec<f64> = of.iter().filter_map(|l| l.value).collect();
            (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
        };
        let share = |of: &[&&ProbeLine], option: &str| -> Option<f64> {
            (!of.is_empty())
                .then(|| of.iter().filter(|l| l.answer == option).count() as f64 / of.len() as f64)
        };
        let wave = |w: usize| -> Vec<&&ProbeLine> {
            answers.iter().filter(|l| l.asking as usize == w).collect()
        };
        let everyone: Vec<&&ProbeLine> = answers.iter().collect();
        if matches!(
            p.answer,
            AnswerForm::Number { .. } | AnswerForm::SvoSlider {}
        ) {
            let key = format!("probe.{name}.mean");
            all.insert(key.clone(), mean(&everyone));
            by_asking.insert(key, (0..waves).map(|w| mean(&wave(w))).collect());
        }
        for option in shared_options(&p.answer) {
            let key = format!("probe.{name}.share.{option}");
            all.insert(key.clone(), share(&everyone, &option));
            by_asking.insert(key, (0..waves).map(|w| share(&wave(w), &option)).collect());
        }
    }
    (all, by_asking)
}

/// The order agent `agent` is shown `n` options of probe `probe` in: a permutation of
/// `0..n` drawn from the run's seed, the probe and the agent (the same at every
/// asking, so an agent's answers over time are comparable).
pub fn shown_order(seed: u64, probe: &str, agent: &str, n: usize) -> Vec<usize> {
    let mut hasher = xxhash_rust::xxh3::Xxh3::with_seed(seed);
    hasher.update(b"probe order\0");
    hasher.update(probe.as_bytes());
    hasher.update(b"\0");
    hasher.update(agent.as_bytes());
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(hasher.digest());
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut rng);
    order
}

/// The agents a probe asks, in the scenario's agent order, before any sample.
pub fn asked(scenario: &Scenario, ask: &ProbeAsk) -> Vec<String> {
    scenario
        .agents
        .iter()
        .filter(|(name, agent)| {
            ask.agents.contains(name)
                || agent.roles.values().any(|r| ask.roles.contains(r))
                || agent
                    .member
                    .as_ref()
                    .is_some_and(|m| ask.population.as_deref() == Some(m.population.as_str()))
        })
        .map(|(name, _)| name.clone())
        .collect()
}

/// `sample` of `agents`, drawn from the seed for the probe's asking number `asking`,
/// kept in the agents' order; all of them when there are no more than that.
pub fn sampled(
    agents: &[String],
    sample: Option<u32>,
    seed: u64,
    probe: &str,
    asking: u64,
) -> Vec<String> {
    let Some(k) = sample.map(|k| k as usize).filter(|k| *k < agents.len()) else {
        return agents.to_vec();
    };
    let mut hasher = xxhash_rust::xxh3::Xxh3::with_seed(seed);
    hasher.update(b"probe sample\0");
    hasher.update(probe.as_bytes());
    hasher.update(&asking.to_le_bytes());
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(hasher.digest());
    let mut picked = rand::seq::index::sample(&mut rng, agents.len(), k).into_vec();
    picked.sort_unstable();
    picked.into_iter().map(|i| agents[i].clone()).collect()
}

/// Every problem with the scenario's probes.
pub fn check(s: &Scenario) -> Vec<(FieldPath, String)> {
    let mut out = Vec::new();
    let at = FieldPath::root().key("probes");
    if s.probes.len() > MAX_PROBES {
        out.push((
            at,
            format!(
                "{} probes: a scenario has at most {MAX_PROBES}",
                s.probes.len()
            ),
        ));
        return out;
    }
    for (name, p) in &s.probes {
        check_one(s, at.key(name), p, &mut out);
    }
    out
}

fn check_one(s: &Scenario, at: FieldPath, p: &ProbeSpec, out: &mut Vec<(FieldPath, String)>) {
    let mut problem = |path: FieldPath, message: String| out.push((path, message));
    if p.question.trim().is_empty() {
        problem(at.key("question"), "must not be empty".into());
    }
    if p.question.len() > MAX_QUESTION_BYTES {
        problem(
            at.key("question"),
            format!("{} bytes: at most {MAX_QUESTION_BYTES}", p.question.len()),
        );
    }
    if s.world.is_some() && crate::scenario::expr::is_template(&p.question) {
        let sizes = crate::scenario::expr::sizes_of(s);
        if let Err(e) = crate::scenario::expr::template_names(&p.question, sizes) {
            problem(
                at.key("question"),
                format!("not a template that can be filled: {e}"),
            );
        }
    }
    let ask = at.key("ask");
    for agent in &p.ask.agents {
        if !s.agents.contains_key(agent) {
            problem(ask.key("agents"), format!("no agent is named {agent:?}"));
        }
    }
    for role in &p.ask.roles {
        if !s
            .agents
            .values()
            .any(|a| a.roles.values().any(|r| r == role))
        {
            problem(
                ask.key("roles"),
                format!("no agent plays the role {role:?}"),
            );
        }
    }
    if let Some(pop) = &p.ask.population {
        if !s.populations.contains_key(pop) {
            problem(
                ask.key("population"),
                format!("no population is named {pop:?}"),
            );
        }
    }
    if p.ask.agents.is_empty() && p.ask.roles.is_empty() && p.ask.population.is_none() {
        problem(
            ask.clone(),
            "names no one to ask: give `agents`, `roles` or a `population`".into(),
        );
    } else if asked(s, &p.ask).is_empty() {
        problem(ask.clone(), "asks no agent of this scenario".into());
    }
    if let Some(human) = asked(s, &p.ask).iter().find(|a| s.agents[a.as_str()].human) {
        problem(
            ask.clone(),
            format!("{human:?} is played by a person, whom a probe cannot ask"),
        );
    }
    if p.when.is_empty() {
        problem(
            at.key("when"),
            "say when: \"start\", \"end\", {\"after\": STATE} or {\"every\": N}".into(),
        );
    }
    for (i, when) in p.when.iter().enumerate() {
        match when {
            ProbeWhen::After { after } if !s.sop.states.contains_key(after) => problem(
                at.key("when").index(i),
                format!("no state is named {after:?}"),
            ),
            ProbeWhen::Every { every: 0 } => {
                problem(at.key("when").index(i), "every 0 turns: at least 1".into())
            }
            _ => {}
        }
    }
    let answer = at.key("answer");
    match &p.answer {
        AnswerForm::Text {
            max_tokens: Some(0),
        } => problem(answer.key("text").key("max_tokens"), "at least 1".into()),
        AnswerForm::Text { .. } | AnswerForm::SvoSlider {} => {}
        AnswerForm::Number { min, max, step } => {
            let step = step.unwrap_or(1.0);
            if !(min.is_finite() && max.is_finite() && step.is_finite()) {
                problem(
                    answer.key("number"),
                    "min, max and step must be finite".into(),
                );
            } else if min >= max {
                problem(
                    answer.key("number").key("max"),
                    format!("{max}: must be above min ({min})"),
                );
            } else if let Err(e) = crate::scenario::range_count(*min, *max, step) {
                problem(answer.key("number").key("step"), e.to_string());
            }
        }
        AnswerForm::Choice { options, .. } => {
            let at = answer.key("choice").key("options");
            if options.len() < 2 {
                problem(at.clone(), "list at least two options".into());
            }
            for (i, o) in options.iter().enumerate() {
                if o.trim().is_empty() {
                    problem(at.index(i), "must not be empty".into());
                }
                if options[..i].contains(o) {
                    problem(at.index(i), format!("{o:?} is listed twice"));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_order_and_a_sample_are_drawn_from_the_seed_and_the_names() {
        let a = shown_order(7, "svo", "Ann", 9);
        assert_eq!(a, shown_order(7, "svo", "Ann", 9));
        assert_ne!(a, shown_order(7, "svo", "Bo", 9));
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..9).collect::<Vec<_>>());
        let crowd: Vec<String> = (0..1000).map(|i| format!("m{i}")).collect();
        let first = sampled(&crowd, Some(10), 3, "mood", 1);
        assert_eq!(first.len(), 10);
        assert_eq!(first, sampled(&crowd, Some(10), 3, "mood", 1));
        assert_ne!(first, sampled(&crowd, Some(10), 3, "mood", 2));
        assert!(first
            .windows(2)
            .all(|w| { w[0][1..].parse::<u32>().unwrap() < w[1][1..].parse::<u32>().unwrap() }));
        assert_eq!(sampled(&crowd[..5], Some(10), 3, "mood", 1).len(), 5);
    }

    #[test]
    fn probes_are_due_at_their_occasions() {
        let probes: Probes = serde_json::from_value(serde_json::json!({
            "mood": {"question": "How are you?", "ask": {"roles": ["R"]},
                     "when": ["start", {"after": "talk"}], "answer": {"text": {}}},
            "count": {"question": "How many?", "ask": {"roles": ["R"]},
                      "when": [{"every": 4}, "end"], "answer": {"number": {"min": 0, "max": 3}}}
        }))
        .unwrap();
        let names = |o| due(&probes, o);
        assert_eq!(names(Occasion::Start), [("mood", "start".to_string())]);
        assert_eq!(names(Occasion::End), [("count", "end".to_string())]);
        assert_eq!(
            names(Occasion::AfterRound { state: "talk" }),
            [("mood", "after:talk".to_string())]
        );
        assert!(names(Occasion::AfterRound { state: "vote" }).is_empty());
        assert!(names(Occasion::Turns {
            before: 1,
            after: 3
        })
        .is_empty());
        assert_eq!(
            names(Occasion::Turns {
                before: 3,
                after: 9
            }),
            [("count", "every:4".to_string())]
        );
    }

    #[test]
    fn a_number_scale_and_a_choice_give_their_options_in_order() {
        let n = AnswerForm::Number {
            min: 1.0,
            max: 7.0,
            step: None,
        };
        assert_eq!(n.options(), ["1", "2", "3", "4", "5", "6", "7"]);
        assert!(!n.shuffled());
        let c: AnswerForm =
            serde_json::from_value(serde_json::json!({"choice": {"options": ["no", "yes"]}}))
                .unwrap();
        assert!(c.shuffled());
        let when: Vec<ProbeWhen> = serde_json::from_value(
            serde_json::json!(["start", {"after": "fish"}, {"every": 3}, "end"]),
        )
        .unwrap();
        assert_eq!(
            when,
            [
                ProbeWhen::At(RunEdge::Start),
                ProbeWhen::After {
                    after: "fish".into()
                },
                ProbeWhen::Every { every: 3 },
                ProbeWhen::At(RunEdge::End)
            ]
        );
    }
}
