//! The decision agent's loop in an agent's turn (Elysia's `Tree.async_run`): tools
//! whose `run_if` holds run first; then, up to the step limit, a decision call either
//! calls a tool — its arguments checked against the schema, its return stored in the
//! Environment, its error kept for the next decisions — or answers. Unknown tools and
//! invalid arguments are errors the model sees, with up to two more tries; after that,
//! or at the step limit, the agent replies without tools. Nothing a model returns
//! ends the run; only a failed model call does, as for any other call.
//!
//! A turn that is not live (a simultaneous round's) holds its tool events instead of
//! showing them: the Director shows them when the round is committed, with the
//! `_REF_ID`s the store gave then.

use std::sync::Arc;

use actix::Addr;
use serde_json::Value;

use super::environment::EnvironmentActor;
use super::messages::*;
use super::tool_rules::{calls_in, one_line, spends_a_try, Offer, Tries};
use crate::error::SimError;
use crate::events::{SimEvent, Sinks};
use crate::llm::record::TapedCall;
use crate::llm::{
    CallKind, Completion, DecisionFormat, LlmClient, LlmRequest, ToolCall, ToolExchange,
    ToolRequest,
};
use crate::scenario::LlmSettings;
use crate::tools::decision::{self, DecisionView, Task};
use crate::tools::{cut, RunsIn, Tool, ToolCallPlace, ToolFailure};
use sopsim_core::memory::MessageKind;
use sopsim_core::prompt::ChatMessage;
use sopsim_core::tool_results::{tag_refs, ResultObject, Return};

/// Characters of a tool's objects the reply prompt shows.
const REPLY_OBJECTS_CHARS: usize = 4000;

/// Who is deciding, where, and with what.
pub(super) struct Decider {
    pub env: Addr<EnvironmentActor>,
    pub llm: LlmClient,
    pub sinks: Sinks,
    pub name: String,
    pub role: String,
    pub state: String,
    pub visit: u32,
    pub turn: u64,
    pub run_seed: u64,
    pub settings: LlmSettings,
    pub tools: Vec<Arc<Tool>>,
    pub max_steps: u32,
    /// Token budget of the store shown in a decision prompt.
    pub environment_budget: usize,
    /// The latest message, for `run_if` rules.
    pub last_message: Option<String>,
    /// The turn is shown as it happens; otherwise its tool events wait for the
    /// round's commit.
    pub live: bool,
}

/// What the tool steps of a turn leave for the reply.
#[derive(Default)]
pub(super) struct ToolTurn {
    /// The tool calls and results, as draft messages, in order.
    pub messages: Vec<DraftMessage>,
    /// What the reply prompt adds: each result, to build the reply on.
    pub for_reply: Option<String>,
    /// The events held for the commit, when the turn is not live.
    pub events: Vec<HeldEvent>,
}

impl Decider {
    fn message(&self, kind: MessageKind, text: String, stored: Option<usize>) -> DraftMessage {
        DraftMessage {
            name: self.name.clone(),
            role: self.role.clone(),
            response: text,
            kind,
            turn: self.turn,
            decision: None,
            others: Vec::new(),
            stopped_at_speaker: false,
            stored,
        }
    }

    fn emit(&self, ret: Return, out: &mut Outcome) {
        self.show(ret, None, out);
    }

    /// Shows a tool event now, or holds it for the round's commit; `stored` is the
    /// turn's return whose stored objects a held result shows.
    fn show(&self, ret: Return, stored: Option<usize>, out: &mut Outcome) {
        if self.live {
            self.sinks.emit(SimEvent::Tool {
                name: self.name.clone(),
                visit: self.visit,
                ret: Box::new(ret),
            });
        } else {
            out.turn.events.push(HeldEvent { ret, stored });
        }
    }

    /// Runs `tool` with the raw `arguments`, stores what it returns, and notes it in
    /// `out`; returns the task as later decisions see it.
    async fn call(
        &self,
        tool: &Arc<Tool>,
        arguments: &str,
        step: u32,
        retry: bool,
        out: &mut Outcome,
    ) -> Result<(Task, CallOutcome), SimError> {
        out.turn.messages.push(self.message(
            MessageKind::ToolCall,
            format!("calls {} with {}", tool.name, one_line(arguments)),
            None,
        ));
        self.emit(
            Return::status(format!("{} is running {}", self.name, tool.name)),
            out,
        );
        let (outcome, result) = match tool.check_arguments(arguments) {
            Err(f) => (CallOutcome::InvalidArguments, Err(f)),
            Ok(args) => {
                let place = ToolCallPlace {
                    run_seed: self.run_seed,
                    agent: self.name.clone(),
                    turn: self.turn,
                    step,
                };
                let unrun = || ToolFailure::unknown(format!("{} did not run", tool.name));
                let ran = match tool.runs_in() {
                    RunsIn::Place => tool.run_here(&args, &place).unwrap_or_else(|| Err(unrun())),
                    RunsIn::Outside => self
                        .run_remote(tool, &args, arguments, step)
                        .await?
                        .unwrap_or_else(|| Err(unrun())),
                    RunsIn::Environment(_) => {
                        self.env
                            .send(RunInEnvironment {
                                tool: tool.clone(),
                                agent: self.name.clone(),
                                arguments: args,
                            })
                            .await?
                    }
                };
                let outcome = if ran.is_ok() {
                    CallOutcome::Ok
                } else {
                    CallOutcome::Failed
                };
                (outcome, ran)
            }
        };
        let store = tool.stores_results();
        let ended = Ended {
            outcome,
            result,
            store,
        };
        self.finish_call(&tool.name, arguments, ended, retry, out)
            .await
    }

    /// Runs a tool that reaches outside ([`RunsIn::Outside`]); when recording, its
    /// result is kept, and a replay reads it back instead of running it.
    async fn run_remote(
        &self,
        tool: &Tool,
        args: &serde_json::Map<String, Value>,
        raw: &str,
        step: u32,
    ) -> Result<Option<Result<ResultObject, ToolFailure>>, SimError> {
        let tape = self.llm.tool_tape();
        let call = TapedCall {
            run_seed: self.run_seed,
            agent: &self.name,
            turn: self.turn,
            step,
            tool: &tool.name,
            arguments: raw,
        };
        if let Some(loaded) = tape.as_ref().and_then(|t| t.load(&call)) {
            return loaded.map(Some).map_err(|source| SimError::Io {
                what: format!(
                    "the recorded result of {} at turn {} (not in the recording?)",
                    tool.name, self.turn
                ),
                source,
            });
        }
        let Some(ran) = tool.run_remote(args).await else {
            return Ok(None);
        };
        if let Some(tape) = &tape {
            tape.save(&call, &ran).map_err(|source| SimError::Io {
                what: format!("the recording of {} at turn {}", tool.name, self.turn),
                source,
            })?;
        }
        Ok(Some(ran))
    }

    /// A call the loop refused before running anything: its error, not stored.
    async fn refuse(
        &self,
        tool: &str,
        arguments: &str,
        outcome: CallOutcome,
        why: String,
        retry: bool,
        out: &mut Outcome,
    ) -> Result<(Task, CallOutcome), SimError> {
        let ended = Ended {
            outcome,
            result: Err(ToolFailure::avoidable(why)),
            store: false,
        };
        self.finish_call(tool, arguments, ended, retry, out).await
    }

    async fn finish_call(
        &self,
        tool: &str,
        arguments: &str,
        ended: Ended,
        retry: bool,
        out: &mut Outcome,
    ) -> Result<(Task, CallOutcome), SimError> {
        let Ended {
            outcome,
            result,
            store,
        } = ended;
        let ret = match &result {
            Ok(r) => Return::Result(r.clone()),
            Err(f) => f.to_return(),
        };
        let refs = self
            .env
            .send(ApplyReturn(ToolReturn {
                tool: tool.to_string(),
                agent: self.name.clone(),
                turn: self.turn,
                ret: ret.clone(),
                outcome,
                retry,
                store,
            }))
            .await?;
        // This return's number in the turn, which its result line and event carry.
        let index = out.returns;
        out.returns += 1;
        if self.live {
            self.emit(tag_refs(ret, &refs), out);
        } else {
            // The round's commit may renumber the objects; it tags them then.
            self.show(ret, Some(index), out);
        }
        let (parsed, error) = match &result {
            Ok(r) => {
                let parsed = r
                    .llm_parse()
                    .unwrap_or_else(|_| format!("{}: {} objects", r.name, r.objects.len()));
                let objects: Vec<String> = r
                    .objects
                    .iter()
                    .map(|o| Value::Object(o.clone()).to_string())
                    .collect();
                out.objects
                    .push(cut(&objects.join("\n"), REPLY_OBJECTS_CHARS));
                // The commit lists the ids the store gave after the line.
                out.turn.messages.push(self.message(
                    MessageKind::ToolResult,
                    format!("{tool}: {parsed}"),
                    Some(index),
                ));
                (parsed, false)
            }
            Err(f) => {
                let line = decision::error_line(f);
                out.turn.messages.push(self.message(
                    MessageKind::ToolResult,
                    format!("{tool}: {line}"),
                    None,
                ));
                (line, true)
            }
        };
        let task = Task {
            tool: tool.to_string(),
            arguments: one_line(arguments),
            parsed,
            error,
        };
        Ok((task, outcome))
    }

    /// The tool steps of one turn. `base` is the role's prompt for its reply.
    pub(super) async fn run(
        &self,
        base: &[ChatMessage],
        format: DecisionFormat,
    ) -> Result<ToolTurn, SimError> {
        let mut steps = Steps::default();
        self.auto_run(&mut steps).await?;
        let refs: Vec<&Tool> = self.tools.iter().map(Arc::as_ref).collect();
        for step in 1..=self.max_steps {
            let view = self
                .env
                .send(ViewTools {
                    agent: self.name.clone(),
                    budget: self.environment_budget,
                })
                .await?;
            let offer = decision::availability(
                &refs,
                |t| view.ran.iter().any(|r| r == t),
                |t| view.stored.iter().any(|s| s == t),
            );
            if offer.available.is_empty() {
                break;
            }
            let completion = self
                .decide(base, format, step, &view, &offer, &steps)
                .await?;
            let calls = match calls_in(&completion, self.turn, step, format) {
                Ok(calls) => calls,
                Err(why) => {
                    let (task, _) = self
                        .refuse(
                            "decision",
                            "",
                            CallOutcome::InvalidArguments,
                            why,
                            steps.tries.failed_before,
                            &mut steps.out,
                        )
                        .await?;
                    steps.tasks.push(task);
                    steps.tries.failed_before = true;
                    if steps.tries.out_of_tries() {
                        break;
                    }
                    continue;
                }
            };
            self.show_decision(step, &calls, &completion.text, &mut steps.out);
            if calls.is_empty() {
                break;
            }
            let mut bad = false;
            for call in calls {
                bad |= self.carry_out(call, step, &offer, &mut steps).await?;
            }
            if bad && steps.tries.out_of_tries() {
                break;
            }
        }
        let mut turn = steps.out.turn;
        turn.for_reply = decision::results_for_reply(&steps.tasks, &steps.out.objects);
        Ok(turn)
    }

    /// The tools whose `run_if` holds for the latest message, run before any decision.
    async fn auto_run(&self, steps: &mut Steps) -> Result<(), SimError> {
        let refs: Vec<&Tool> = self.tools.iter().map(Arc::as_ref).collect();
        for (tool, args) in decision::auto_runs(&refs, self.last_message.as_deref()) {
            let tool = self.tools.iter().find(|t| t.name == tool.name).cloned();
            if let Some(tool) = tool {
                let (task, _) = self.call(&tool, &args, 0, false, &mut steps.out).await?;
                steps.tasks.push(task);
            }
        }
        Ok(())
    }

    /// One decision call: the offered tools, what earlier steps did, and the store.
    async fn decide(
        &self,
        base: &[ChatMessage],
        format: DecisionFormat,
        step: u32,
        view: &ToolView,
        offer: &decision::Availability<'_>,
        steps: &Steps,
    ) -> Result<Completion, SimError> {
        let messages = decision::decision_messages(
            base,
            &DecisionView {
                step,
                max_steps: self.max_steps,
                available: &offer.available,
                unavailable: &offer.unavailable,
                errors: &view.errors,
                tasks: &steps.tasks,
                environment: &view.environment,
                format,
            },
        );
        let request = ToolRequest {
            tools: offer.available.iter().map(|t| t.def()).collect(),
            format,
            tool_choice: self.settings.tool_choice.clone(),
            exchange: steps.exchange.clone(),
            decision_schema: decision::decision_schema(&offer.available),
        };
        let context = self.llm.context(
            CallKind::Decide,
            &self.state,
            self.turn,
            Some((&self.name, &self.role)),
        );
        let request = LlmRequest::decide(messages, request, self.settings.clone(), context);
        Ok(self.llm.call(request, None).await?)
    }

    /// The decision as the tree shows it: the tools called, or the answer.
    fn show_decision(&self, step: u32, calls: &[ToolCall], reasoning: &str, out: &mut Outcome) {
        let decided = if calls.is_empty() {
            decision::ANSWER.to_string()
        } else {
            calls
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        self.emit(
            Return::TreeUpdate {
                node: self.name.clone(),
                tree_index: step,
                decision: decided,
                reasoning: cut(reasoning.trim(), 300),
                reset: false,
            },
            out,
        );
    }

    /// Makes one call the model decided on, or refuses it (unknown tool, or the same
    /// call again); returns whether it was a bad call that spends a try.
    async fn carry_out(
        &self,
        call: ToolCall,
        step: u32,
        offer: &decision::Availability<'_>,
        steps: &mut Steps,
    ) -> Result<bool, SimError> {
        let refused = steps.tries.refusal(&call, &Offer::of(offer));
        let (task, outcome) = match refused {
            Some((outcome, why)) => {
                steps.out.turn.messages.push(self.message(
                    MessageKind::ToolCall,
                    format!("calls {} with {}", call.name, one_line(&call.arguments)),
                    None,
                ));
                self.refuse(
                    &call.name,
                    &call.arguments,
                    outcome,
                    why,
                    steps.tries.failed_before,
                    &mut steps.out,
                )
                .await?
            }
            None => {
                let tool = self
                    .tools
                    .iter()
                    .find(|t| t.name == call.name)
                    .cloned()
                    .ok_or(SimError::Internal("an offered tool is missing"))?;
                self.call(
                    &tool,
                    &call.arguments,
                    step,
                    steps.tries.failed_before,
                    &mut steps.out,
                )
                .await?
            }
        };
        steps.tries.failed_before |= task.error;
        steps.exchange.push(ToolExchange {
            result: task.parsed.clone(),
            call,
        });
        steps.tasks.push(task);
        Ok(spends_a_try(outcome))
    }
}

/// What a turn's tool steps have done so far.
#[derive(Default)]
struct Steps {
    out: Outcome,
    /// Every call and refusal, as later decisions see them.
    tasks: Vec<Task>,
    /// The native tool-call exchange so far.
    exchange: Vec<ToolExchange>,
    tries: Tries,
}

/// How a call ended, and whether its result goes into the store.
struct Ended {
    outcome: CallOutcome,
    result: Result<ResultObject, ToolFailure>,
    store: bool,
}

#[derive(Default)]
struct Outcome {
    turn: ToolTurn,
    objects: Vec<String>,
    /// Returns applied so far this turn.
    returns: usize,
}

/// One agent's tool steps, on the shop assistant's tools (a catalogue lookup and a
/// calculator) with the scripted backend deciding as each test says.
#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{json, Value};

    use super::{Decider, ToolTurn};
    use crate::events::Sinks;
    use crate::llm::DecisionFormat;
    use crate::scenario::LlmSettings;
    use crate::tools::ToolBox;
    use sopsim_core::memory::MessageKind;
    use sopsim_core::prompt::ChatMessage;
    use sopsim_core::tool_results::Return;

    /// Mia's turn with `decisions` scripted, at most `max_steps` decisions.
    fn turn(decisions: Value, max_steps: u32) -> ToolTurn {
        let mut scenario = crate::actors::tests::shipped("shop_assistant.json");
        scenario.script.as_mut().expect("a script").decisions = [(
            "Mia".to_string(),
            serde_json::from_value(decisions).unwrap(),
        )]
        .into();
        let scenario = Arc::new(scenario);
        actix::System::new().block_on(async {
            let (env, llm) = crate::actors::tests::start(&scenario);
            let toolbox = ToolBox::start(&scenario, &Default::default())
                .await
                .unwrap();
            let tools = ["catalogue", "calculator"]
                .map(|t| toolbox.get(t).unwrap().clone())
                .to_vec();
            let decider = Decider {
                env,
                llm,
                sinks: Sinks::new(Vec::new()),
                name: "Mia".into(),
                role: "Assistant".into(),
                state: "shop".into(),
                visit: 1,
                turn: 1,
                run_seed: 0,
                settings: LlmSettings::default(),
                tools,
                max_steps,
                environment_budget: 512,
                last_message: None,
                live: false,
            };
            let base = [ChatMessage::user("What boots do you have?")];
            decider.run(&base, DecisionFormat::Json).await.unwrap()
        })
    }

    /// The turn's tool messages as `(kind, text)`.
    fn lines(turn: &ToolTurn) -> Vec<(MessageKind, String)> {
        turn.messages
            .iter()
            .map(|m| (m.kind, m.response.clone()))
            .collect()
    }

    /// The texts of the turn's tool results, in order.
    fn results(turn: &ToolTurn) -> Vec<String> {
        lines(turn)
            .into_iter()
            .filter(|(k, _)| *k == MessageKind::ToolResult)
            .map(|(_, t)| t)
            .collect()
    }

    fn calculator(expression: Value) -> Value {
        json!({"tool": "calculator", "arguments": {"expression": expression}})
    }

    #[test]
    fn a_call_then_an_answer_leaves_its_result_for_the_reply() {
        let turn = turn(json!([calculator(json!("149 + 120")), "answer"]), 3);
        let lines = lines(&turn);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines[0].0, MessageKind::ToolCall);
        assert!(lines[0].1.contains("calculator"), "{lines:?}");
        assert_eq!(lines[1].0, MessageKind::ToolResult);
        assert!(lines[1].1.contains("269"), "{lines:?}");
        let reply = turn.for_reply.expect("the result is offered to the reply");
        assert!(reply.contains("269"), "{reply}");
        // Not live: the events wait for the round's commit, results among them.
        assert!(turn
            .events
            .iter()
            .any(|e| matches!(e.ret, Return::Result(_))));
    }

    #[test]
    fn invalid_arguments_are_an_error_the_next_decision_can_mend() {
        let turn = turn(
            json!([calculator(json!(42)), calculator(json!("2 * 21")), "answer"]),
            3,
        );
        let results = results(&turn);
        assert_eq!(results.len(), 2, "{results:?}");
        assert!(results[0].contains("error"), "{results:?}");
        assert!(results[1].contains("42"), "{results:?}");
    }

    #[test]
    fn an_unknown_tool_gets_two_more_tries_then_the_agent_replies() {
        let nope = json!({"tool": "weather", "arguments": {}});
        let turn = turn(json!([nope, nope, nope, nope, nope]), 5);
        let results = results(&turn);
        assert_eq!(results.len(), 3, "three tries in all: {results:?}");
        assert!(results.iter().all(|r| r.contains("weather")), "{results:?}");
        // The reply is told what went wrong, so it does not claim a result.
        let reply = turn.for_reply.expect("the errors are offered to the reply");
        assert!(reply.contains("there is no tool `weather`"), "{reply}");
    }

    #[test]
    fn the_step_limit_ends_the_tool_steps() {
        let sums = json!([
            calculator(json!("1 + 1")),
            calculator(json!("2 + 2")),
            calculator(json!("3 + 3")),
            "answer"
        ]);
        let calls = |turn: &ToolTurn| {
            lines(turn)
                .iter()
                .filter(|(k, _)| *k == MessageKind::ToolCall)
                .count()
        };
        assert_eq!(calls(&turn(sums.clone(), 2)), 2);
        assert_eq!(calls(&turn(sums, 5)), 3);
    }

    #[test]
    fn a_tool_that_fails_is_an_error_not_the_end_of_the_turn() {
        let turn = turn(
            json!([
                calculator(json!("1 / 0")),
                calculator(json!("6 * 7")),
                "answer"
            ]),
            3,
        );
        let results = results(&turn);
        assert_eq!(results.len(), 2, "{results:?}");
        assert!(results[1].contains("42"), "{results:?}");
    }
}
