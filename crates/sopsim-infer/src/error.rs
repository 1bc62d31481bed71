//! What can go wrong running a model once it is loaded, and with a weight's bytes.

/// A forward pass, a cache, a choice or a prompt that cannot be done.
#[derive(Debug, thiserror::Error)]
pub enum InferError {
    /// The KV cache could not grow to hold the positions asked for.
    #[error("no memory for a KV cache of {positions} positions")]
    NoMemory {
        /// Positions the cache was to hold.
        positions: usize,
    },
    /// A sequence runs past the model's context length.
    #[error("{tokens} tokens do not fit the model's {positions} positions")]
    TooLong {
        /// Positions the sequence would fill, cached ones included.
        tokens: usize,
        /// The model's context length.
        positions: usize,
    },
    /// A token id at or beyond the vocabulary size.
    #[error("token {token} is outside the vocabulary of {vocab}")]
    UnknownToken {
        /// The offending token id.
        token: u32,
        /// The model's vocabulary size.
        vocab: usize,
    },
    /// Logits were asked for at a row past a segment's new tokens.
    #[error("logits asked for row {row} of {rows}")]
    NoSuchRow {
        /// The row asked for.
        row: usize,
        /// Tokens the segment has.
        rows: usize,
    },
    /// An option of a choice has no tokens.
    #[error("option {index} has no tokens")]
    EmptyOption {
        /// Position of the option in the list.
        index: usize,
    },
    /// An option of a choice repeats an earlier option's tokens, or is a prefix of one.
    #[error("option {index} has the same tokens as another")]
    SameOption {
        /// Position of the option in the list.
        index: usize,
    },
    /// The chat template failed to compile or render.
    #[error("chat template")]
    Template(#[from] minijinja::Error),
}

/// Weight bytes that cannot be computed with.
#[derive(Debug, thiserror::Error)]
pub enum WeightError {
    /// A ggml type sopsim knows by name but cannot compute with.
    #[error("type {0} is not supported")]
    Unsupported(&'static str),
    /// A ggml type number sopsim does not know.
    #[error("unknown ggml type {0}")]
    UnknownType(u32),
    /// A weight with no rows or no columns.
    #[error("a dimension is zero")]
    ZeroDimension,
    /// Memory for the weights could not be allocated.
    #[error("no memory for {bytes} bytes of weights")]
    NoMemory {
        /// Bytes asked for.
        bytes: usize,
    },
    /// A row length that is not a whole number of the format's groups (and of 32).
    #[error("rows of {cols} values cannot be stored as {ty} (groups of {group})")]
    Row {
        /// Values per row.
        cols: usize,
        /// Name of the weight format.
        ty: &'static str,
        /// The multiple a row length must be.
        group: usize,
    },
    /// Bytes that do not match the size the shape and format call for.
    #[error("{bytes} bytes for {rows} × {cols} {ty} values, which need {}", need.map_or("more than fits in memory".to_string(), |n| n.to_string()))]
    Size {
        /// Bytes given.
        bytes: usize,
        /// Rows of the weight.
        rows: usize,
        /// Values per row.
        cols: usize,
        /// Name of the weight format.
        ty: &'static str,
        /// Bytes needed, or `None` if the count overflows.
        need: Option<usize>,
    },
}
