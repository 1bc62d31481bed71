//! The scripted backend: replies from the scenario's `script`, deterministic, instant.
//! It makes the simulator's behaviour testable and reviewable without a model.
//! Lines may draw seeded choices with `{one_of:A|B}`, so benchmarks see seed-to-seed
//! variation.

use std::borrow::Cow;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::{
    CallContext, CallKind, ChoiceMethod, Chosen, Completion, LlmBackend, LlmError, LlmRequest,
    TokenSink, ToolCall, Usage,
};
use sopsim_core::scenario::Script;
use sopsim_core::template::{self, ONE_OF};
use sopsim_core::tokens::{Estimator, TokenCounter};

const DEFAULT_LINE: &str = "{name} ({role}) speaks in {state}, turn {turn}.";
const DEFAULT_SUMMARY: &str = "Summary of {state} up to turn {turn}.";
const DEFAULT_PROBE: &str = "{name} ({role}) answers at turn {turn}.";
/// A decision to answer (the `json` decision format).
const ANSWER_DECISION: &str = "{\"tool\": \"answer\"}";

/// Answers every call from a script; stateless, so one instance serves any number of
/// concurrent simulations of the same scenario.
#[derive(Debug, Clone, Default)]
pub struct ScriptedBackend {
    script: Arc<Script>,
    /// The model its completions name (`scripted`, or `scripted:LABEL` for a script
    /// standing in for one of several models).
    model: String,
}

impl ScriptedBackend {
    /// A backend answering from `script`, or from default lines when there is none.
    pub fn new(script: Option<Script>) -> Self {
        Self {
            script: Arc::new(script.unwrap_or_default()),
            model: "scripted".into(),
        }
    }

    /// The script answering as `label`: its completions, and its figures, name it.
    pub fn labelled(mut self, label: &str) -> Self {
        self.model = format!("scripted:{label}");
        self
    }

    /// The rendered answer, and the seeded choices drawn in it.
    fn answer(&self, req: &LlmRequest) -> Result<(String, Vec<Drawn>), LlmError> {
        self.render(&self.line(req)?, req)
    }

    /// The line that answers `req`, before its fields are filled.
    fn line(&self, req: &LlmRequest) -> Result<String, LlmError> {
        let ctx = &req.context;
        let s = &self.script;
        let pick = |lines: &[String]| -> Option<String> {
            (!lines.is_empty()).then(|| lines[(ctx.index % lines.len() as u64) as usize].clone())
        };
        let line = match ctx.kind {
            CallKind::Act | CallKind::Extract => {
                let own = ctx
                    .agent
                    .as_ref()
                    .and_then(|a| s.agents.get(a))
                    .and_then(|l| pick(l));
                let by_role = || {
                    ctx.role
                        .as_ref()
                        .and_then(|r| s.roles.get(r))
                        .and_then(|l| pick(l))
                };
                own.or_else(by_role)
                    .or_else(|| s.default.clone())
                    .unwrap_or_else(|| DEFAULT_LINE.to_string())
            }
            // A role's choice: its `choices` lines, else its reply lines (a line naming
            // an option chooses it; see `complete` for one that names none), else a
            // seeded draw among the options.
            CallKind::Choice => choices_key(s, ctx)
                .and_then(|key| pick(&s.choices[key]))
                .or_else(|| {
                    let own = ctx.agent.as_ref().and_then(|a| s.agents.get(a));
                    let by_role = ctx.role.as_ref().and_then(|r| s.roles.get(r));
                    own.or(by_role).and_then(|l| pick(l))
                })
                .unwrap_or_else(|| draw_line(req)),
            CallKind::Route => pick(&s.route)
                .or_else(|| pick(&ctx.choices))
                .ok_or_else(|| LlmError::Script {
                    what: "a route answer or offered roles".into(),
                })?,
            // Without answers the judge stays: the first choice offered.
            CallKind::Transit => pick(&s.transit)
                .or_else(|| ctx.choices.first().cloned())
                .unwrap_or_default(),
            CallKind::Summary => s
                .summary
                .clone()
                .unwrap_or_else(|| DEFAULT_SUMMARY.to_string()),
            CallKind::Decide => ANSWER_DECISION.to_string(),
            CallKind::Probe if req.options.is_some() => draw_line(req),
            CallKind::Probe => pick(&s.probes).unwrap_or_else(|| DEFAULT_PROBE.to_string()),
            CallKind::Judge => pick(&s.judge).unwrap_or_else(|| draw_line(req)),
        };
        Ok(line)
    }

    /// `line` with its fields filled, and the seeded choices drawn in it.
    fn render(&self, line: &str, req: &LlmRequest) -> Result<(String, Vec<Drawn>), LlmError> {
        let ctx = &req.context;
        let n = (ctx.index + 1).to_string();
        let turn = ctx.turn.to_string();
        let drawn = std::cell::RefCell::new(Vec::new());
        let text = template::render(line, |key| -> Option<Cow<'_, str>> {
            Some(match key {
                "name" => Cow::Borrowed(ctx.agent.as_deref().unwrap_or("")),
                "role" => Cow::Borrowed(ctx.role.as_deref().unwrap_or("")),
                "state" => Cow::Borrowed(ctx.state.as_str()),
                "turn" => Cow::Owned(turn.clone()),
                "n" => Cow::Owned(n.clone()),
                _ => {
                    let (alternatives, picked) = one_of(key, ctx, req.options.as_deref())?;
                    let value = alternatives[picked].to_string();
                    drawn.borrow_mut().push(Drawn {
                        alternatives: alternatives.iter().map(|a| a.to_string()).collect(),
                    });
                    Cow::Owned(value)
                }
            })
        })
        .map_err(LlmError::ScriptLine)?;
        Ok((text, drawn.into_inner()))
    }
}

/// A seeded draw among a choice's options.
fn draw_line(req: &LlmRequest) -> String {
    format!(
        "{{{ONE_OF}{}}}",
        req.options.clone().unwrap_or_default().join("|")
    )
}

/// The name under `script.choices` that answers this agent's choices, if any.
fn choices_key<'s>(script: &'s Script, ctx: &CallContext) -> Option<&'s str> {
    [ctx.agent.as_ref(), ctx.role.as_ref()]
        .into_iter()
        .flatten()
        .find_map(|name| {
            script
                .choices
                .get_key_value(name)
                .filter(|(_, lines)| !lines.is_empty())
                .map(|(k, _)| k.as_str())
        })
}

/// A `{one_of:…}` drawn in a line: its alternatives.
struct Drawn {
    alternatives: Vec<String>,
}

/// The scripted answer to a closed choice: the option the answer names, with uniform
/// probabilities over a `{one_of:…}` that made it (a fixed line chooses with
/// certainty). `None` when it names no option.
fn scripted_choice(
    answer: &str,
    drawn: &[Drawn],
    options: &[String],
    labels_for: &[String],
) -> Option<Chosen> {
    let index = sopsim_core::sop::parse_choice_in(answer, options, "end", labels_for)?;
    let from_draw = match drawn {
        [one] => {
            // Over the alternatives that name an option: the others, when drawn, make
            // no decision at all.
            let named: Vec<usize> = one
                .alternatives
                .iter()
                .filter_map(|a| sopsim_core::sop::parse_choice_in(a, options, "end", labels_for))
                .collect();
            let mut p = vec![0.0; options.len()];
            for i in &named {
                p[*i] += 1.0 / named.len() as f64;
            }
            Some(p).filter(|_| !named.is_empty())
        }
        _ => None,
    };
    let probabilities = from_draw.unwrap_or_else(|| {
        (0..options.len())
            .map(|i| if i == index { 1.0 } else { 0.0 })
            .collect()
    });
    Some(Chosen {
        index,
        probabilities: Some(probabilities),
        method: ChoiceMethod::Script,
    })
}

/// `{one_of:A|B|C}`: one of the options, chosen by the run's seed, the agent and its
/// reply number, so a scripted run varies from seed to seed but replays exactly. In a
/// closed choice, only the alternatives that name an `offered` option are drawn
/// among, when any does: a script keeps within the bounds the world sets this turn.
/// Returns the alternatives and the index drawn.
fn one_of<'k>(
    key: &'k str,
    ctx: &CallContext,
    offered: Option<&[String]>,
) -> Option<(Vec<&'k str>, usize)> {
    let mut options: Vec<&str> = key.strip_prefix(ONE_OF)?.split('|').collect();
    if let Some(offered) = offered {
        let names = |a: &&str| sopsim_core::sop::parse_choice_in(a, offered, "end", &[]).is_some();
        if options.iter().any(names) {
            options.retain(names);
        }
    }
    let mut hasher = xxhash_rust::xxh3::Xxh3::with_seed(ctx.run_seed);
    hasher.update(ctx.agent.as_deref().unwrap_or("").as_bytes());
    hasher.update(&ctx.index.to_le_bytes());
    hasher.update(&ctx.turn.to_le_bytes());
    hasher.update(key.as_bytes());
    let picked = (hasher.digest() % options.len() as u64) as usize;
    Some((options, picked))
}

impl ScriptedBackend {
    /// The agent's next scripted decision (by agent, then role), as tool calls; none
    /// past the end of its list or for `"answer"`. Arguments given as a string are
    /// passed as written, so a script can make malformed calls.
    fn decision(&self, ctx: &CallContext) -> Vec<ToolCall> {
        let s = &self.script;
        let list = ctx
            .agent
            .as_ref()
            .and_then(|a| s.decisions.get(a))
            .or_else(|| ctx.role.as_ref().and_then(|r| s.decisions.get(r)));
        let Some(entry) = list.and_then(|l| l.get(ctx.index as usize)) else {
            return Vec::new();
        };
        let Some(name) = entry.get("tool").and_then(|t| t.as_str()) else {
            return Vec::new();
        };
        let arguments = match entry.get("arguments") {
            Some(serde_json::Value::String(raw)) => raw.clone(),
            Some(v) => v.to_string(),
            None => "{}".into(),
        };
        vec![ToolCall {
            id: format!("call_{}_{}", ctx.turn, ctx.index),
            name: name.to_string(),
            arguments,
        }]
    }
}

impl LlmBackend for ScriptedBackend {
    fn draws(&self) -> bool {
        false
    }

    fn describe(&self) -> String {
        self.model.clone()
    }

    fn complete<'a>(
        &'a self,
        request: LlmRequest,
        stream: Option<TokenSink>,
    ) -> BoxFuture<'a, Result<Completion, LlmError>> {
        Box::pin(async move {
            if request.context.kind == CallKind::Decide {
                let tool_calls = self.decision(&request.context);
                let text = if tool_calls.is_empty() {
                    ANSWER_DECISION.to_string()
                } else {
                    String::new()
                };
                let usage = Usage {
                    prompt_tokens: request
                        .messages
                        .iter()
                        .map(|m| Estimator.count(&m.content))
                        .sum::<usize>() as u64,
                    completion_tokens: Estimator.count(&text) as u64 + 8 * tool_calls.len() as u64,
                    cached_prompt_tokens: 0,
                    estimated: true,
                    ..Usage::default()
                };
                return Ok(Completion {
                    tool_calls,
                    ..Completion::text(text, usage, self.model.clone())
                });
            }
            let (text, drawn) = self.answer(&request)?;
            if let Some(options) = &request.options {
                // A route or transit answer may name the option or its label (the judge
                // of an aiwaves config answers "0" or "1"); others name the option.
                let labels = if request.context.kind == CallKind::Transit {
                    options.clone()
                } else {
                    Vec::new()
                };
                let mut chosen = scripted_choice(&text, &drawn, options, &labels);
                let mut text = text;
                if chosen.is_none() && request.context.kind == CallKind::Choice {
                    // A `choices` answer must name an option; a reply line that names
                    // none leaves the choice to a seeded draw.
                    if let Some(key) = choices_key(&self.script, &request.context) {
                        return Err(LlmError::Script {
                            what: format!(
                                "answers in script.choices.{key} that name one of {} (one says {text:?})",
                                options.join(", ")
                            ),
                        });
                    }
                    let (drawn_text, drawn) = self.render(&draw_line(&request), &request)?;
                    chosen = scripted_choice(&drawn_text, &drawn, options, &labels);
                    text = drawn_text;
                }
                let usage = Usage {
                    prompt_tokens: request
                        .messages
                        .iter()
                        .map(|m| Estimator.count(&m.content))
                        .sum::<usize>() as u64,
                    completion_tokens: 1,
                    cached_prompt_tokens: 0,
                    estimated: true,
                    ..Usage::default()
                };
                let text = chosen.as_ref().map_or(text, |c| options[c.index].clone());
                return Ok(Completion {
                    chosen,
                    ..Completion::text(text, usage, self.model.clone())
                });
            }
            if let Some(sink) = stream {
                for piece in text.split_inclusive(' ') {
                    sink(piece);
                }
            }
            let prompt_tokens: usize = request
                .messages
                .iter()
                .map(|m| Estimator.count(&m.content))
                .sum();
            let usage = Usage {
                prompt_tokens: prompt_tokens as u64,
                completion_tokens: Estimator.count(&text) as u64,
                cached_prompt_tokens: 0,
                estimated: true,
                ..Usage::default()
            };
            Ok(Completion::text(text, usage, self.model.clone()))
        })
    }
}
