//! The SOP engine: which role speaks next and when to change state. Pure logic, no I/O
//! and no actors; where a rule needs a model (the `llm` speaker rule, the judge) the
//! engine hands back a question and the Director feeds the answer in.
//!
//! Visits: entering a state starts a visit. A visit's turn counter starts at zero and its
//! opening (`begin_role` saying `begin_query`) happens on every visit, including
//! re-entries after other states. Staying in a state is not a new visit; a transition
//! that names the current state is a move, and starts one (a loop, such as a game round).
//! `max_visits` bounds such loops: a move into a state whose visits are used up goes to
//! its `on_max_visits` instead.

mod between_turns;
mod choice;

use std::collections::HashMap;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

pub use between_turns::{
    after_transit, controller_choice, judge_options, next_turns, AfterTransit, NextTurns,
};
pub use choice::{parse_choice, parse_choice_in};

use crate::scenario::{Scenario, SpeakerRule, State, Turns};

/// Who speaks next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Speaker {
    /// The visit's opening: `role` says `query` verbatim.
    Opening {
        /// The role that opens the visit.
        role: String,
        /// The state's `begin_query`.
        query: String,
    },
    /// `role` speaks through its agent's model.
    Role(String),
    /// The `llm` rule: ask the controller to choose among `choices`.
    Ask {
        /// The roles the controller may choose.
        choices: Vec<String>,
    },
    /// A simultaneous state: every role acts once, on the same information.
    Round {
        /// The roles that act, in the state's order.
        roles: Vec<String>,
    },
}

/// Where the SOP goes after a turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "to", content = "state", rename_all = "snake_case")]
pub enum Transition {
    /// Stay in the current state.
    Stay,
    /// Move to this state, starting a new visit of it.
    Move(String),
    /// End the run at the SOP's end.
    End,
}

/// What fired a transition, for events and the summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// A keyword of the state's transition rule appeared in a message.
    Keyword(String),
    /// The visit reached the state's `max_turns`.
    MaxTurns(u32),
    /// The visit reached the state's `max_rounds`.
    MaxRounds(u32),
    /// No rule fired.
    Nothing,
}

/// The result of checking the transition rules after a turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// The rules decided: the transition, and what fired it.
    Decided(Transition, Cause),
    /// Ask the judge; `choices[0]` is staying in the current state.
    AskJudge {
        /// The judge's choices: staying first, then each next state.
        choices: Vec<String>,
    },
}

/// The choice the judge is offered for staying.
pub const STAY: &str = "stay";

/// Routing state of one simulation.
#[derive(Debug, Clone)]
pub struct SopEngine {
    scenario: Arc<Scenario>,
    current: String,
    /// Visits started so far in the run (the current one included).
    visits: u32,
    /// Visits started so far, by state.
    visits_by_state: HashMap<String, u32>,
    turns_in_visit: u32,
    /// Simultaneous rounds finished in the current visit.
    rounds_in_visit: u32,
    next_in_order: usize,
    last_role: Option<String>,
    rng: ChaCha8Rng,
    finished: bool,
}

impl SopEngine {
    /// An engine at the start of the first visit of the start state.
    pub fn new(scenario: Arc<Scenario>, seed: u64) -> Self {
        let start = scenario.sop.start.clone();
        let mut engine = Self {
            scenario,
            current: start.clone(),
            visits: 0,
            visits_by_state: HashMap::new(),
            turns_in_visit: 0,
            rounds_in_visit: 0,
            next_in_order: 0,
            last_role: None,
            rng: ChaCha8Rng::seed_from_u64(seed),
            finished: false,
        };
        engine.enter(start);
        engine
    }

    /// The name of the current state.
    pub fn current_state(&self) -> &str {
        &self.current
    }

    /// The 1-based number of the current visit within the run.
    pub fn visit(&self) -> u32 {
        self.visits
    }

    /// Turns taken in the current visit.
    #[cfg(test)]
    pub fn turns_in_visit(&self) -> u32 {
        self.turns_in_visit
    }

    /// Whether the run has reached its end.
    #[cfg(test)]
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    fn state(&self) -> &State {
        &self.scenario.sop.states[&self.current]
    }

    /// Who speaks next in the current visit.
    pub fn next_speaker(&mut self) -> Speaker {
        let state = &self.scenario.sop.states[&self.current];
        let begin = self.scenario.begin_role(state).to_string();
        let simultaneous = state.turns == Turns::Simultaneous;
        if self.turns_in_visit == 0 {
            match &state.begin_query {
                Some(query) => {
                    return Speaker::Opening {
                        role: begin,
                        query: query.clone(),
                    }
                }
                None if !simultaneous => return Speaker::Role(begin),
                None => {}
            }
        }
        if simultaneous {
            return Speaker::Round {
                roles: state.roles.clone(),
            };
        }
        if state.roles.len() == 1 {
            return Speaker::Role(state.roles[0].clone());
        }
        match &state.speaker {
            SpeakerRule::Order => Speaker::Role(self.in_order()),
            SpeakerRule::Random => {
                let choices = self.others();
                let i = self.rng.random_range(0..choices.len());
                Speaker::Role(choices[i].clone())
            }
            SpeakerRule::Llm { .. } => Speaker::Ask {
                choices: self.others(),
            },
        }
    }

    /// The next role in round-robin order; also the `llm` rule's fallback.
    pub fn in_order(&self) -> String {
        let roles = &self.state().roles;
        roles[self.next_in_order % roles.len()].clone()
    }

    /// The state's roles except the last speaker's.
    fn others(&self) -> Vec<String> {
        self.state()
            .roles
            .iter()
            .filter(|r| Some(*r) != self.last_role.as_ref())
            .cloned()
            .collect()
    }

    /// Records that `role` took a turn in the current visit.
    pub fn record_turn(&mut self, role: &str) {
        let roles = &self.scenario.sop.states[&self.current].roles;
        if let Some(i) = roles.iter().position(|r| r == role) {
            self.next_in_order = (i + 1) % roles.len();
        }
        self.last_role = Some(role.to_string());
        self.turns_in_visit += 1;
    }

    /// Records that a simultaneous round of the current visit is over (its turns are
    /// recorded one by one with [`Self::record_turn`]).
    pub fn record_round(&mut self) {
        self.rounds_in_visit += 1;
    }

    /// Checks the current state's transition rules against the last message.
    pub fn check_transition(&self, last_message: &str) -> Check {
        self.check_round(&[last_message])
    }

    /// Checks the transition rules after a turn, or after a simultaneous round against
    /// all of its messages: for keywords, the first message (in the order of the
    /// state's roles) that contains one decides, and within it the first keyword
    /// listed.
    pub fn check_round(&self, messages: &[&str]) -> Check {
        let state = self.state();
        let rule = &state.transition;
        let found = messages.iter().find_map(|m| {
            let lower = m.to_lowercase();
            rule.keywords
                .iter()
                .find(|k| lower.contains(&k.keyword.to_lowercase()))
        });
        if let Some(kw) = found {
            return Check::Decided(self.target(&kw.to), Cause::Keyword(kw.keyword.clone()));
        }
        let limit = match (rule.max_turns, rule.max_rounds) {
            (Some(max), _) if self.turns_in_visit >= max => Some(Cause::MaxTurns(max)),
            (_, Some(max)) if self.rounds_in_visit >= max => Some(Cause::MaxRounds(max)),
            _ => None,
        };
        if let Some(cause) = limit {
            let to = rule
                .on_max_turns
                .as_ref()
                .or(state.next.first())
                .cloned()
                .unwrap_or_default();
            return Check::Decided(self.target(&to), cause);
        }
        if rule.judge.is_some() {
            let mut choices = vec![STAY.to_string()];
            choices.extend(state.next.iter().cloned());
            return Check::AskJudge { choices };
        }
        Check::Decided(Transition::Stay, Cause::Nothing)
    }

    /// The transition to the state (or end) called `name`, after the `max_visits`
    /// redirects.
    pub fn move_to(&self, name: &str) -> Transition {
        self.target(name)
    }

    /// The transition the judge ruled by choosing option `chosen` of `choices`
    /// (staying first, then each next state, as `judge_options` offers them); `None`
    /// when it gave no valid answer, and the run stays.
    pub fn judge_ruling(&self, chosen: Option<usize>, choices: &[String]) -> Option<Transition> {
        match chosen? {
            0 => Some(Transition::Stay),
            i => choices.get(i).map(|state| self.move_to(state)),
        }
    }

    /// Where a transition naming `name` leads, after the `max_visits` redirects.
    fn target(&self, name: &str) -> Transition {
        let mut name = name;
        // Validation ensures redirects lead on; the bound only guards against a cycle of
        // states that are all used up.
        for _ in 0..=self.scenario.sop.states.len() {
            if name == self.scenario.sop.end {
                return Transition::End;
            }
            let Some(state) = self.scenario.sop.states.get(name) else {
                break;
            };
            let t = &state.transition;
            match t.max_visits {
                Some(max) if self.visits_by_state.get(name).copied().unwrap_or(0) >= max => {
                    name = t.on_max_visits.as_deref().unwrap_or(&self.scenario.sop.end);
                }
                _ => return Transition::Move(name.to_string()),
            }
        }
        Transition::End
    }

    /// Applies a transition; a move starts a new visit of the target state.
    pub fn apply(&mut self, transition: &Transition) {
        match transition {
            Transition::Stay => {}
            Transition::End => self.finished = true,
            Transition::Move(to) => self.enter(to.clone()),
        }
    }

    fn enter(&mut self, state: String) {
        *self.visits_by_state.entry(state.clone()).or_default() += 1;
        self.current = state;
        self.visits += 1;
        self.turns_in_visit = 0;
        self.rounds_in_visit = 0;
        self.last_role = None;
        let st = &self.scenario.sop.states[&self.current];
        let begin = self.scenario.begin_role(st);
        self.next_in_order = st.roles.iter().position(|r| r == begin).unwrap_or(0);
    }
}

#[cfg(test)]
mod tests;
