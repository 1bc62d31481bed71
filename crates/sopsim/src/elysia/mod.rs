//! The Elysia data model: the keyed result store, the return objects tools yield, and
//! a failed call before it becomes an `Error`.

mod failure;
mod objects;
mod store;

pub use failure::Failure;
pub use objects::{ResultObject, Return, REF_ID};
pub use store::{content_hash, Entry, Store, StoreError};
