//! The Elysia data model: the keyed result store, the return objects tools yield,
//! `_REF_ID`s on shown objects and in transcript lines, and a failed call before it
//! becomes an `Error`, how each call ended, and what a model is shown of them.

mod failure;
mod objects;
mod outcome;
mod refs;
mod shown;
mod store;

pub use failure::ToolFailure;
pub use objects::{ResultObject, Return, REF_ID};
pub use outcome::CallOutcome;
pub use refs::{listed, rename_refs, tag_refs};
pub use shown::{error_line, render_environment};
pub use store::{Entry, Store};
