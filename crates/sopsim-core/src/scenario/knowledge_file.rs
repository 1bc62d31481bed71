//! Knowledge-base files for the `knowledge` component: entries with `q` and `a`
//! (question and answer) and/or `chunk` (text), as an object of entries (aiwaves'
//! format, whose precomputed `emb` vectors are ignored: they come from another model)
//! or an array. Read and checked when the scenario is loaded.

use std::path::Path;

use serde_json::Value;

use super::KnowledgeKind;

/// One entry of a knowledge base.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The entry's question (`q`).
    pub question: Option<String>,
    /// The entry's answer (`a`).
    pub answer: Option<String>,
    /// The entry's text (`chunk`).
    pub chunk: Option<String>,
}

impl Entry {
    /// The text that is matched against the query.
    pub fn key(&self, kind: KnowledgeKind) -> Option<&str> {
        match kind {
            KnowledgeKind::Qa => self.question.as_deref().or(self.chunk.as_deref()),
            KnowledgeKind::Text => self.chunk.as_deref().or(self.answer.as_deref()),
        }
    }

    /// How the entry is shown to the agent.
    pub fn render(&self, kind: KnowledgeKind) -> String {
        match (kind, &self.question, &self.answer) {
            (KnowledgeKind::Qa, Some(q), Some(a)) => format!("Question: {q}\nAnswer: {a}"),
            _ => self.key(kind).unwrap_or_default().to_string(),
        }
    }
}

/// A knowledge-base file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KnowledgeFileError {
    /// The file cannot be read.
    #[error("cannot read it")]
    Read(#[source] std::io::Error),
    /// The file is not valid JSON.
    #[error("not JSON")]
    Json(#[source] serde_json::Error),
    /// The file is JSON but neither an object nor an array of entries.
    #[error("expected an object or array of entries")]
    Shape,
    /// No entry has a `q` or a `chunk`.
    #[error("no entries with \"q\" or \"chunk\"")]
    Empty,
}

/// The largest knowledge-base file read.
pub const MAX_KNOWLEDGE_BYTES: u64 = 64 * 1024 * 1024;

/// Reads a knowledge-base file's entries.
pub fn read_entries(path: &Path) -> Result<Vec<Entry>, KnowledgeFileError> {
    let text = crate::files::read_text_bounded(path, MAX_KNOWLEDGE_BYTES)
        .map_err(KnowledgeFileError::Read)?;
    let doc: Value = crate::user_json::parse(&text).map_err(KnowledgeFileError::Json)?;
    let items: Vec<&Value> = match &doc {
        Value::Object(m) => m.values().collect(),
        Value::Array(a) => a.iter().collect(),
        _ => return Err(KnowledgeFileError::Shape),
    };
    let field = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(String::from);
    let entries: Vec<Entry> = items
        .into_iter()
        .map(|v| Entry {
            question: field(v, "q"),
            answer: field(v, "a"),
            chunk: field(v, "chunk"),
        })
        .filter(|e| e.question.is_some() || e.chunk.is_some())
        .collect();
    if entries.is_empty() {
        return Err(KnowledgeFileError::Empty);
    }
    Ok(entries)
}
