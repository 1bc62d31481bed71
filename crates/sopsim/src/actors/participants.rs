//! Who the other participants of a turn are: the names and roles a reply must not go
//! on as (it is cut there, and the model is stopped there).

use crate::scenario::Scenario;
use sopsim_core::memory::Observation;

/// Scenarios with at most this many agents name every other participant as a speaker
/// a reply stops at; in a larger one (a population) an agent's turn names those its
/// observation shows ([`seen_labels`]), so a turn's cost does not grow with the
/// population.
const LISTED_PARTICIPANTS: usize = 64;

/// Whether the others of a turn are the participants its observation shows.
pub(super) fn others_seen(scenario: &Scenario) -> bool {
    scenario.agents.len() > LISTED_PARTICIPANTS
}

/// What the other participants are called here: every other agent's name, and every
/// other role of the state (none when [`others_seen`]: they come from the
/// observation). A reply stops where it goes on as one of them.
pub(super) fn other_labels(
    scenario: &Scenario,
    state: &str,
    name: &str,
    role: &str,
) -> Vec<String> {
    if others_seen(scenario) {
        return Vec::new();
    }
    let mut labels: Vec<String> = scenario
        .agents
        .keys()
        .filter(|n| *n != name)
        .cloned()
        .collect();
    if let Some(st) = scenario.sop.states.get(state) {
        for r in st.roles.iter().filter(|r| *r != role) {
            if !labels.contains(r) {
                labels.push(r.clone());
            }
        }
    }
    labels
}

/// The names and roles of the others who speak in what an agent observes, in the
/// order they appear: the speakers a reply may go on as.
pub(super) fn seen_labels(obs: &Observation, name: &str, role: &str) -> Vec<String> {
    let mut labels: Vec<String> = Vec::new();
    for m in obs.relevant.iter().chain(&obs.recent) {
        for (label, own) in [(&m.name, name), (&m.role, role)] {
            if label != own && !labels.contains(label) {
                labels.push(label.clone());
            }
        }
    }
    labels
}

/// The stop sequences that start a line of one of `others`.
pub(super) fn speaker_stops(others: &[String]) -> Vec<String> {
    others.iter().map(|o| format!("\n{o}:")).collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use sopsim_core::memory::{Message, MessageKind};

    fn said(name: &str, role: &str) -> Arc<Message> {
        Arc::new(Message {
            seq: 0,
            state: "s".into(),
            visit: 1,
            role: role.into(),
            name: name.into(),
            content: "…".into(),
            kind: MessageKind::Reply,
            decision: None,
        })
    }

    #[test]
    fn a_population_member_stops_at_those_it_has_seen() {
        let obs = Observation {
            relevant: vec![said("P9", "Player")],
            recent: vec![
                said("P1", "Player"),
                said("P2", "Host"),
                said("P1", "Player"),
                said("P3", "Player"),
            ],
            ..Observation::default()
        };
        assert_eq!(
            seen_labels(&obs, "P3", "Player"),
            ["P9", "P1", "P2", "Host"]
        );
        assert_eq!(speaker_stops(&["P9".into()]), ["\nP9:"]);
    }
}
