//! The Director's state between turns, as data: turn and round counters, the turn
//! limit and budgets, the warnings and parse failures a run collects, and a resumed
//! run's catch-up. Pure: the Director actor asks it whether the next turn may start,
//! tells it what happened, and emits what it says; every rule here is unit-tested
//! without actix.

use serde::{Deserialize, Serialize};

/// Why a run ended (`ended_by` in `summary.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// A transition reached the SOP's end.
    End,
    /// The turn limit (`--max-turns` or `sop.max_turns`) was reached.
    MaxTurns,
    /// A human agent's input ended.
    InputClosed,
    /// Interrupted (Ctrl-C) between turns.
    Interrupted,
    /// `--budget-usd` or `--max-total-tokens` was reached; `stop_reason` says which.
    Budget,
    /// A runtime failure; `error` says what.
    Error,
    /// A condition of the world's `end_if` held after a round; `ended_if` names it.
    EndIf,
}

impl EndReason {
    /// The reason as `ended_by` names it (`end`, `max_turns`, `end_if`…).
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::End => "end",
            EndReason::MaxTurns => "max_turns",
            EndReason::InputClosed => "input_closed",
            EndReason::Interrupted => "interrupted",
            EndReason::Budget => "budget",
            EndReason::Error => "error",
            EndReason::EndIf => "end_if",
        }
    }

    /// Whether the run ended by its own course (its SOP, its limits), after which a
    /// resumed run must have said every line of the killed one.
    pub fn ends_the_course(self) -> bool {
        matches!(
            self,
            EndReason::End | EndReason::MaxTurns | EndReason::Budget | EndReason::EndIf
        )
    }
}

/// Model answers the routing rules could not use (`parse_failures` in `summary.json`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ParseFailures {
    /// Speaker-controller answers that named no offered role.
    pub controller_answers: u64,
    /// Turns where the controller's answer failed and the order rule chose.
    pub controller_fallbacks: u64,
    /// Judge answers that named no offered choice (the state stayed).
    pub judge_answers: u64,
}

/// The limits a run keeps between turns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TurnLimits {
    /// The most turns the run may play.
    pub max_turns: u64,
    /// The spend in US dollars at which the run stops (`--budget-usd`), if set.
    pub budget_usd: Option<f64>,
    /// The tokens (prompt and completion) at which the run stops (`--max-total-tokens`).
    pub max_total_tokens: Option<u64>,
}

/// What a run has spent so far, as the budget checks read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Spend {
    /// Prompt and completion tokens used.
    pub tokens: u64,
    /// US dollars; `None` when a model's price is unknown.
    pub usd: Option<f64>,
    /// The models whose price is unknown.
    pub unpriced: Vec<String>,
}

/// Whether the next turn may start.
#[derive(Debug, Clone, PartialEq)]
pub enum Gate {
    /// The next turn may start.
    Go,
    /// Paused: wait for a control.
    Wait,
    /// The run ends here, with the budget's reason when a budget ended it.
    Stop(EndReason),
}

/// The turns about to be played.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Begun {
    /// The run's number of the first of them (from 1).
    pub first_turn: u64,
    /// The round's number, for a simultaneous round.
    pub round: Option<u32>,
}

/// A run's course between turns.
#[derive(Debug)]
pub struct RunState {
    limits: TurnLimits,
    turn: u64,
    rounds: u32,
    messages: u64,
    warnings: Vec<String>,
    stop_reason: Option<String>,
    budget_unknown_warned: bool,
    failures: ParseFailures,
    /// A resumed run that has not yet said again every line of its killed run.
    catching_up: bool,
}

impl RunState {
    /// A run about to start; `notes` start its warnings; `resumed` when it continues a
    /// killed run.
    pub fn new(limits: TurnLimits, notes: Vec<String>, resumed: bool) -> Self {
        Self {
            limits,
            turn: 0,
            rounds: 0,
            messages: 0,
            warnings: notes,
            stop_reason: None,
            budget_unknown_warned: false,
            failures: ParseFailures::default(),
            catching_up: resumed,
        }
    }

    /// Turns played so far.
    pub fn turns(&self) -> u64 {
        self.turn
    }

    /// The most turns the run may play.
    pub fn max_turns(&self) -> u64 {
        self.limits.max_turns
    }

    /// Whether the next turn may start: a cancelled or stopped run ends, a paused one
    /// waits, then the turn limit and the budgets (`spend` is asked only when a budget
    /// is set). A budget whose price is unknown cannot be enforced: the returned
    /// warning says so, once.
    pub fn gate(
        &mut self,
        cancelled: bool,
        may_start: bool,
        spend: impl FnOnce() -> Spend,
    ) -> (Gate, Option<String>) {
        if cancelled {
            return (Gate::Stop(EndReason::Interrupted), None);
        }
        if !may_start {
            return (Gate::Wait, None);
        }
        if self.turn >= self.limits.max_turns {
            return (Gate::Stop(EndReason::MaxTurns), None);
        }
        let l = self.limits;
        if l.budget_usd.is_none() && l.max_total_tokens.is_none() {
            return (Gate::Go, None);
        }
        let spend = spend();
        if let Some(max) = l.max_total_tokens.filter(|max| spend.tokens >= *max) {
            self.stop_reason = Some(format!(
                "max_total_tokens {max} reached: {} tokens used",
                spend.tokens
            ));
            return (Gate::Stop(EndReason::Budget), None);
        }
        let Some(budget) = l.budget_usd else {
            return (Gate::Go, None);
        };
        match spend.usd {
            Some(usd) if usd >= budget => {
                self.stop_reason = Some(format!("budget of ${budget} reached: ${usd:.6} spent"));
                (Gate::Stop(EndReason::Budget), None)
            }
            Some(_) => (Gate::Go, None),
            None if self.budget_unknown_warned => (Gate::Go, None),
            None => {
                self.budget_unknown_warned = true;
                let warning = format!(
                    "the budget of ${budget} cannot be enforced: no price for {}",
                    spend.unpriced.join(", ")
                );
                self.warnings.push(warning.clone());
                (Gate::Go, Some(warning))
            }
        }
    }

    /// Whether a round of `seats` turns fits the turn limit: a round is all or nothing.
    pub fn round_fits(&self, seats: u64) -> bool {
        self.turn + seats <= self.limits.max_turns
    }

    /// Counts `n` turns as begun (a simultaneous round's, or one).
    pub fn begin(&mut self, n: u64, simultaneous: bool) -> Begun {
        let round = simultaneous.then(|| {
            self.rounds += 1;
            self.rounds
        });
        let first_turn = self.turn + 1;
        self.turn += n;
        Begun { first_turn, round }
    }

    /// Takes back `n` begun turns of which nothing was committed.
    pub fn abandon(&mut self, n: u64) {
        self.turn -= n;
    }

    /// Counts a committed message; returns the messages said so far when it was the
    /// one with which a resumed run caught up with its killed run (`caught_up`: the
    /// transcript says it has).
    pub fn committed(&mut self, caught_up: bool) -> Option<u64> {
        self.messages += 1;
        self.caught_up_now(caught_up)
    }

    /// Returns the messages said so far when a resumed run has caught up (before any
    /// turn, for a killed run with no whole line).
    pub fn caught_up_now(&mut self, caught_up: bool) -> Option<u64> {
        if self.catching_up && caught_up {
            self.catching_up = false;
            return Some(self.messages);
        }
        None
    }

    /// Keeps a warning; returns it for the sinks.
    pub fn warn(&mut self, text: String) -> String {
        self.warnings.push(text.clone());
        text
    }

    /// The speaker controller named none of `choices`: the order rule's `fallback`
    /// speaks. Returns the warning.
    pub fn controller_failed(&mut self, choices: &[String], fallback: &str) -> String {
        self.failures.controller_answers += 1;
        self.failures.controller_fallbacks += 1;
        self.warn(format!(
            "turn {}: the speaker controller gave none of {}; falling back to order: {fallback}",
            self.turn + 1,
            choices.join(", ")
        ))
    }

    /// The transition judge named none of `choices`: the run stays in `state`.
    /// Returns the warning.
    pub fn judge_failed(&mut self, choices: &[String], state: &str) -> String {
        self.failures.judge_answers += 1;
        self.warn(format!(
            "turn {}: the transition judge gave none of {}; staying in {state}",
            self.turn,
            choices.join(", ")
        ))
    }

    /// What the run leaves for its summary: warnings, why a budget stopped it, and
    /// the routing answers it could not use.
    pub fn take_record(&mut self) -> (Vec<String>, Option<String>, ParseFailures) {
        (
            std::mem::take(&mut self.warnings),
            self.stop_reason.take(),
            self.failures,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_turns: u64) -> TurnLimits {
        TurnLimits {
            max_turns,
            budget_usd: None,
            max_total_tokens: None,
        }
    }

    fn spend(tokens: u64, usd: Option<f64>) -> Spend {
        Spend {
            tokens,
            usd,
            unpriced: vec!["my-model".into()],
        }
    }

    #[test]
    fn the_turn_limit_stops_after_its_last_turn_and_a_round_is_all_or_nothing() {
        let mut s = RunState::new(limits(5), Vec::new(), false);
        assert_eq!(s.gate(false, true, || unreachable!()).0, Gate::Go);
        assert_eq!(
            s.begin(1, false),
            Begun {
                first_turn: 1,
                round: None
            }
        );
        assert!(s.round_fits(4) && !s.round_fits(5));
        assert_eq!(
            s.begin(4, true),
            Begun {
                first_turn: 2,
                round: Some(1)
            }
        );
        assert_eq!(
            s.gate(false, true, || unreachable!()).0,
            Gate::Stop(EndReason::MaxTurns)
        );
        s.abandon(4);
        assert_eq!(s.turns(), 1);
        assert_eq!(
            s.begin(2, true).round,
            Some(2),
            "rounds are counted, not taken back"
        );
    }

    #[test]
    fn cancelling_stops_and_pausing_waits_before_any_limit() {
        let mut s = RunState::new(limits(0), Vec::new(), false);
        assert_eq!(
            s.gate(true, true, || unreachable!()).0,
            Gate::Stop(EndReason::Interrupted)
        );
        assert_eq!(s.gate(false, false, || unreachable!()).0, Gate::Wait);
        assert_eq!(
            s.gate(false, true, || unreachable!()).0,
            Gate::Stop(EndReason::MaxTurns)
        );
    }

    #[test]
    fn budgets_stop_with_their_reason_and_an_unknown_price_is_told_once() {
        let mut s = RunState::new(
            TurnLimits {
                max_total_tokens: Some(100),
                budget_usd: Some(0.01),
                ..limits(50)
            },
            vec!["imported".into()],
            false,
        );
        assert_eq!(s.gate(false, true, || spend(10, Some(0.001))).0, Gate::Go);
        let (gate, warning) = s.gate(false, true, || spend(10, None));
        assert_eq!(gate, Gate::Go);
        assert!(warning.unwrap().contains("no price for my-model"));
        assert_eq!(s.gate(false, true, || spend(10, None)), (Gate::Go, None));
        assert_eq!(
            s.gate(false, true, || spend(10, Some(0.02))).0,
            Gate::Stop(EndReason::Budget)
        );
        let (warnings, reason, _) = s.take_record();
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(reason.unwrap().starts_with("budget of $0.01 reached"));
        assert_eq!(
            s.gate(false, true, || spend(100, Some(0.0))).0,
            Gate::Stop(EndReason::Budget)
        );
        assert!(s.take_record().1.unwrap().contains("max_total_tokens 100"));
    }

    #[test]
    fn a_resumed_run_says_once_when_it_has_caught_up() {
        let mut s = RunState::new(limits(9), Vec::new(), true);
        assert_eq!(s.committed(false), None);
        assert_eq!(s.committed(true), Some(2));
        assert_eq!(s.committed(true), None);
        let mut fresh = RunState::new(limits(9), Vec::new(), false);
        assert_eq!(fresh.caught_up_now(true), None);
    }

    #[test]
    fn routing_failures_are_counted_with_their_warnings() {
        let mut s = RunState::new(limits(9), Vec::new(), false);
        s.begin(1, false);
        let choices = vec!["Pro".to_string(), "Con".to_string()];
        assert!(s.controller_failed(&choices, "Pro").starts_with("turn 2:"));
        assert!(s
            .judge_failed(&choices, "debate")
            .contains("staying in debate"));
        let (warnings, _, failures) = s.take_record();
        assert_eq!(warnings.len(), 2);
        assert_eq!(
            failures,
            ParseFailures {
                controller_answers: 1,
                controller_fallbacks: 1,
                judge_answers: 1
            }
        );
    }
}
