//! A failed tool call before it becomes Elysia's `Error`: whether the model could have
//! avoided it, and what went wrong. Tools make them; the tool tape records them.

use serde::{Deserialize, Serialize};

use super::Return;

/// Why a tool call failed. `avoidable` failures carry feedback the model can act on
/// (a malformed expression, a refused URL); the others are outside its control.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolFailure {
    /// Whether the model could have avoided the failure by calling differently.
    pub avoidable: bool,
    /// What went wrong.
    pub message: String,
}

impl ToolFailure {
    /// A failure the model can fix by changing its call.
    pub fn avoidable(message: impl Into<String>) -> Self {
        Self {
            avoidable: true,
            message: message.into(),
        }
    }

    /// A failure outside the model's control.
    pub fn unknown(message: impl Into<String>) -> Self {
        Self {
            avoidable: false,
            message: message.into(),
        }
    }

    /// Elysia's `Error`: feedback only when the model can fix its call.
    pub fn to_return(&self) -> Return {
        Return::Error {
            feedback: if self.avoidable {
                self.message.clone()
            } else {
                String::new()
            },
            error_message: self.message.clone(),
        }
    }
}
