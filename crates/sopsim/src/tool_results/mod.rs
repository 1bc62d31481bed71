//! The Elysia data model: the keyed result store, the return objects tools yield,
//! `_REF_ID`s on shown objects and in transcript lines, and a failed call before it
//! becomes an `Error`.

mod failure;
mod objects;
mod refs;
mod store;

pub use failure::ToolFailure;
pub use objects::{ResultObject, Return, REF_ID};
pub use refs::{listed, rename_refs, tag_refs};
pub use store::{Entry, Store};
