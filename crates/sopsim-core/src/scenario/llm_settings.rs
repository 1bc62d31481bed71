//! A scenario's model and sampling settings, at any level (scenario, state, role,
//! agent), and how the levels layer.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Model and sampling settings. Unset fields fall back to the next level out:
/// agent → role in state → state → scenario → backend default.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LlmSettings {
    /// Which backend answers (default: the run's, from the command line): `local` (a
    /// known model's name, such as `qwen15`, or a GGUF file, in `model`), `openai`
    /// (the run's server, asked for `model`) or `scripted` (the script, its figures
    /// under `model`). Agents naming different ones play model against model; each
    /// model is loaded once per process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendKind>,
    /// The model to ask: a server's model name (the local backend uses its own file
    /// unless `backend` names it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Sampling temperature; 0 takes the most likely token. Unset, a reply on the local
    /// models samples at 0.7 and a choice takes its most probable option.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 2.0))]
    pub temperature: Option<f32>,
    /// Nucleus sampling: keep the most likely tokens up to this probability mass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub top_p: Option<f32>,
    /// Keep only this many most likely tokens (0 or unset: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    /// The longest reply, in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u32>,
    /// Strings that end a reply (the other participants' labels are added).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Vec<String>>,
    /// The call's own seed (otherwise the run's `--seed` and the prompt decide).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// How a decision agent asks for tool calls: `native` (the API's tool calling) or
    /// `json` (a JSON object in the reply, for servers without a tool parser).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<super::DecisionFormat>,
    /// The API's `tool_choice` (`auto`, `required`, `none`), sent only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<String>,
    /// Divides the logit of every token already in `repeat_window` (1: off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1.0, max = 2.0))]
    pub repeat_penalty: Option<f32>,
    /// What the repeat, frequency and presence penalties look back over: a number of
    /// tokens, or `"all"` (the whole prompt and reply).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat_window: Option<TokenWindow>,
    /// Subtracted from a token's logit once per time it is in `repeat_window`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 2.0))]
    pub frequency_penalty: Option<f32>,
    /// Subtracted from a token's logit if it is in `repeat_window` at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 2.0))]
    pub presence_penalty: Option<f32>,
    /// DRY: a token that would extend a sequence already in `dry_window` (of at least
    /// `dry_allowed_length` tokens) loses `dry_multiplier · dry_base^(length −
    /// dry_allowed_length)` of its logit (0: off; the local engine's default is 0.8, an
    /// OpenAI-compatible server's its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 5.0))]
    pub dry_multiplier: Option<f32>,
    /// DRY's growth per token of repeat beyond `dry_allowed_length` (default 1.75).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1.0, max = 4.0))]
    pub dry_base: Option<f32>,
    /// The longest repeat DRY lets pass unpenalised, in tokens (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    pub dry_allowed_length: Option<u32>,
    /// What DRY matches against: a number of tokens, or `"all"`: the whole prompt (the
    /// conversation the agent was shown) and the reply so far (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_window: Option<TokenWindow>,
    /// Strings a repeat may not run across (default: newline, `:`, `"`, `*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 16), inner(length(min = 1, max = 32)))]
    pub dry_breakers: Option<Vec<String>>,
    /// Leave out tokens less likely than `min_p` times the most likely one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub min_p: Option<f32>,
    /// Strings a reply or summary never holds: a local model never draws a token whose
    /// text contains one of them (servers are not told). `["(", ")", "*"]` keeps out
    /// stage directions in brackets and markdown; `[]` lifts an outer level's list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), inner(length(min = 1, max = 32)))]
    pub forbid: Option<Vec<String>>,
    /// A reply with a flaw readers always reject (a copy, a label, a stage direction, a
    /// refusal, speaking as someone else, an echo of the instructions, third-person
    /// narration, a foreign script or an empty reply) is drawn again, up to this many
    /// times (0: never); the mildest draw stands. Paraphrases, replies off their stake
    /// and replies cut short are counted, not drawn again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 10))]
    pub redraws: Option<u32>,
    /// Candidates for each reply (default 2 on a local model; 1 on a server, where each
    /// is a call). The first is drawn alone and kept when it has no flaw; otherwise the
    /// others are drawn at once (a local model decodes them in one batch with the prompt
    /// read once) and the first without a flaw, in seed order, is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 8))]
    pub candidates: Option<u32>,
    /// Let a model that thinks before it answers (Qwen3's `<think>` blocks) think
    /// (default: off, where its chat template can turn it off). The thinking never
    /// enters the transcript, memory or a choice; its tokens count in `max_tokens`
    /// and in the usage's `thinking_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<bool>,
}

/// How many tokens a penalty looks back over.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(untagged)]
pub enum TokenWindow {
    /// The last this many tokens.
    Tokens(#[schemars(range(min = 1, max = 1_048_576))] u32),
    /// The whole prompt and reply.
    All(AllTokens),
}

/// `"all"`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AllTokens {
    /// The whole prompt and reply.
    All,
}

/// A backend an agent, role or state names.
#[derive(
    Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Hash, PartialOrd, Ord,
)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// A model run in this process: a known model's name or a GGUF file, in `model`.
    Local,
    /// An OpenAI-compatible server: the run's, asked for `model`.
    Openai,
    /// The scenario's script of replies, with its figures under `model`.
    Scripted,
}

impl BackendKind {
    /// The backend's name as a scenario file writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Local => "local",
            BackendKind::Openai => "openai",
            BackendKind::Scripted => "scripted",
        }
    }
}

impl LlmSettings {
    /// `self` with its unset fields taken from `outer`.
    pub fn over(&self, outer: &LlmSettings) -> LlmSettings {
        // A backend named here comes with its model: the outer model is another's.
        let (backend, model) = match self.backend {
            Some(b) => (Some(b), self.model.clone()),
            None => (
                outer.backend,
                self.model.clone().or_else(|| outer.model.clone()),
            ),
        };
        LlmSettings {
            backend,
            model,
            temperature: self.temperature.or(outer.temperature),
            top_p: self.top_p.or(outer.top_p),
            top_k: self.top_k.or(outer.top_k),
            max_tokens: self.max_tokens.or(outer.max_tokens),
            stop: self.stop.clone().or_else(|| outer.stop.clone()),
            seed: self.seed.or(outer.seed),
            decision: self.decision.or(outer.decision),
            tool_choice: self
                .tool_choice
                .clone()
                .or_else(|| outer.tool_choice.clone()),
            repeat_penalty: self.repeat_penalty.or(outer.repeat_penalty),
            repeat_window: self.repeat_window.or(outer.repeat_window),
            frequency_penalty: self.frequency_penalty.or(outer.frequency_penalty),
            presence_penalty: self.presence_penalty.or(outer.presence_penalty),
            dry_multiplier: self.dry_multiplier.or(outer.dry_multiplier),
            dry_base: self.dry_base.or(outer.dry_base),
            dry_allowed_length: self.dry_allowed_length.or(outer.dry_allowed_length),
            dry_window: self.dry_window.or(outer.dry_window),
            dry_breakers: self
                .dry_breakers
                .clone()
                .or_else(|| outer.dry_breakers.clone()),
            min_p: self.min_p.or(outer.min_p),
            forbid: self.forbid.clone().or_else(|| outer.forbid.clone()),
            redraws: self.redraws.or(outer.redraws),
            candidates: self.candidates.or(outer.candidates),
            thinking: self.thinking.or(outer.thinking),
        }
    }
}
