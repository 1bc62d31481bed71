//! The Elysia data model: the keyed result store and the return objects tools yield.

mod objects;
mod store;

pub use objects::{ResultObject, Return, REF_ID};
pub use store::{content_hash, Entry, Store, StoreError};
