//! The request and response types every LLM backend speaks.

use serde::{Deserialize, Serialize};

pub use sopsim_core::scenario::DecisionFormat;
use sopsim_core::scenario::LlmSettings;

pub use sopsim_core::prompt::{ChatMessage, ChatRole, ToolDef};

/// Why a call is made; usage is counted per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CallKind {
    /// An agent's reply.
    Act,
    /// The `llm` speaker rule's controller.
    Route,
    /// The transition judge.
    Transit,
    /// The short-term summary.
    Summary,
    /// A role's `extract` step, reading tagged values out of the conversation before
    /// it replies.
    Extract,
    /// A role's closed choice (`choice` component).
    Choice,
    /// The decision agent choosing a tool or to answer.
    Decide,
    /// A probe put to an agent (a survey's question, an interview): its answer
    /// enters nothing of the run. Counted apart, never among the run's own calls.
    Probe,
    /// The judge scoring a finished run on a rubric. Counted apart.
    Judge,
}

impl CallKind {
    /// The kinds of a run's own calls (probes and judgements are counted apart).
    pub const ALL: [CallKind; 7] = [
        CallKind::Act,
        CallKind::Route,
        CallKind::Transit,
        CallKind::Summary,
        CallKind::Extract,
        CallKind::Choice,
        CallKind::Decide,
    ];

    /// The kind's lowercase name (`act`, `route`…), as in files and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            CallKind::Act => "act",
            CallKind::Route => "route",
            CallKind::Transit => "transit",
            CallKind::Summary => "summary",
            CallKind::Extract => "extract",
            CallKind::Choice => "choice",
            CallKind::Decide => "decide",
            CallKind::Probe => "probe",
            CallKind::Judge => "judge",
        }
    }
}

/// Where in the run a call happens. Real backends ignore it; the scripted backend
/// answers from it, and the ledger counts by it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallContext {
    /// Why the call is made.
    pub kind: CallKind,
    /// The state the run is in.
    pub state: String,
    /// The run's turn number (from 1) the call belongs to.
    pub turn: u64,
    /// The agent making the call (`None`: the run itself).
    pub agent: Option<String>,
    /// The role that agent plays.
    pub role: Option<String>,
    /// How many calls of this kind by this agent (by no agent: in the run) came before,
    /// from 0; an `extract` step is numbered as the reply it comes before.
    pub index: u64,
    /// The offered answers, for route and transit calls.
    pub choices: Vec<String>,
    /// The run's `--seed`; local sampling derives its seed from it.
    pub run_seed: u64,
}

impl CallContext {
    /// A call of `kind` in `state` during `turn` of a run seeded with `run_seed`, made by
    /// no agent (the controller, the judge, a summary); index 0.
    pub fn new(kind: CallKind, state: &str, turn: u64, run_seed: u64) -> Self {
        Self {
            kind,
            state: state.to_string(),
            turn,
            agent: None,
            role: None,
            index: 0,
            choices: Vec::new(),
            run_seed,
        }
    }

    /// Made by `agent` playing `role`, its `index`-th call of this kind.
    pub fn by(self, agent: &str, role: &str, index: u64) -> Self {
        Self {
            agent: Some(agent.to_string()),
            role: Some(role.to_string()),
            index,
            ..self
        }
    }

    /// The `index`-th call of this kind in the run.
    pub fn numbered(self, index: u64) -> Self {
        Self { index, ..self }
    }
}

/// One request: a chat completion, or — when `options` is set — a closed choice,
/// answered with one of the options and (where the backend can tell) the probability
/// of each, without free text.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmRequest {
    /// The conversation sent to the model.
    pub messages: Vec<ChatMessage>,
    /// The model and sampling settings that apply to the call.
    pub settings: LlmSettings,
    /// Where in the run the call happens.
    pub context: CallContext,
    /// Set for a closed choice: the options to choose among.
    pub options: Option<Vec<String>>,
    /// Set for a decision: the tools the model may call.
    pub tools: Option<ToolRequest>,
    /// Set when a reply is drawn again ([`ReplyQuality`](sopsim_core::quality::ReplyQuality)): which draw, and what to
    /// steer away from.
    pub redraw: Option<Redraw>,
    /// Which of a reply's candidates drawn at once this is (0: the first, drawn as a
    /// lone reply would be): a draw of its own seed.
    pub candidate: u32,
    /// Set when another draw would replace this one if it had a flaw: a backend that
    /// decodes token by token may stop the draw as soon as it has one for certain.
    pub screen: Option<Screen>,
}

/// The check a reply's draw is put to while it is decoded
/// ([`Checker::settled_flaw`](sopsim_core::quality::Checker::settled_flaw)), against what its
/// speaker was shown.
#[derive(Clone)]
pub struct Screen {
    checker: std::sync::Arc<sopsim_core::quality::Checker>,
    speaker: String,
}

impl Screen {
    /// The check `checker` makes of a reply drawn for `speaker`.
    pub fn new(checker: std::sync::Arc<sopsim_core::quality::Checker>, speaker: &str) -> Self {
        Self {
            checker,
            speaker: speaker.to_string(),
        }
    }

    /// The flaw the reply drawn so far has whatever follows, if it has one.
    pub fn flaw(&self, partial: &str) -> Option<sopsim_core::quality::RedrawCause> {
        self.checker.settled_flaw(&self.speaker, partial)
    }

    /// The screen as a backend runs it over a reply that grows piece by piece.
    pub fn reading(self) -> Screening {
        Screening {
            screen: self,
            read: 0,
            words: 0,
            next_look: 0,
            done: false,
        }
    }
}

/// A [`Screen`] reading a reply as it grows. It looks at every word's end up to
/// [`Screening::EACH_WORD_UNTIL`] words, where labels, refusals and stage directions
/// show, then every [`Screening::THEN_EVERY`] words, enough for a copy (ten words in a
/// row) and bounded in cost on long lines; once the first line has ended it looks a
/// last time and stops (it judges no more than that line).
#[derive(Debug, Clone)]
pub struct Screening {
    screen: Screen,
    read: usize,
    /// Word ends read so far.
    words: usize,
    /// The word count at which it looks next, past the first words.
    next_look: usize,
    done: bool,
}

impl Screening {
    /// Words read one by one at a reply's start.
    pub const EACH_WORD_UNTIL: usize = 12;
    /// Words between two looks after that.
    pub const THEN_EVERY: usize = 8;

    /// The flaw `text`, the whole reply so far, has for certain: the draw stops there.
    pub fn next(&mut self, text: &str) -> Option<sopsim_core::quality::RedrawCause> {
        let new = text.get(self.read..)?;
        if self.done || !new.contains(char::is_whitespace) {
            return None;
        }
        self.words += new.chars().filter(|c| c.is_whitespace()).count();
        self.read = text.len();
        let line_ended = text.trim_start().contains('\n');
        if self.words > Self::EACH_WORD_UNTIL && self.words < self.next_look && !line_ended {
            return None;
        }
        self.next_look = self.words + Self::THEN_EVERY;
        let flaw = self.screen.flaw(text);
        self.done = flaw.is_some() || line_ended;
        flaw
    }
}

/// Two screens are the same when they are one check for one speaker.
impl PartialEq for Screen {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.checker, &other.checker) && self.speaker == other.speaker
    }
}

impl std::fmt::Debug for Screen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Screen")
            .field("speaker", &self.speaker)
            .finish_non_exhaustive()
    }
}

/// A reply drawn again because the last draw was flawed (see [`ReplyQuality`](sopsim_core::quality::ReplyQuality)): a
/// draw of its own (another seed) that penalises the tokens of `avoid` more with each
/// attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Redraw {
    /// 1 for the first redraw.
    pub attempt: u32,
    /// What was wrong with the last draw.
    pub cause: sopsim_core::quality::RedrawCause,
    /// What the earlier draws got wrong: the words they copied or echoed, the labels
    /// they carried, the name they narrated with.
    pub avoid: Vec<String>,
}

impl Redraw {
    /// Tokens a reply drawn again for being empty must reach before it may end.
    pub const MIN_TOKENS_AFTER_EMPTY: usize = 8;

    /// Tokens the draw must generate before its end-of-text token may come.
    pub fn min_tokens(&self) -> usize {
        if self.cause == sopsim_core::quality::RedrawCause::Empty {
            Self::MIN_TOKENS_AFTER_EMPTY
        } else {
            0
        }
    }
}

/// The tools offered to a decision call, and this turn's calls so far with what
/// they returned (sent as `assistant` `tool_calls` and `tool` messages natively).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolRequest {
    /// The tools the model may call.
    pub tools: Vec<ToolDef>,
    /// How the decision is asked for: native tool calls or JSON.
    pub format: DecisionFormat,
    /// Sent as the API's `tool_choice` only when the scenario sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<String>,
    /// This turn's calls so far, with what they returned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exchange: Vec<ToolExchange>,
    /// The JSON Schema a `json` decision answers under: one object per available tool,
    /// or `{"tool": "answer"}`.
    pub decision_schema: serde_json::Value,
}

/// A call the model made and the text its result gave back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolExchange {
    /// The call the model made.
    pub call: ToolCall,
    /// The text the tool's result gave back.
    pub result: String,
}

/// A tool call as the model made it; `arguments` is its raw JSON text, which may not
/// parse.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The id the model gave the call.
    pub id: String,
    /// The name of the tool called.
    pub name: String,
    /// The call's arguments, as the model wrote them.
    pub arguments: String,
}

impl LlmRequest {
    /// A chat completion.
    pub fn chat(messages: Vec<ChatMessage>, settings: LlmSettings, context: CallContext) -> Self {
        Self {
            messages,
            settings,
            context,
            options: None,
            tools: None,
            redraw: None,
            candidate: 0,
            screen: None,
        }
    }

    /// A decision among `tools`, or to answer.
    pub fn decide(
        messages: Vec<ChatMessage>,
        tools: ToolRequest,
        settings: LlmSettings,
        context: CallContext,
    ) -> Self {
        Self {
            messages,
            settings,
            context,
            options: None,
            tools: Some(tools),
            redraw: None,
            candidate: 0,
            screen: None,
        }
    }

    /// The same request, drawn again.
    pub fn redrawn(self, redraw: Redraw) -> Self {
        Self {
            redraw: Some(redraw),
            ..self
        }
    }

    /// The same request as candidate `candidate` of a reply drawn several at once.
    pub fn as_candidate(self, candidate: u32) -> Self {
        Self { candidate, ..self }
    }

    /// The same request, its draw put to `screen` as it is decoded.
    pub fn screened(self, screen: Screen) -> Self {
        Self {
            screen: Some(screen),
            ..self
        }
    }

    /// A closed choice among `options`.
    pub fn choice(
        messages: Vec<ChatMessage>,
        options: Vec<String>,
        settings: LlmSettings,
        context: CallContext,
    ) -> Self {
        Self {
            messages,
            settings,
            context,
            options: Some(options),
            tools: None,
            redraw: None,
            candidate: 0,
            screen: None,
        }
    }
}

/// The answer to a closed choice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chosen {
    /// Index into the request's options.
    pub index: usize,
    /// The probability of every option, in the request's order (`None` when the
    /// backend cannot tell).
    pub probabilities: Option<Vec<f64>>,
    /// How the backend decided.
    pub method: ChoiceMethod,
}

/// How a backend made a choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChoiceMethod {
    /// From the model's logits over the options (local models).
    Logits,
    /// Structured output constrained to the options (servers).
    Structured,
    /// A free-text answer read as one of the options: the server refused structured
    /// output (HTTP 400 to `response_format`), so choices are asked in plain text.
    Text,
    /// A free-text answer read as one of the options, asked because the server's
    /// structured answers were unusable (not JSON, or none of the options) through one
    /// choice's retries: choices are asked in plain text from then on.
    TextAfterUnusable,
    /// From the scenario's script.
    Script,
}

/// Token usage of one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens of the prompt.
    pub prompt_tokens: u64,
    /// Tokens the model generated.
    pub completion_tokens: u64,
    /// Prompt tokens served from a cache instead of being processed again.
    #[serde(default)]
    pub cached_prompt_tokens: u64,
    /// Counted by sopsim's estimator rather than reported by the model.
    pub estimated: bool,
    /// The server reported counts no request of this size could have: the estimate
    /// stands in for them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub implausible: bool,
    /// With speculative decoding: the model's checks of drafts, the tokens drafted,
    /// and those it kept.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub draft_checks: u64,
    /// Tokens drafted for the model to check.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub drafted_tokens: u64,
    /// Drafted tokens the model kept.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub accepted_drafts: u64,
    /// Of `completion_tokens`, those the model spent thinking before it answered.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub thinking_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A backend's answer to one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The reply; for a choice, the chosen option.
    pub text: String,
    /// The tokens the call used.
    pub usage: Usage,
    /// The model that answered, as the backend names it (prices are looked up by it).
    pub model: String,
    /// The stop sequence that ended the reply, when the backend knows it.
    pub stopped_at: Option<String>,
    /// Set for a choice.
    pub chosen: Option<Chosen>,
    /// The tools a decision called natively (empty: answer, or see `text` in `json`).
    pub tool_calls: Vec<ToolCall>,
    /// The request's sampling settings asked for fields the server refused, and it was
    /// answered without them.
    pub settings_unsent: bool,
    /// The flaw the draw was stopped for (see [`LlmRequest::screen`]): `text` is what
    /// was drawn up to it.
    pub abandoned: Option<sopsim_core::quality::RedrawCause>,
}

impl Completion {
    /// A plain reply.
    pub fn text(text: String, usage: Usage, model: String) -> Self {
        Self {
            text,
            usage,
            model,
            stopped_at: None,
            chosen: None,
            tool_calls: Vec::new(),
            settings_unsent: false,
            abandoned: None,
        }
    }
}

/// Receives streamed text pieces as they are generated.
pub type TokenSink = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

#[cfg(test)]
mod tests {
    use super::*;
    use sopsim_core::memory::{Message, MessageKind};
    use sopsim_core::quality::{Checker, Instructions, RedrawCause};

    /// The word counts at which a screening stops `words` fed one word at a time.
    fn stops_at(checker: Checker, words: &[&str]) -> Option<(usize, RedrawCause)> {
        let mut screening = Screen::new(std::sync::Arc::new(checker), "Ada").reading();
        let mut text = String::new();
        for (i, w) in words.iter().enumerate() {
            text.push_str(w);
            text.push(' ');
            if let Some(cause) = screening.next(&text) {
                return Some((i + 1, cause));
            }
        }
        None
    }

    #[test]
    fn a_screening_looks_at_every_early_word_and_then_every_few() {
        let refusal = "I'm sorry, but I can't help".split(' ').collect::<Vec<_>>();
        assert_eq!(
            stops_at(Checker::default(), &refusal),
            Some((5, RedrawCause::Refusal)),
            "stopped at \"can't\""
        );
        // A copy whose tenth word is the reply's twenty-third is found within eight
        // words (a copy in a reply's last few words is left to the whole reply's check).
        let said = "the river floods the lower town every spring and the mill stops";
        let mut checker = Checker::new(Instructions::default());
        checker.see(&Message {
            seq: 1,
            state: "s".into(),
            visit: 1,
            role: "R".into(),
            name: "Ben".into(),
            content: said.into(),
            kind: MessageKind::Reply,
            decision: None,
        });
        let own = "we have argued about bridges and roads for years now and I think";
        let after = "so we must act before the spring comes again this year";
        let reply: Vec<&str> = own
            .split(' ')
            .chain(said.split(' '))
            .chain(after.split(' '))
            .collect();
        let (at, cause) = stops_at(checker, &reply).unwrap();
        assert_eq!(cause, RedrawCause::Copy);
        let tenth = own.split(' ').count() + 10;
        assert!((tenth..tenth + Screening::THEN_EVERY).contains(&at), "{at}");
    }
}
