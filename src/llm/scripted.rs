//! The scripted backend: replies from the scenario's `script`, deterministic, instant.
//! It makes the simulator's behaviour testable and reviewable without a model.
//! Lines may draw seeded choices with `{one_of:A|B}`, so benchmarks see seed-to-seed
//! variation.

use std::borrow::Cow;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::{
    CallContext, CallKind, Completion, LlmBackend, LlmError, LlmRequest, TokenSink, Usage,
};
use crate::scenario::Script;
use crate::template;
use crate::tokens::{Estimator, TokenCounter};

const DEFAULT_LINE: &str = "{name} ({role}) speaks in {state}, turn {turn}.";
const DEFAULT_SUMMARY: &str = "Summary of {state} up to turn {turn}.";

/// Answers every call from a script; stateless, so one instance serves any number of
/// concurrent simulations of the same scenario.
#[derive(Debug, Clone, Default)]
pub struct ScriptedBackend {
    script: Arc<Script>,
}

impl ScriptedBackend {
    pub fn new(script: Option<Script>) -> Self {
        Self {
            script: Arc::new(script.unwrap_or_default()),
        }
    }

    fn answer(&self, req: &LlmRequest) -> Result<String, LlmError> {
        let ctx = &req.context;
        let s = &self.script;
        let pick = |lines: &[String]| -> Option<String> {
            (!lines.is_empty()).then(|| lines[(ctx.index % lines.len() as u64) as usize].clone())
        };
        let line = match ctx.kind {
            CallKind::Act | CallKind::Tool => {
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
            CallKind::Route => pick(&s.route)
                .or_else(|| pick(&ctx.choices))
                .ok_or_else(|| LlmError::Script {
                    what: "a route answer or offered roles".into(),
                })?,
            CallKind::Transit => pick(&s.transit).unwrap_or_else(|| crate::sop::STAY.to_string()),
            CallKind::Summary => s
                .summary
                .clone()
                .unwrap_or_else(|| DEFAULT_SUMMARY.to_string()),
        };
        let n = (ctx.index + 1).to_string();
        let turn = ctx.turn.to_string();
        template::render(&line, |key| -> Option<Cow<'_, str>> {
            Some(match key {
                "name" => Cow::Borrowed(ctx.agent.as_deref().unwrap_or("")),
                "role" => Cow::Borrowed(ctx.role.as_deref().unwrap_or("")),
                "state" => Cow::Borrowed(ctx.state.as_str()),
                "turn" => Cow::Owned(turn.clone()),
                "n" => Cow::Owned(n.clone()),
                _ => Cow::Owned(one_of(key, ctx)?.to_string()),
            })
        })
        .map_err(|e| LlmError::Script {
            what: format!("a valid line: {e}"),
        })
    }
}

/// `{one_of:A|B|C}`: one of the options, chosen by the run's seed, the agent and its
/// reply number, so a scripted run varies from seed to seed but replays exactly.
fn one_of<'k>(key: &'k str, ctx: &CallContext) -> Option<&'k str> {
    let options: Vec<&str> = key.strip_prefix(ONE_OF)?.split('|').collect();
    let mut hasher = xxhash_rust::xxh3::Xxh3::with_seed(ctx.run_seed);
    hasher.update(ctx.agent.as_deref().unwrap_or("").as_bytes());
    hasher.update(&ctx.index.to_le_bytes());
    hasher.update(&ctx.turn.to_le_bytes());
    hasher.update(key.as_bytes());
    Some(options[(hasher.digest() % options.len() as u64) as usize])
}

/// The prefix of the seeded-choice placeholder.
pub const ONE_OF: &str = "one_of:";

impl LlmBackend for ScriptedBackend {
    fn describe(&self) -> String {
        "scripted".into()
    }

    fn complete<'a>(
        &'a self,
        request: LlmRequest,
        stream: Option<TokenSink>,
    ) -> BoxFuture<'a, Result<Completion, LlmError>> {
        Box::pin(async move {
            let text = self.answer(&request)?;
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
            };
            Ok(Completion::text(text, usage, "scripted".into()))
        })
    }
}
