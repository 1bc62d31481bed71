//! The messages a prompt is made of, in the chat-completion shape every backend takes,
//! and the tools a decision's prompt offers.

use serde::{Deserialize, Serialize};

/// Who a chat message is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatRole {
    /// Instructions that set the model up.
    System,
    /// A message to the model.
    User,
    /// The model's own words.
    Assistant,
}

/// One message of a prompt.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who the message is from.
    pub role: ChatRole,
    /// The message's text.
    pub content: String,
}

impl ChatMessage {
    /// A system message with `content`.
    pub fn system(content: impl Into<String>) -> Self {
        Self {
            role: ChatRole::System,
            content: content.into(),
        }
    }
    /// A user message with `content`.
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: ChatRole::User,
            content: content.into(),
        }
    }
    /// An assistant message with `content`.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self {
            role: ChatRole::Assistant,
            content: content.into(),
        }
    }
}

/// A tool the model may call: what the decision prompt and native tool calling show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    /// The tool's name, as the model calls it.
    pub name: String,
    /// What the tool does, as the model is told.
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: serde_json::Value,
}
