//! The tool loop's decisions, free of actors and model calls: which calls a decision
//! makes, which of them are refused and why, and when a turn has no tries left.

use serde_json::Value;

use crate::llm::{Completion, DecisionFormat, ToolCall};
use crate::tools::cut;
use crate::tools::decision::{self, Decided};
use crate::tools::CallOutcome;

/// Bad decisions (unknown tool, invalid arguments, unreadable, repeated) tolerated in a
/// turn after the first: the model gets the error back and two more tries.
pub(super) const MAX_RETRIES: u32 = 2;

/// The tool calls a decision makes (none: it answers), or why it cannot be read.
/// `turn` and `step` name a call read from text, which has no id of its own.
pub(super) fn calls_in(
    completion: &Completion,
    turn: u64,
    step: u32,
    format: DecisionFormat,
) -> Result<Vec<ToolCall>, String> {
    if !completion.tool_calls.is_empty() {
        return Ok(completion.tool_calls.clone());
    }
    match decision::read_decision(&completion.text) {
        Decided::Call { name, arguments } => Ok(vec![ToolCall {
            id: format!("call_{turn}_{step}"),
            name,
            arguments,
        }]),
        Decided::Answer => Ok(Vec::new()),
        // A native decision in plain text is the model answering.
        Decided::Unreadable(_) if format == DecisionFormat::Native => Ok(Vec::new()),
        Decided::Unreadable(why) => Err(why),
    }
}

/// The tools a decision may call now, and those it may not with the reason.
pub(super) struct Offer<'a> {
    pub available: Vec<&'a str>,
    pub unavailable: Vec<(&'a str, &'a str)>,
}

impl<'a> Offer<'a> {
    pub(super) fn of(a: &'a decision::Availability<'_>) -> Self {
        Self {
            available: a.available.iter().map(|t| t.name.as_str()).collect(),
            unavailable: a
                .unavailable
                .iter()
                .map(|(t, why)| (t.name.as_str(), why.as_str()))
                .collect(),
        }
    }
}

/// What a turn's calls have spent: the calls made, and the bad ones.
#[derive(Default)]
pub(super) struct Tries {
    /// Calls made this turn, as (tool, arguments on one line).
    made: Vec<(String, String)>,
    retries: u32,
    /// Whether a call of this turn has failed (a later call is a retry).
    pub failed_before: bool,
}

impl Tries {
    /// Why `call` is refused (an unknown or unavailable tool, or this turn's call
    /// again), or `None` when it is to be made, and is then counted as made. A call
    /// refused because its tool could not be called was not made: the same call once
    /// the tool is available is no repeat.
    pub(super) fn refusal(
        &mut self,
        call: &ToolCall,
        offer: &Offer<'_>,
    ) -> Option<(CallOutcome, String)> {
        if !offer.available.contains(&call.name.as_str()) {
            return Some(unknown_tool(&call.name, offer));
        }
        let key = (call.name.clone(), one_line(&call.arguments));
        let repeated = self.made.contains(&key);
        if !repeated {
            self.made.push(key);
        }
        repeated.then(|| {
            (
                CallOutcome::Repeated,
                format!(
                    "this exact call of `{}` was already made this turn and its result is above; change the arguments, call another tool, or answer",
                    call.name
                ),
            )
        })
    }

    /// Counts a bad step; true when no tries are left.
    pub(super) fn out_of_tries(&mut self) -> bool {
        self.retries += 1;
        self.retries > MAX_RETRIES
    }
}

/// Whether a call that ended so was the model's mistake, which spends a try (a tool
/// that failed by itself does not).
pub(super) fn spends_a_try(outcome: CallOutcome) -> bool {
    matches!(
        outcome,
        CallOutcome::InvalidArguments
            | CallOutcome::UnknownTool
            | CallOutcome::Unavailable
            | CallOutcome::Repeated
    )
}

/// A call of a tool the agent may not call now: one not offered now, or none at all.
fn unknown_tool(name: &str, offer: &Offer<'_>) -> (CallOutcome, String) {
    let names = offer.available.join(", ");
    match offer.unavailable.iter().find(|(t, _)| *t == name) {
        Some((_, why)) => (
            CallOutcome::Unavailable,
            format!("`{name}` is not available now ({why}); call one of: {names}"),
        ),
        None => (
            CallOutcome::UnknownTool,
            format!("there is no tool `{name}`; call one of: {names}"),
        ),
    }
}

/// Arguments on one line, as a memory message shows them.
pub(super) fn one_line(arguments: &str) -> String {
    let compact = serde_json::from_str::<Value>(arguments)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| arguments.replace('\n', " "));
    cut(&compact, 500)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Usage;

    fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    fn offer() -> Offer<'static> {
        Offer {
            available: vec!["search", "calculator"],
            unavailable: vec![("findings", "nothing is stored yet")],
        }
    }

    fn said(text: &str) -> Completion {
        Completion::text(text.into(), Usage::default(), "m".into())
    }

    #[test]
    fn a_decision_in_text_becomes_one_call_named_by_turn_and_step() {
        let c = said(r#"{"tool": "search", "arguments": {"q": "boots"}}"#);
        let calls = calls_in(&c, 7, 2, DecisionFormat::Json).unwrap();
        assert_eq!(calls.len(), 1);
        assert_eq!(
            (calls[0].id.as_str(), calls[0].name.as_str()),
            ("call_7_2", "search")
        );
    }

    #[test]
    fn native_calls_are_taken_as_they_come_and_native_text_is_an_answer() {
        let mut c = said("");
        c.tool_calls = vec![call("search", "{}"), call("calculator", "{}")];
        assert_eq!(calls_in(&c, 1, 1, DecisionFormat::Native).unwrap().len(), 2);
        let text = said("The boots cost 40.");
        assert!(calls_in(&text, 1, 1, DecisionFormat::Native)
            .unwrap()
            .is_empty());
        assert!(
            calls_in(&text, 1, 1, DecisionFormat::Json).is_err(),
            "a JSON decision that is not JSON is an error the model sees"
        );
    }

    #[test]
    fn unknown_and_unavailable_tools_are_refused_with_what_may_be_called() {
        let mut tries = Tries::default();
        let (outcome, why) = tries.refusal(&call("browse", "{}"), &offer()).unwrap();
        assert_eq!(outcome, CallOutcome::UnknownTool);
        assert_eq!(
            why,
            "there is no tool `browse`; call one of: search, calculator"
        );
        let (outcome, why) = tries.refusal(&call("findings", "{}"), &offer()).unwrap();
        assert_eq!(outcome, CallOutcome::Unavailable, "it exists, but not now");
        assert!(
            why.contains("not available now (nothing is stored yet)"),
            "{why}"
        );
    }

    #[test]
    fn the_same_call_twice_is_refused_whatever_its_layout() {
        let mut tries = Tries::default();
        assert_eq!(
            tries.refusal(&call("search", r#"{"q": "boots"}"#), &offer()),
            None
        );
        let again = tries.refusal(&call("search", "{\n  \"q\":\"boots\"\n}"), &offer());
        assert_eq!(again.map(|(o, _)| o), Some(CallOutcome::Repeated));
        assert_eq!(
            tries.refusal(&call("search", r#"{"q": "jacket"}"#), &offer()),
            None,
            "other arguments are another call"
        );
    }

    #[test]
    fn a_call_refused_while_its_tool_was_unavailable_is_no_repeat_later() {
        let mut tries = Tries::default();
        let refused = tries.refusal(&call("findings", "{}"), &offer());
        assert_eq!(refused.map(|(o, _)| o), Some(CallOutcome::Unavailable));
        let now = Offer {
            available: vec!["search", "findings"],
            unavailable: Vec::new(),
        };
        assert_eq!(tries.refusal(&call("findings", "{}"), &now), None);
    }

    #[test]
    fn a_turn_has_the_first_bad_step_and_two_more_tries() {
        let mut tries = Tries::default();
        assert!(!tries.out_of_tries());
        assert!(!tries.out_of_tries());
        assert!(tries.out_of_tries());
        assert!(spends_a_try(CallOutcome::Repeated));
        assert!(
            !spends_a_try(CallOutcome::Failed),
            "a tool failing is not the model's step"
        );
    }
}
