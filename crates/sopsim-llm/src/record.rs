//! Record and replay (`--record DIR`, `--replay DIR`): every request and its full
//! response stored as `DIR/<key>.json`, the key being the SHA-256 of the canonical
//! request: messages, model settings, and the call's place in its run (run seed, kind,
//! agent, turn, index). The place matters because the same prompt can get different
//! answers: sampling is seeded from the run's seed, and an agent may be asked the same
//! thing twice. One recording can thus hold many seeds (a whole `sopsim bench`). A
//! replay answers from the recording and never opens a connection, so a replayed run
//! reproduces the recorded transcript exactly.
//! Nothing secret is in a request: the API key travels only in the HTTP header.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{ChatMessage, Completion, LlmBackend, LlmError, LlmRequest, TokenSink, Usage};
use sopsim_core::scenario::LlmSettings;

#[derive(Serialize, Deserialize)]
struct Canonical<'a> {
    messages: std::borrow::Cow<'a, [ChatMessage]>,
    settings: std::borrow::Cow<'a, LlmSettings>,
    call: CallPlace<'a>,
    /// A closed choice's options (absent for a chat completion, so those keys are the
    /// same as before choices existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    options: Option<std::borrow::Cow<'a, [String]>>,
    /// A decision's tools and this turn's calls so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tools: Option<std::borrow::Cow<'a, super::ToolRequest>>,
    /// A reply drawn again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    redraw: Option<std::borrow::Cow<'a, super::Redraw>>,
    /// A reply's candidate past the first (absent for the first, so its key is the
    /// same as before candidates existed).
    #[serde(default, skip_serializing_if = "is_zero")]
    candidate: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Where in a run a call happens.
#[derive(Serialize, Deserialize)]
struct CallPlace<'a> {
    run_seed: u64,
    kind: super::CallKind,
    agent: Option<std::borrow::Cow<'a, str>>,
    turn: u64,
    index: u64,
}

impl<'a> CallPlace<'a> {
    fn of(req: &'a LlmRequest) -> Self {
        let c = &req.context;
        Self {
            run_seed: c.run_seed,
            kind: c.kind,
            agent: c.agent.as_deref().map(Into::into),
            turn: c.turn,
            index: c.index,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Entry<'a> {
    request: Canonical<'a>,
    #[serde(flatten)]
    answer: Answer,
}

/// A model's answer as sopsim keeps it: in a recording's entry, and in a run's
/// journal (`crate::journal`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Answer {
    text: String,
    usage: Usage,
    model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stopped_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    chosen: Option<super::Chosen>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<super::ToolCall>,
    /// The server refused the request's sampling fields (told once per run).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    settings_unsent: bool,
    /// The flaw the draw was stopped for, when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    abandoned: Option<sopsim_core::quality::RedrawCause>,
}

impl From<&Completion> for Answer {
    fn from(c: &Completion) -> Self {
        Self {
            text: c.text.clone(),
            usage: c.usage,
            model: c.model.clone(),
            stopped_at: c.stopped_at.clone(),
            chosen: c.chosen.clone(),
            tool_calls: c.tool_calls.clone(),
            settings_unsent: c.settings_unsent,
            abandoned: c.abandoned,
        }
    }
}

impl From<Answer> for Completion {
    fn from(a: Answer) -> Self {
        Completion {
            stopped_at: a.stopped_at,
            chosen: a.chosen,
            tool_calls: a.tool_calls,
            settings_unsent: a.settings_unsent,
            abandoned: a.abandoned,
            ..Completion::text(a.text, a.usage, a.model)
        }
    }
}

impl<'a> Canonical<'a> {
    fn of(req: &'a LlmRequest) -> Self {
        Canonical {
            messages: (&req.messages[..]).into(),
            settings: std::borrow::Cow::Borrowed(&req.settings),
            call: CallPlace::of(req),
            options: req.options.as_deref().map(Into::into),
            tools: req.tools.as_ref().map(std::borrow::Cow::Borrowed),
            redraw: req.redraw.as_ref().map(std::borrow::Cow::Borrowed),
            candidate: req.candidate,
        }
    }
}

/// The recording key of a request.
pub fn request_key(req: &LlmRequest) -> String {
    key_of(&Canonical::of(req))
}

fn key_of(canonical: &Canonical) -> String {
    // The JSON is hashed as it is written: a prompt is kilobytes, asked several times
    // a turn. The buffer hands the hash whole blocks, not serde's many small pieces.
    let mut buffered = std::io::BufWriter::with_capacity(8192, HashWriter(Sha256::new()));
    let hasher = match serde_json::to_writer(&mut buffered, canonical) {
        Ok(()) => buffered.into_inner().map(|w| w.0).unwrap_or_default(),
        Err(_) => Sha256::new(),
    };
    sopsim_core::digest::hex(hasher.finalize())
}

/// A hash that bytes can be written into.
struct HashWriter(Sha256);

impl std::io::Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Passes requests to a backend and stores each response.
pub struct Recorder {
    inner: Arc<dyn LlmBackend>,
    dir: PathBuf,
}

impl Recorder {
    /// A recorder of `inner`'s answers into `dir`, created if missing; its `backend.txt`
    /// names `inner`.
    pub fn new(inner: Arc<dyn LlmBackend>, dir: &Path) -> std::io::Result<Self> {
        if dir.is_file() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "a file, not a folder",
            ));
        }
        std::fs::create_dir_all(dir)?;
        let named = format!(
            "{}\n{CANDIDATES_LINE}{}\n",
            inner.describe(),
            inner.candidates()
        );
        std::fs::write(dir.join(BACKEND_FILE), named)?;
        Ok(Self {
            inner,
            dir: dir.to_path_buf(),
        })
    }
}

impl LlmBackend for Recorder {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn notes(&self) -> Vec<String> {
        self.inner.notes()
    }

    fn native_tools(&self) -> bool {
        self.inner.native_tools()
    }

    fn draws(&self) -> bool {
        self.inner.draws()
    }

    fn candidates(&self) -> u32 {
        self.inner.candidates()
    }

    fn forbids(&self) -> bool {
        self.inner.forbids()
    }

    fn routed(&self, settings: &sopsim_core::scenario::LlmSettings) -> Option<&dyn LlmBackend> {
        self.inner.routed(settings)
    }

    fn tool_tape(&self) -> Option<ToolTape> {
        Some(ToolTape::Record(self.dir.clone()))
    }

    fn complete<'a>(
        &'a self,
        request: LlmRequest,
        stream: Option<TokenSink>,
    ) -> BoxFuture<'a, Result<Completion, LlmError>> {
        Box::pin(async move {
            let completion = self.inner.complete(request.clone(), stream).await?;
            let canonical = Canonical::of(&request);
            let key = key_of(&canonical);
            let entry = Entry {
                request: canonical,
                answer: Answer::from(&completion),
            };
            let path = self.dir.join(format!("{key}.json"));
            let written = serde_json::to_vec_pretty(&entry)
                .map_err(std::io::Error::from)
                .and_then(|bytes| sopsim_core::files::replace_file(&path, &bytes));
            written.map_err(|e| LlmError::caused_by("record", path.display().to_string(), e))?;
            Ok(completion)
        })
    }
}

/// The largest recorded answer sopsim reads back.
const MAX_ENTRY_BYTES: u64 = 64 * 1024 * 1024;

/// Where a recording names the backend it recorded (its first line) and how many
/// candidates it drew for a reply.
const BACKEND_FILE: &str = "backend.txt";
const CANDIDATES_LINE: &str = "candidates: ";
/// What a local model drew for a reply when a recording did not say: recordings made
/// before `backend.txt` gave the count came from versions that drew four.
const UNSAID_LOCAL_CANDIDATES: u32 = 4;

/// Answers from a recording only.
pub struct Replayer {
    dir: PathBuf,
    /// The recorded backend's description: a replay stands for the model that answered,
    /// so a replayed run's `summary.json` and a replayed benchmark's `report.json`
    /// match the recorded ones byte for byte.
    recorded: Option<String>,
    /// The candidates the recorded backend drew for a reply, as `backend.txt` says.
    candidates: Option<u32>,
}

impl Replayer {
    /// A replayer of the recording in `dir`; fails unless `dir` is a folder `--record` made.
    pub fn new(dir: &Path) -> std::io::Result<Self> {
        if !dir.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no such folder",
            ));
        }
        // Every recording names its backend: a folder without it is something else
        // (a run's output folder, say), refused before any turn is played.
        let named = match sopsim_core::files::read_text_bounded(&dir.join(BACKEND_FILE), 4096) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("not a recording made with --record (it has no {BACKEND_FILE})"),
                ))
            }
            Err(e) => return Err(e),
        };
        let mut lines = named.lines();
        let recorded = lines
            .next()
            .map(|l| l.trim().to_string())
            .filter(|s| !s.is_empty());
        let candidates = lines
            .filter_map(|l| l.trim().strip_prefix(CANDIDATES_LINE))
            .find_map(|n| n.trim().parse().ok());
        Ok(Self {
            dir: dir.to_path_buf(),
            recorded,
            candidates,
        })
    }
}

impl LlmBackend for Replayer {
    fn describe(&self) -> String {
        self.recorded
            .clone()
            .unwrap_or_else(|| format!("replay:{}", self.dir.display()))
    }

    fn tool_tape(&self) -> Option<ToolTape> {
        Some(ToolTape::Replay(self.dir.clone()))
    }

    /// As the recorded backend asked, so the replayed requests are the recorded ones.
    fn native_tools(&self) -> bool {
        self.recorded
            .as_deref()
            .is_some_and(|r| r.starts_with("openai:"))
    }

    /// As the recorded backend drew: a recorded script made no redraws to replay.
    fn draws(&self) -> bool {
        self.recorded.as_deref() != Some("scripted")
    }

    /// As many candidates as the recorded backend drew at once.
    fn candidates(&self) -> u32 {
        match (self.candidates, self.recorded.as_deref()) {
            (Some(n), _) => n,
            (None, Some(b)) if b.starts_with("local:") => UNSAID_LOCAL_CANDIDATES,
            _ => 1,
        }
    }

    /// As the recorded backend drew, so a replay warns as the recording did.
    fn forbids(&self) -> bool {
        self.recorded
            .as_deref()
            .is_some_and(|b| b.starts_with("local:"))
    }

    fn complete<'a>(
        &'a self,
        request: LlmRequest,
        stream: Option<TokenSink>,
    ) -> BoxFuture<'a, Result<Completion, LlmError>> {
        Box::pin(async move {
            let key = request_key(&request);
            let path = self.dir.join(format!("{key}.json"));
            let ctx = &request.context;
            let missing = || {
                LlmError::failed("replay", format!(
                    "turn {} ({} call{} in state {}): this request is not in the recording {} (key {})",
                    ctx.turn,
                    ctx.kind.as_str(),
                    ctx.agent.as_ref().map(|a| format!(" by {a}")).unwrap_or_default(),
                    ctx.state,
                    self.dir.display(),
                    &key[..16]
                ))
            };
            if !path.exists() {
                return Err(missing());
            }
            let bytes = sopsim_core::files::read_bounded(&path, MAX_ENTRY_BYTES)
                .map_err(|e| LlmError::caused_by("replay", path.display().to_string(), e))?;
            let completion = parse_entry(&bytes)
                .map_err(|e| LlmError::caused_by("replay", path.display().to_string(), e))?;
            if let Some(sink) = stream {
                sink(&completion.text);
            }
            Ok(completion)
        })
    }
}

/// The completion a recording file holds.
pub fn parse_entry(bytes: &[u8]) -> Result<Completion, serde_json::Error> {
    let entry: Entry = serde_json::from_slice(bytes)?;
    Ok(entry.answer.into())
}

/// Where the results of tools with side effects (`http`, `mcp`) are kept next to a
/// recording: `DIR/tools/<key>.json`, the key being the SHA-256 of the call's place
/// (run seed, agent, turn, step) and the call itself. A replay reads them back and
/// never runs those tools.
#[derive(Debug, Clone)]
pub enum ToolTape {
    /// Recording: results are kept under this folder.
    Record(PathBuf),
    /// Replaying: results are read back from this folder, and the tools never run.
    Replay(PathBuf),
    /// A run's journal first, then the tape of the backend the journal wraps.
    Journal(Arc<dyn ToolJournal>, Option<Box<ToolTape>>),
}

/// Where a run keeps the results of its tools with side effects as they come, and
/// finds those of the run it resumes (`crate::journal`).
pub trait ToolJournal: Send + Sync + std::fmt::Debug {
    /// The resumed run's result of the call keyed `key`, given once.
    fn take(&self, key: &str) -> Option<TapedResult>;
    /// Keeps the result of the call keyed `key` as it comes.
    fn keep(&self, key: String, result: &TapedResult) -> std::io::Result<()>;
}

/// A recorded tool call's outcome.
pub type TapedResult =
    Result<sopsim_core::tool_results::ResultObject, sopsim_core::tool_results::ToolFailure>;

/// Identifies one tool call in a run.
#[derive(Serialize)]
pub struct TapedCall<'a> {
    /// The run's `--seed`.
    pub run_seed: u64,
    /// The agent that made the call.
    pub agent: &'a str,
    /// The run's turn the call belongs to.
    pub turn: u64,
    /// The turn's tool step (from 1) that made the call.
    pub step: u32,
    /// The name of the tool called.
    pub tool: &'a str,
    /// The call's arguments, as the model's raw JSON text.
    pub arguments: &'a str,
}

impl TapedCall<'_> {
    /// The SHA-256 of the call's place and the call itself.
    pub fn key(&self) -> String {
        let bytes = serde_json::to_vec(self).unwrap_or_default();
        sopsim_core::digest::sha256_hex(&bytes)
    }
}

impl ToolTape {
    fn path(dir: &Path, call: &TapedCall<'_>) -> PathBuf {
        dir.join("tools").join(format!("{}.json", call.key()))
    }

    /// Keeps `result` (recording, journal); a replay keeps nothing.
    pub fn save(&self, call: &TapedCall<'_>, result: &TapedResult) -> std::io::Result<()> {
        match self {
            ToolTape::Record(dir) => {
                std::fs::create_dir_all(dir.join("tools"))?;
                let bytes = serde_json::to_vec_pretty(result).map_err(std::io::Error::from)?;
                sopsim_core::files::replace_file(&Self::path(dir, call), &bytes)
            }
            ToolTape::Replay(_) => Ok(()),
            ToolTape::Journal(journal, inner) => {
                journal.keep(call.key(), result)?;
                inner
                    .as_ref()
                    .map_or(Ok(()), |tape| tape.save(call, result))
            }
        }
    }

    /// The kept result of `call`: from a replay, or from a resumed run's journal.
    pub fn load(&self, call: &TapedCall<'_>) -> Option<std::io::Result<TapedResult>> {
        match self {
            ToolTape::Record(_) => None,
            ToolTape::Replay(dir) => {
                let path = Self::path(dir, call);
                Some(
                    sopsim_core::files::read_bounded(&path, MAX_ENTRY_BYTES).and_then(|bytes| {
                        serde_json::from_slice(&bytes).map_err(std::io::Error::from)
                    }),
                )
            }
            ToolTape::Journal(journal, inner) => journal
                .take(&call.key())
                .map(Ok)
                .or_else(|| inner.as_ref().and_then(|tape| tape.load(call))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CallContext, CallKind};

    /// Recordings and journals of earlier versions are looked up by this key, so it
    /// stays the SHA-256 of the canonical JSON, however that JSON reaches the hash.
    #[test]
    fn a_request_key_is_the_sha256_of_its_canonical_json() {
        let long = "A \"quoted\" line, a tab\tand é.\n".repeat(700);
        let req = LlmRequest::chat(
            vec![
                ChatMessage::system("You are Alice."),
                ChatMessage::user(long),
            ],
            Default::default(),
            CallContext::new(CallKind::Act, "s", 3, 1),
        );
        let json = serde_json::to_vec(&Canonical::of(&req)).unwrap();
        assert!(json.len() > 3 * 8192, "the JSON spans several buffers");
        assert_eq!(request_key(&req), sopsim_core::digest::sha256_hex(&json));
    }

    /// A replay draws as many candidates as the recording did, so it asks for the
    /// recorded requests whatever this version's default is.
    #[test]
    fn a_replay_draws_the_candidates_its_recording_names() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(BACKEND_FILE);
        let replayed = |text: &str| {
            std::fs::write(&file, text).unwrap();
            let r = Replayer::new(dir.path()).unwrap();
            (r.describe(), r.candidates())
        };
        assert_eq!(
            replayed("local:qwen15\ncandidates: 2\n"),
            ("local:qwen15".into(), 2)
        );
        assert_eq!(replayed("local:qwen05"), ("local:qwen05".into(), 4));
        assert_eq!(replayed("openai:gpt-4o\n"), ("openai:gpt-4o".into(), 1));
    }
}
