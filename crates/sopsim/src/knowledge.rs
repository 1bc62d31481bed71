//! Knowledge bases for the `knowledge` component: a JSON file of entries, embedded once
//! per run with the run's embedder, searched with the latest message's stored embedding
//! (so a lookup embeds nothing new).
//!
//! The files are read and checked with the scenario (`scenario::knowledge_file`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dashmap::DashMap;
use tokio::sync::OnceCell;

use crate::embed::EmbedService;
use crate::scenario::knowledge_file::KnowledgeFileError;
pub(crate) use crate::scenario::knowledge_file::{read_entries, Entry};
use crate::scenario::{KnowledgeKind, KnowledgeLookup};
use sopsim_core::memory::EmbeddingIndex;

/// A knowledge base that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KnowledgeError {
    #[error(transparent)]
    File(#[from] KnowledgeFileError),
    #[error("embedding its entries")]
    Embed(#[source] crate::embed::EmbedError),
}

/// Entries and their embeddings, for one kind of lookup.
#[derive(Debug)]
pub(crate) struct KnowledgeBase {
    entries: Vec<Entry>,
    index: EmbeddingIndex,
}

impl KnowledgeBase {
    /// Embeds every entry's key text through the shared embedding service.
    pub(crate) async fn build(
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
    pub(crate) fn lookup(&self, query: &[f32], spec: &KnowledgeLookup) -> String {
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

type Key = (PathBuf, KnowledgeKind);

/// The knowledge bases one run has built, each read and embedded once however many
/// lookups use it. Owned by the run's Environment: a knowledge file edited between runs
/// is read again by the next run.
#[derive(Default, Clone)]
pub(crate) struct KnowledgeBases(Arc<DashMap<Key, Arc<OnceCell<Arc<KnowledgeBase>>>>>);

impl KnowledgeBases {
    /// The knowledge base for `spec`, built on first use.
    pub(crate) async fn get(
        &self,
        spec: &KnowledgeLookup,
        embed: &EmbedService,
    ) -> Result<Arc<KnowledgeBase>, KnowledgeError> {
        let key = (PathBuf::from(&spec.path), spec.kind);
        let cell = self
            .0
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
}
