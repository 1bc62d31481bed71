//! Knowledge bases for the `knowledge` component: a JSON file of entries, embedded once
//! per process with the run's embedder, searched with the latest message's stored
//! embedding (so a lookup embeds nothing new).
//!
//! Files are entries with `q` and `a` (question and answer) and/or `chunk` (text), as an
//! object of entries (aiwaves' format, whose precomputed `emb` vectors are ignored: they
//! come from another model) or an array.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use dashmap::DashMap;
use serde_json::Value;
use tokio::sync::OnceCell;

use crate::embed::EmbedService;
use crate::memory::EmbeddingIndex;
use crate::scenario::{KnowledgeKind, KnowledgeLookup};

/// One entry of a knowledge base.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub question: Option<String>,
    pub answer: Option<String>,
    pub chunk: Option<String>,
}

impl Entry {
    /// The text that is matched against the query.
    fn key(&self, kind: KnowledgeKind) -> Option<&str> {
        match kind {
            KnowledgeKind::Qa => self.question.as_deref().or(self.chunk.as_deref()),
            KnowledgeKind::Text => self.chunk.as_deref().or(self.answer.as_deref()),
        }
    }

    /// How the entry is shown to the agent.
    fn render(&self, kind: KnowledgeKind) -> String {
        match (kind, &self.question, &self.answer) {
            (KnowledgeKind::Qa, Some(q), Some(a)) => format!("Question: {q}\nAnswer: {a}"),
            _ => self.key(kind).unwrap_or_default().to_string(),
        }
    }
}

/// A knowledge base that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KnowledgeError {
    #[error("cannot read it")]
    Read(#[source] std::io::Error),
    #[error("not JSON")]
    Json(#[source] serde_json::Error),
    #[error("expected an object or array of entries")]
    Shape,
    #[error("no entries with \"q\" or \"chunk\"")]
    Empty,
    #[error("embedding its entries")]
    Embed(#[source] crate::embed::EmbedError),
}

/// Entries and their embeddings, for one kind of lookup.
#[derive(Debug)]
pub struct KnowledgeBase {
    entries: Vec<Entry>,
    index: EmbeddingIndex,
}

/// The largest knowledge-base file read.
pub const MAX_KNOWLEDGE_BYTES: u64 = 64 * 1024 * 1024;

/// Reads a knowledge-base file's entries.
pub fn read_entries(path: &Path) -> Result<Vec<Entry>, KnowledgeError> {
    let text =
        crate::files::read_text_bounded(path, MAX_KNOWLEDGE_BYTES).map_err(KnowledgeError::Read)?;
    let doc: Value = serde_json::from_str(&text).map_err(KnowledgeError::Json)?;
    let items: Vec<&Value> = match &doc {
        Value::Object(m) => m.values().collect(),
        Value::Array(a) => a.iter().collect(),
        _ => return Err(KnowledgeError::Shape),
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
        return Err(KnowledgeError::Empty);
    }
    Ok(entries)
}

impl KnowledgeBase {
    /// Embeds every entry's key text through the shared embedding service.
    pub async fn build(
        entries: Vec<Entry>,
        kind: KnowledgeKind,
        embed: &EmbedService,
    ) -> Result<Self, KnowledgeError> {
        let texts: Vec<String> = entries
            .iter()
            .map(|e| e.key(kind).unwrap_or_default().to_string())
            .collect();
        let vectors = futures::future::try_join_all(texts.into_iter().map(|t| embed.embed(t)))
            .await
            .map_err(KnowledgeError::Embed)?;
        let mut index = EmbeddingIndex::default();
        for v in &vectors {
            index.push(v);
        }
        Ok(Self { entries, index })
    }

    /// The prompt text for a lookup with the (normalised) query vector.
    pub fn lookup(&self, query: &[f32], spec: &KnowledgeLookup) -> String {
        let min = spec.min_score.unwrap_or(match spec.kind {
            KnowledgeKind::Qa => 0.75,
            KnowledgeKind::Text => 0.5,
        });
        let found: Vec<String> = self
            .index
            .nearest(query, 0..self.entries.len(), spec.top_k)
            .into_iter()
            .filter(|h| h.score >= min)
            .map(|h| self.entries[h.position].render(spec.kind))
            .collect();
        if found.is_empty() {
            "The knowledge base has nothing matching the latest message.".to_string()
        } else {
            format!("From the knowledge base:\n{}", found.join("\n\n"))
        }
    }
}

type Key = (PathBuf, KnowledgeKind, String);

/// The knowledge base for `spec`, built once per process and embedder.
pub async fn shared(
    spec: &KnowledgeLookup,
    embed: &EmbedService,
) -> Result<Arc<KnowledgeBase>, KnowledgeError> {
    static CACHE: OnceLock<DashMap<Key, Arc<OnceCell<Arc<KnowledgeBase>>>>> = OnceLock::new();
    let key = (
        PathBuf::from(&spec.path),
        spec.kind,
        embed.name().to_string(),
    );
    let cell = CACHE
        .get_or_init(DashMap::new)
        .entry(key)
        .or_insert_with(|| Arc::new(OnceCell::new()))
        .clone();
    cell.get_or_try_init(|| async {
        let entries = read_entries(Path::new(&spec.path))?;
        KnowledgeBase::build(entries, spec.kind, embed)
            .await
            .map(Arc::new)
    })
    .await
    .cloned()
}
