//! A finished run's Environment made again from its files, for questions put to its
//! agents afterwards (`sopsim interview`): its messages recorded again in order, each
//! in the visit it was said in, and the latest summary made by then. No embedding is
//! made again, so what an agent sees is its recent messages and the summary, never
//! retrieved history.

use std::sync::Arc;

use super::Environment;
use crate::memory::{Message, Summary};
use crate::scenario::{Mode, Scenario};

/// The Environment of a run of `scenario` in `mode` as it stood after the message
/// numbered `through` (after every message of `log` when `None`), with the latest of
/// `summaries` that covers no later message.
pub fn replayed(
    scenario: &Scenario,
    mode: Mode,
    log: &[Arc<Message>],
    summaries: &[Summary],
    through: Option<u64>,
) -> Environment {
    let mut env = Environment::new(scenario, mode);
    let mut at: Option<(&str, u32)> = None;
    let said = log.iter().filter(|m| through.is_none_or(|t| m.seq <= t));
    for m in said {
        if at != Some((m.state.as_str(), m.visit)) {
            env.enter(m.state.clone(), m.visit);
            at = Some((m.state.as_str(), m.visit));
        }
        // The summaries a recording asks for are the run's own, read below.
        let _ = env.record(vec![(Message::clone(m), &[][..])]);
    }
    let last = log
        .iter()
        .filter(|m| through.is_none_or(|t| m.seq <= t))
        .map(|m| m.seq)
        .max();
    if let Some(summary) = summaries
        .iter()
        .rev()
        .find(|s| last.is_some_and(|l| s.through_seq <= l))
    {
        env.set_summary(summary.text.clone());
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MessageKind;

    fn said(seq: u64, state: &str, visit: u32, name: &str, content: &str) -> Arc<Message> {
        Arc::new(Message {
            seq,
            state: state.into(),
            visit,
            role: "R".into(),
            name: name.into(),
            content: content.into(),
            kind: MessageKind::Reply,
            decision: None,
        })
    }

    #[test]
    fn an_agent_sees_what_it_saw_then_with_the_summary_made_by_then() {
        let scenario: Scenario = crate::scenario::from_document(
            std::path::Path::new("t.json"),
            serde_json::json!({
                "name": "t",
                "agents": {"Ann": {"roles": {"a": "R", "b": "R"}}},
                "sop": {"start": "a", "states": {
                    "a": {"roles": ["R"], "transition": {"max_turns": 2}, "next": ["b"]},
                    "b": {"roles": ["R"], "transition": {"max_turns": 2}, "next": ["end"]}
                }}
            }),
        )
        .unwrap();
        let log = [
            said(0, "a", 1, "Ann", "first"),
            said(1, "a", 1, "Ann", "second"),
            said(2, "b", 2, "Ann", "third"),
        ];
        let summaries = [
            Summary {
                text: "Ann spoke twice.".into(),
                through_seq: 1,
            },
            Summary {
                text: "Ann spoke three times.".into(),
                through_seq: 2,
            },
        ];
        let env = replayed(&scenario, Mode::Competitive, &log, &summaries, Some(1));
        let obs = env.observe(Some("Ann"));
        let seen: Vec<&str> = obs.recent.iter().map(|m| m.content.as_str()).collect();
        assert_eq!(seen, ["first", "second"]);
        assert_eq!(obs.summary.as_deref(), Some("Ann spoke twice."));
        // At the end, competitive: only the last visit's messages.
        let env = replayed(&scenario, Mode::Competitive, &log, &summaries, None);
        let obs = env.observe(Some("Ann"));
        let seen: Vec<&str> = obs.recent.iter().map(|m| m.content.as_str()).collect();
        assert_eq!(seen, ["third"]);
    }
}
