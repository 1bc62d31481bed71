//! What can go wrong running a model once it is loaded, and with a weight's bytes.

/// A forward pass, a cache, a choice or a prompt that cannot be done.
#[derive(Debug, thiserror::Error)]
pub enum InferError {
    #[error("no memory for a KV cache of {positions} positions")]
    NoMemory { positions: usize },
    #[error("{tokens} tokens do not fit the model's {positions} positions")]
    TooLong { tokens: usize, positions: usize },
    #[error("token {token} is outside the vocabulary of {vocab}")]
    UnknownToken { token: u32, vocab: usize },
    #[error("logits asked for row {row} of {rows}")]
    NoSuchRow { row: usize, rows: usize },
    #[error("option {index} has no tokens")]
    EmptyOption { index: usize },
    #[error("option {index} has the same tokens as another")]
    SameOption { index: usize },
    #[error("chat template")]
    Template(#[from] minijinja::Error),
}

/// Weight bytes that cannot be computed with.
#[derive(Debug, thiserror::Error)]
pub enum WeightError {
    #[error("type {0} is not supported")]
    Unsupported(&'static str),
    #[error("unknown ggml type {0}")]
    UnknownType(u32),
    #[error("a dimension is zero")]
    ZeroDimension,
    #[error("no memory for {bytes} bytes of weights")]
    NoMemory { bytes: usize },
    #[error("rows of {cols} values cannot be stored as {ty} (groups of {group})")]
    Row {
        cols: usize,
        ty: &'static str,
        group: usize,
    },
    #[error("{bytes} bytes for {rows} × {cols} {ty} values, which need {}", need.map_or("more than fits in memory".to_string(), |n| n.to_string()))]
    Size {
        bytes: usize,
        rows: usize,
        cols: usize,
        ty: &'static str,
        need: Option<usize>,
    },
}
