//! Who may see which message when a scenario has populations.
//!
//! Cooperative mode: a member sees its own messages, its neighbours' and the public
//! record (the messages of agents outside every population), over the whole run; in a
//! `complete` network that is every message, as without populations. Competitive mode:
//! a member sees its own messages over the run and the public record of the current
//! visit only. Agents outside populations see what they see without populations.
//!
//! Each message's position goes, once, to the lists of those who may see it (its
//! speaker's and its speaker's neighbours'), so what a member sees costs what it sees,
//! never a scan of the population.

use std::collections::HashMap;

use crate::network::Neighbours;
use crate::scenario::{Mode, Scenario};

/// Members' views of the log.
#[derive(Debug, Clone)]
pub struct Audience {
    mode: Mode,
    /// Member name → its number across all populations.
    ids: HashMap<String, u32>,
    /// Per member: its neighbours' numbers; `None` in a complete network.
    neighbours: Vec<Option<Vec<u32>>>,
    /// Per member: the log positions it sees of the populations' messages.
    inbox: Vec<Vec<u32>>,
    /// Log positions of messages by agents outside every population.
    public: Vec<u32>,
    /// Whether any agent is shown the shared summary.
    summary_read: bool,
}

impl Audience {
    /// The members of `scenario`'s populations with their networks (`drawn`, one per
    /// population, from `network::draw_all`); `None` without populations.
    pub fn of(scenario: &Scenario, mode: Mode, drawn: &[Neighbours]) -> Option<Self> {
        if scenario.populations.is_empty() {
            return None;
        }
        // Members are numbered across populations: each population's first number.
        let mut bases = Vec::with_capacity(drawn.len());
        let mut links: Vec<Option<Vec<u32>>> = Vec::new();
        for (population, lists) in scenario.populations.values().zip(drawn) {
            let base = links.len() as u32;
            bases.push(base);
            for i in 0..population.count {
                links.push(
                    lists
                        .as_ref()
                        .map(|l| l[i].iter().map(|n| base + n).collect()),
                );
            }
        }
        let ids: HashMap<String, u32> = scenario
            .agents
            .iter()
            .filter_map(|(name, agent)| {
                let m = agent.member.as_ref()?;
                let p = scenario.populations.get_index_of(&m.population)?;
                Some((name.clone(), bases[p] + m.index))
            })
            .collect();
        let outsiders = ids.len() < scenario.agents.len();
        let whole = mode == Mode::Cooperative && links.iter().any(Option::is_none);
        Some(Self {
            mode,
            summary_read: outsiders || whole,
            ids,
            inbox: vec![Vec::new(); links.len()],
            neighbours: links,
            public: Vec::new(),
        })
    }

    /// Whether anyone is shown the shared summary (it covers every message, so members
    /// who see part of the log are not).
    pub fn summary_read(&self) -> bool {
        self.summary_read
    }

    /// A message by `speaker` was stored at `position`.
    pub fn record(&mut self, position: usize, speaker: &str) {
        let position = position as u32;
        let Some(&id) = self.ids.get(speaker) else {
            self.public.push(position);
            return;
        };
        self.inbox[id as usize].push(position);
        if self.mode == Mode::Cooperative {
            if let Some(list) = &self.neighbours[id as usize] {
                for &n in list {
                    self.inbox[n as usize].push(position);
                }
            }
        }
    }

    /// Whether `viewer`'s view is narrower than the whole visible log.
    fn narrowed(&self, viewer: &str) -> Option<usize> {
        let &id = self.ids.get(viewer)?;
        let whole = self.mode == Mode::Cooperative && self.neighbours[id as usize].is_none();
        (!whole).then_some(id as usize)
    }

    /// How many log positions `viewer` sees: as many as [`Self::visible`] gives without
    /// a limit, counted without listing them; `None` when it sees what everyone sees.
    pub fn visible_count(&self, viewer: &str, public_from: usize) -> Option<usize> {
        let id = self.narrowed(viewer)?;
        let first_public = self.public.partition_point(|&p| (p as usize) < public_from);
        Some(self.inbox[id].len() + self.public.len() - first_public)
    }

    /// The log positions `viewer` sees, oldest first: the last `limit` of them (all
    /// with `usize::MAX`); `None` when it sees what everyone sees. Public messages
    /// count from `public_from` (the visit's start in competitive mode).
    pub fn visible(&self, viewer: &str, public_from: usize, limit: usize) -> Option<Vec<usize>> {
        let id = self.narrowed(viewer)?;
        let own = &self.inbox[id];
        let first_public = self.public.partition_point(|&p| (p as usize) < public_from);
        let public = &self.public[first_public..];
        // Newest first, merging the two sorted lists from their ends.
        let (mut i, mut j) = (own.len(), public.len());
        let mut out = Vec::new();
        while out.len() < limit && (i > 0 || j > 0) {
            let take_own = j == 0 || (i > 0 && own[i - 1] > public[j - 1]);
            if take_own {
                i -= 1;
                out.push(own[i] as usize);
            } else {
                j -= 1;
                out.push(public[j] as usize);
            }
        }
        out.reverse();
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(network: &str, mode: &str) -> Scenario {
        crate::scenario::from_document(
            std::path::Path::new("t.json"),
            serde_json::json!({
                "name": "ring",
                "environment": {"type": mode},
                "agents": {"Host": {"roles": {"open": "Host"}}},
                "populations": {"crowd": {
                    "name": "P{i}", "count": 6, "roles": {"play": "Player"},
                    "network": serde_json::from_str::<serde_json::Value>(network).unwrap()
                }},
                "sop": {"start": "open", "states": {
                    "open": {"roles": ["Host"], "transition": {"max_turns": 1}, "next": ["play"]},
                    "play": {"roles": ["Player"], "turns": "simultaneous",
                             "transition": {"max_rounds": 2}, "next": ["end"]}
                }}
            }),
        )
        .unwrap()
    }

    /// Host speaks, then each of P1..P6 once, in order.
    fn filled(network: &str, mode: Mode) -> Audience {
        let s = scenario(network, mode.as_str());
        let drawn = crate::network::draw_all(s.populations.values(), 0).unwrap();
        let mut a = Audience::of(&s, mode, &drawn).unwrap();
        a.record(0, "Host");
        for i in 1..=6 {
            a.record(i, &format!("P{i}"));
        }
        a
    }

    #[test]
    fn on_a_ring_a_member_sees_itself_its_two_neighbours_and_the_host() {
        let a = filled(r#"{"kind": "ring"}"#, Mode::Cooperative);
        // P1's neighbours on a ring of six are P2 and P6 (positions 2 and 6).
        assert_eq!(a.visible("P1", 0, usize::MAX).unwrap(), [0, 1, 2, 6]);
        assert_eq!(a.visible("P4", 0, usize::MAX).unwrap(), [0, 3, 4, 5]);
        assert_eq!(
            a.visible("P4", 0, 2).unwrap(),
            [4, 5],
            "the newest, oldest first"
        );
        assert_eq!(
            a.visible("Host", 0, usize::MAX),
            None,
            "the host sees everything"
        );
        assert_eq!(a.visible_count("P1", 0), Some(4));
        assert_eq!(a.visible_count("Host", 0), None);
    }

    #[test]
    fn complete_cooperative_members_see_everything_and_competitive_ones_only_themselves() {
        let a = filled(r#"{"kind": "complete"}"#, Mode::Cooperative);
        assert_eq!(a.visible("P3", 0, usize::MAX), None);
        assert!(a.summary_read(), "the host reads it");
        let a = filled(r#"{"kind": "ring"}"#, Mode::Competitive);
        assert_eq!(a.visible("P3", 0, usize::MAX).unwrap(), [0, 3]);
        assert_eq!(
            a.visible("P3", 1, usize::MAX).unwrap(),
            [3],
            "the public record of earlier visits is gone"
        );
        assert_eq!(a.visible_count("P3", 1), Some(1));
    }
}
