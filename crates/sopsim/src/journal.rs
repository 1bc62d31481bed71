//! A run's journal (`calls.jsonl` in its folder): every model answer, every result of a
//! tool that reaches outside and every line a person typed, appended as it comes.
//!
//! A killed run is resumed by running it again from its start with these answers: the
//! same requests (keyed as recordings key them, by content and place in the run) get
//! the same answers, so the simulation passes through the same states without asking a
//! model, a server or a person again, and goes on live where the journal ends. Each
//! entry is written with one `write` before its answer is used, so a killed run's
//! journal holds every answer its transcript depends on; a torn last line (a kill in
//! the middle of a write) is dropped when the journal is reopened.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::human::HumanInput;
use crate::llm::record::{request_key, Answer, TapedResult, ToolJournal, ToolTape};
use crate::llm::{Completion, LlmBackend, LlmError, LlmRequest, TokenSink};
use crate::output_folder::{FolderFileError, OutputFolder};

/// The journal's file name in a run's folder.
pub(crate) const JOURNAL_FILE: &str = "calls.jsonl";

/// The largest journal a resume reads.
const MAX_JOURNAL_BYTES: u64 = 1 << 30;

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Entry {
    Llm { key: String, answer: Answer },
    Tool { key: String, result: TapedResult },
    Person { name: String, line: String },
}

/// Why a journal could not be reopened.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}, line {line}, column {column}: not a journal entry")]
    Entry {
        path: PathBuf,
        line: usize,
        column: usize,
    },
    #[error(transparent)]
    File(#[from] FolderFileError),
}

/// The answers of a run so far, and the file they are appended to.
#[derive(Debug)]
pub(crate) struct Journal {
    path: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    file: File,
    /// The bytes of whole lines in the file.
    written: u64,
    /// Answers read back from a killed run, taken as the run asks again.
    answers: HashMap<String, Answer>,
    tools: HashMap<String, TapedResult>,
    people: HashMap<String, VecDeque<String>>,
    /// After a failed write nothing more is appended: the journal must stay a prefix
    /// of what the run did.
    failed: bool,
}

impl Journal {
    /// A new, empty journal, `name` in `folder` (an older file there is replaced).
    pub(crate) fn create(folder: &OutputFolder, name: &str) -> Result<Self, FolderFileError> {
        Ok(Self::with(
            &folder.path(name),
            folder.create(name)?,
            0,
            Default::default(),
        ))
    }

    /// The journal of a killed run (`name` in `folder`), its answers ready to be given
    /// again; a torn last line is cut off the file, and new entries are appended after
    /// the others.
    pub(crate) fn reopen(folder: &OutputFolder, name: &str) -> Result<Self, JournalError> {
        let path = folder.path(name);
        let bytes = folder
            .read_if_there(name, MAX_JOURNAL_BYTES)?
            .unwrap_or_default();
        let whole = sopsim_core::files::whole_lines(&bytes);
        let mut kept = Kept::default();
        for (i, line) in whole.split(|b| *b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let entry = serde_json::from_slice(line).map_err(|e| JournalError::Entry {
                path: path.clone(),
                line: i + 1,
                column: e.column(),
            })?;
            kept.add(entry);
        }
        let mut file = folder.reopen(name)?;
        let io = |source| JournalError::Io {
            path: path.clone(),
            source,
        };
        file.set_len(whole.len() as u64).map_err(io)?;
        std::io::Seek::seek(&mut file, std::io::SeekFrom::End(0)).map_err(io)?;
        Ok(Self::with(&path, file, whole.len() as u64, kept))
    }

    fn with(path: &Path, file: File, written: u64, kept: Kept) -> Self {
        Self {
            path: path.to_path_buf(),
            state: Mutex::new(State {
                file,
                written,
                answers: kept.answers,
                tools: kept.tools,
                people: kept.people,
                failed: false,
            }),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn append(&self, entry: &Entry) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(entry).map_err(std::io::Error::from)?;
        line.push(b'\n');
        let mut st = self.state();
        if st.failed {
            return Err(std::io::Error::other(
                "an earlier write to the journal failed",
            ));
        }
        let result = st.file.write_all(&line);
        match &result {
            Ok(()) => st.written += line.len() as u64,
            Err(_) => {
                // A line written in part is taken back, so the journal stays whole.
                let _ = st.file.set_len(st.written);
                st.failed = true;
            }
        }
        result
    }

    /// The killed run's answer to the request keyed `key`, if it had one.
    pub(crate) fn take_answer(&self, key: &str) -> Option<Completion> {
        self.state().answers.remove(key).map(Completion::from)
    }

    pub(crate) fn keep_answer(&self, key: String, completion: &Completion) -> std::io::Result<()> {
        self.append(&Entry::Llm {
            key,
            answer: Answer::from(completion),
        })
    }

    /// The next line `name` typed in the killed run, if there are more.
    pub(crate) fn take_line(&self, name: &str) -> Option<String> {
        self.state().people.get_mut(name)?.pop_front()
    }

    pub(crate) fn keep_line(&self, name: &str, line: &str) -> std::io::Result<()> {
        self.append(&Entry::Person {
            name: name.to_string(),
            line: line.to_string(),
        })
    }
}

impl ToolJournal for Journal {
    fn take(&self, key: &str) -> Option<TapedResult> {
        self.state().tools.remove(key)
    }

    fn keep(&self, key: String, result: &TapedResult) -> std::io::Result<()> {
        self.append(&Entry::Tool {
            key,
            result: result.clone(),
        })
    }
}

/// Entries read back from a journal file.
#[derive(Default)]
struct Kept {
    answers: HashMap<String, Answer>,
    tools: HashMap<String, TapedResult>,
    people: HashMap<String, VecDeque<String>>,
}

impl Kept {
    fn add(&mut self, entry: Entry) {
        match entry {
            Entry::Llm { key, answer } => {
                self.answers.insert(key, answer);
            }
            Entry::Tool { key, result } => {
                self.tools.insert(key, result);
            }
            Entry::Person { name, line } => self.people.entry(name).or_default().push_back(line),
        }
    }
}

/// A backend whose answers go into a journal, and which answers from it first.
pub(crate) struct Journaled {
    inner: Arc<dyn LlmBackend>,
    journal: Arc<Journal>,
}

impl Journaled {
    pub(crate) fn new(inner: Arc<dyn LlmBackend>, journal: Arc<Journal>) -> Self {
        Self { inner, journal }
    }
}

impl LlmBackend for Journaled {
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

    fn routed(&self, settings: &crate::scenario::LlmSettings) -> Option<&dyn LlmBackend> {
        self.inner.routed(settings)
    }

    fn tool_tape(&self) -> Option<ToolTape> {
        Some(ToolTape::Journal(
            self.journal.clone() as Arc<dyn ToolJournal>,
            self.inner.tool_tape().map(Box::new),
        ))
    }

    fn complete<'a>(
        &'a self,
        request: LlmRequest,
        stream: Option<TokenSink>,
    ) -> BoxFuture<'a, Result<Completion, LlmError>> {
        Box::pin(async move {
            let key = request_key(&request);
            if let Some(completion) = self.journal.take_answer(&key) {
                if let Some(sink) = stream {
                    sink(&completion.text);
                }
                return Ok(completion);
            }
            let completion = self.inner.complete(request, stream).await?;
            self.journal.keep_answer(key, &completion).map_err(|e| {
                LlmError::caused_by("journal", self.journal.path().display().to_string(), e)
            })?;
            Ok(completion)
        })
    }
}

/// A person's lines: the killed run's first, then the ones typed now, each kept.
pub(crate) struct JournaledInput {
    inner: Arc<dyn HumanInput>,
    journal: Arc<Journal>,
}

impl JournaledInput {
    pub(crate) fn new(inner: Arc<dyn HumanInput>, journal: Arc<Journal>) -> Self {
        Self { inner, journal }
    }

    async fn read(&self, name: &str, typed: BoxFuture<'_, Option<String>>) -> Option<String> {
        let line = typed.await?;
        // A line the journal cannot keep is still played: the next model call's write
        // fails and stops the run, naming the file.
        let _ = self.journal.keep_line(name, &line);
        Some(line)
    }
}

impl HumanInput for JournaledInput {
    fn read_turn<'a>(&'a self, name: &'a str, role: &'a str) -> BoxFuture<'a, Option<String>> {
        if let Some(line) = self.journal.take_line(name) {
            return Box::pin(async move { Some(line) });
        }
        Box::pin(self.read(name, self.inner.read_turn(name, role)))
    }

    fn read_move<'a>(&'a self, name: &'a str, role: &'a str) -> BoxFuture<'a, Option<String>> {
        if let Some(line) = self.journal.take_line(name) {
            return Box::pin(async move { Some(line) });
        }
        Box::pin(self.read(name, self.inner.read_move(name, role)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Usage;

    #[test]
    fn a_reopened_journal_gives_back_its_answers_once_and_drops_a_torn_line() {
        let dir = tempfile::tempdir().unwrap();
        let folder = OutputFolder::new(dir.path());
        let path = dir.path().join(JOURNAL_FILE);
        let journal = Journal::create(&folder, JOURNAL_FILE).unwrap();
        let said = Completion::text("Hello.".into(), Usage::default(), "m".into());
        journal.keep_answer("k1".into(), &said).unwrap();
        journal.keep_line("Ann", "I typed this").unwrap();
        journal.keep_line("Ann", "and this").unwrap();
        drop(journal);
        let mut torn = std::fs::read(&path).unwrap();
        let whole = torn.len();
        torn.extend_from_slice(b"{\"llm\":{\"key\":\"k2\",\"ans");
        std::fs::write(&path, &torn).unwrap();

        let journal = Journal::reopen(&folder, JOURNAL_FILE).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), whole as u64);
        assert_eq!(journal.take_answer("k1").unwrap().text, "Hello.");
        assert!(journal.take_answer("k1").is_none());
        assert!(journal.take_answer("k2").is_none());
        assert_eq!(journal.take_line("Ann").as_deref(), Some("I typed this"));
        assert_eq!(journal.take_line("Ann").as_deref(), Some("and this"));
        assert_eq!(journal.take_line("Ann"), None);
        journal.keep_answer("k2".into(), &said).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 4, "{text}");
    }

    #[test]
    fn a_damaged_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(JOURNAL_FILE);
        std::fs::write(
            &path,
            "{\"person\":{\"name\":\"A\",\"line\":\"x\"}}\nnot json\n",
        )
        .unwrap();
        let e = Journal::reopen(&OutputFolder::new(dir.path()), JOURNAL_FILE).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("line 2, column 1: not a journal entry"),
            "{e}"
        );
    }
}
