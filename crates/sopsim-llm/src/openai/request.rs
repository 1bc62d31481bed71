//! How a chat-completions request to one server is shaped ([`RequestShape`]): its body
//! (the messages and native tools, the model, whether to stream, the sampling settings,
//! the extra fields only where the server may take them, the stop sequences within the
//! server's limit, and a closed choice's structured output), and what the server has
//! refused, which shapes every later request.

use std::sync::atomic::{AtomicBool, Ordering};

use serde::ser::{SerializeSeq, Serializer};
use serde::Serialize;
use serde_json::{json, Map, Value};

use super::choice::{ask_structured, Asking};
use super::{sampling_fields, tools, OpenAiOptions};
use crate::{CallKind, ChatRole, DecisionFormat, LlmRequest};
use sopsim_core::prompt::ChatMessage;

/// OpenAI's own API takes at most four stop sequences; vLLM, llama.cpp's server and
/// SGLang take any number.
const OPENAI_MAX_STOPS: usize = 4;

/// How requests to one server are shaped: its options, whether it is OpenAI's own API
/// (which refuses fields it does not know), and what it has refused so far. Shared by
/// every call to the server.
pub(super) struct RequestShape {
    options: OpenAiOptions,
    openai: bool,
    /// The server answered the extra sampling fields with HTTP 400: never sent again.
    extras_refused: AtomicBool,
    /// The server answered structured output (`response_format`) with HTTP 400:
    /// closed choices are asked in plain text from then on.
    structured_refused: AtomicBool,
    /// A closed choice's structured answers were unusable through all its retries: the
    /// server does not honour `response_format`, and every later choice would pay the
    /// same retries, so choices are asked in plain text from then on.
    structured_unusable: AtomicBool,
}

impl RequestShape {
    pub(super) fn new(options: OpenAiOptions, openai: bool) -> Self {
        Self {
            options,
            openai,
            extras_refused: AtomicBool::new(false),
            structured_refused: AtomicBool::new(false),
            structured_unusable: AtomicBool::new(false),
        }
    }

    pub(super) fn options(&self) -> &OpenAiOptions {
        &self.options
    }

    /// The model every request names unless it names its own (found by discovery).
    pub(super) fn serve(&mut self, model: String) {
        self.options.model = Some(model);
    }

    pub(super) fn is_openai(&self) -> bool {
        self.openai
    }

    pub(super) fn body<'r>(&self, req: &'r LlmRequest, asking: Asking) -> Body<'r> {
        let s = &req.settings;
        let mut exchange = Vec::new();
        let mut obj = Map::new();
        if let Some(tools) = req
            .tools
            .as_ref()
            .filter(|t| t.format == DecisionFormat::Native)
        {
            exchange = tools::exchange_messages(&tools.exchange);
            obj.insert("tools".into(), tools::definitions(&tools.tools));
            if let Some(choice) = &tools.tool_choice {
                obj.insert("tool_choice".into(), json!(choice));
            }
        }
        obj.insert("model".into(), json!(self.model(req)));
        obj.insert("stream".into(), json!(self.streams(req)));
        if let Some(t) = s.temperature {
            obj.insert("temperature".into(), json!(t));
        }
        if let Some(p) = s.top_p {
            obj.insert("top_p".into(), json!(p));
        }
        if let Some(k) = s.top_k {
            obj.insert("top_k".into(), json!(k));
        }
        if let Some(m) = s.max_tokens {
            // A streamed reply is closed at a sentence end near its budget: the
            // server may go on a little past it.
            let m = match self.budget(req) {
                Some(b) => b.hard as u32,
                None => m,
            };
            obj.insert("max_tokens".into(), json!(m));
        }
        if let Some(stop) = s.stop.as_ref().filter(|s| !s.is_empty()) {
            let limit = self.openai.then_some(OPENAI_MAX_STOPS);
            obj.insert("stop".into(), json!(stops_to_send(stop, limit)));
        }
        if let Some(seed) = s.seed {
            let attempt = req.redraw.as_ref().map_or(0, |r| u64::from(r.attempt));
            let candidate = u64::from(req.candidate) << 32;
            obj.insert(
                "seed".into(),
                json!(seed.wrapping_add(attempt).wrapping_add(candidate)),
            );
        }
        sampling_fields::standard(s, req.redraw.as_ref(), &mut obj);
        if self.sends_extras(req) {
            obj.extend(sampling_fields::extras(s));
        }
        if self.streams(req) {
            obj.insert("stream_options".into(), json!({"include_usage": true}));
        }
        if let (Some(options), Asking::Structured) = (&req.options, asking) {
            ask_structured(options, &mut obj);
        }
        Body {
            messages: Messages {
                chat: &req.messages,
                exchange,
            },
            fields: obj,
        }
    }

    /// Whether the reply is streamed: agents' replies and decisions, when streaming is
    /// on; every other call's answer is short and shown whole.
    pub(super) fn streams(&self, req: &LlmRequest) -> bool {
        self.options.stream && matches!(req.context.kind, CallKind::Act | CallKind::Decide)
    }

    /// A streamed reply's budget (`sopsim_core::sentence`): agents' replies only, and only
    /// when the request sets `max_tokens`.
    pub(super) fn budget(&self, req: &LlmRequest) -> Option<sopsim_core::sentence::ReplyBudget> {
        let max = req.settings.max_tokens?;
        (self.streams(req) && req.context.kind == CallKind::Act && req.tools.is_none())
            .then(|| sopsim_core::sentence::ReplyBudget::of(max as usize))
    }

    /// The model the request names, else the backend's.
    pub(super) fn model<'a>(&'a self, req: &'a LlmRequest) -> &'a str {
        req.settings
            .model
            .as_deref()
            .or(self.options.model.as_deref())
            .unwrap_or("default")
    }

    /// Whether the request's settings ask for extra sampling fields this server may
    /// take (never OpenAI's own API, nor a server that refused them).
    pub(super) fn sends_extras(&self, req: &LlmRequest) -> bool {
        !self.openai
            && !self.extras_refused.load(Ordering::Relaxed)
            && !sampling_fields::extras(&req.settings).is_empty()
    }

    /// Whether closed choices are asked as structured output: not once the server has
    /// refused it, nor once its structured answers proved unusable.
    pub(super) fn asks_structured(&self) -> bool {
        !self.structured_refused.load(Ordering::Relaxed)
            && !self.structured_unusable.load(Ordering::Relaxed)
    }

    /// Whether the request's extra sampling fields go unsent.
    pub(super) fn extras_unsent(&self, req: &LlmRequest) -> bool {
        !sampling_fields::extras(&req.settings).is_empty() && !self.sends_extras(req)
    }

    /// An HTTP 400 read as the refusal of what the request may go without: the extra
    /// sampling fields, else structured output, remembered so that it is never sent
    /// again; `None` names neither (the 400 is about something else). `extras_sent`:
    /// the request carried the extra sampling fields.
    pub(super) fn refused(
        &self,
        req: &LlmRequest,
        asking: Asking,
        extras_sent: bool,
    ) -> Option<&'static str> {
        if extras_sent {
            self.extras_refused.store(true, Ordering::Relaxed);
            Some("the extra sampling fields")
        } else if req.options.is_some() && asking == Asking::Structured {
            self.structured_refused.store(true, Ordering::Relaxed);
            Some("structured output")
        } else {
            None
        }
    }

    /// A closed choice's structured answers failed through every retry: choices are
    /// asked in plain text from then on.
    pub(super) fn structured_proved_unusable(&self) {
        self.structured_unusable.store(true, Ordering::Relaxed);
    }

    /// Whether a choice asked in plain text is so because structured answers proved
    /// unusable, rather than because the server refused structured output.
    pub(super) fn text_after_unusable(&self) -> bool {
        !self.structured_refused.load(Ordering::Relaxed)
            && self.structured_unusable.load(Ordering::Relaxed)
    }
}

/// A request's body: its messages, written from the request itself (a prompt is
/// kilobytes of text, serialised once rather than copied into JSON values first), and
/// every other field.
#[derive(Serialize)]
pub(super) struct Body<'r> {
    messages: Messages<'r>,
    #[serde(flatten)]
    fields: Map<String, Value>,
}

/// The chat messages under the API's role names, then the tool calls exchanged so far.
struct Messages<'r> {
    chat: &'r [ChatMessage],
    exchange: Vec<Value>,
}

#[derive(Serialize)]
struct ApiMessage<'r> {
    role: &'static str,
    content: &'r str,
}

impl Serialize for Messages<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.chat.len() + self.exchange.len()))?;
        for m in self.chat {
            let role = match m.role {
                ChatRole::System => "system",
                ChatRole::User => "user",
                ChatRole::Assistant => "assistant",
            };
            seq.serialize_element(&ApiMessage {
                role,
                content: &m.content,
            })?;
        }
        for e in &self.exchange {
            seq.serialize_element(e)?;
        }
        seq.end()
    }
}

/// A stop sequence that is a participant's label on a new line (`\nBen:`), as agents
/// are given for everyone else in the conversation.
fn is_label_stop(stop: &str) -> bool {
    stop.strip_prefix('\n')
        .and_then(|s| s.strip_suffix(':'))
        .is_some_and(|name| !name.trim().is_empty() && !name.contains('\n'))
}

/// The stop sequences to send: every one, once; or, to a server that takes at most
/// `limit`, the participants' labels first (they keep a reply in character), then the
/// others in order. What is left out is still cut on this side: `Action::process`
/// ends a reply where another participant's line starts.
fn stops_to_send(stops: &[String], limit: Option<usize>) -> Vec<String> {
    let mut unique: Vec<&String> = Vec::new();
    for s in stops.iter().filter(|s| !s.is_empty()) {
        if !unique.contains(&s) {
            unique.push(s);
        }
    }
    let Some(limit) = limit else {
        return unique.into_iter().cloned().collect();
    };
    let (labels, rest): (Vec<&String>, Vec<&String>) =
        unique.into_iter().partition(|s| is_label_stop(s));
    labels
        .into_iter()
        .chain(rest)
        .take(limit)
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn stops_all_go_to_servers_and_the_labels_first_to_openai() {
        let stops = strings(&[
            "END",
            "\nMia:",
            "\nBen:",
            "\nCleo:",
            "\nDan:",
            "\nModerator:",
            "END",
        ]);
        assert_eq!(
            stops_to_send(&stops, None),
            strings(&[
                "END",
                "\nMia:",
                "\nBen:",
                "\nCleo:",
                "\nDan:",
                "\nModerator:"
            ])
        );
        assert_eq!(
            stops_to_send(&stops, Some(OPENAI_MAX_STOPS)),
            strings(&["\nMia:", "\nBen:", "\nCleo:", "\nDan:"])
        );
        assert_eq!(
            stops_to_send(&strings(&["END", "\nBen:"]), Some(4)),
            strings(&["\nBen:", "END"])
        );
    }
}
