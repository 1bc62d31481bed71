//! Elysia's keyed result store: `store[tool][name] -> [{objects, metadata}]`.
//!
//! Semantics follow Elysia's `Environment` (seed 000), with these deliberate differences:
//! - `_REF_ID` is `<tool>_<name>_<entry>_<i>` with **both indices 0-based** on every
//!   path, and `<entry>` is the number of the add under that key, never reused after a
//!   remove, so an id names one object for the whole run.
//! - Duplicates are found by a hash of the object's content without its `_REF_ID`
//!   (key order ignored), so detection works for raw objects and costs O(1) per object.
//! - `_REF_ID` lookup is a hash lookup, and each store has its own hidden store.
//! - `replace` assigns `_REF_ID`s to the objects it stores.

use std::collections::HashMap;
use std::hash::Hasher;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use thiserror::Error;
use xxhash_rust::xxh3::Xxh3;

use super::objects::{ResultObject, REF_ID};

/// One add: objects sharing one metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The objects with their `_REF_ID`s; a repeat is a `[repeat]` marker with the original's.
    pub objects: Vec<Map<String, Value>>,
    /// The metadata the objects share.
    pub metadata: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StoreError {
    #[error("no entries under {tool:?}/{name:?}")]
    Missing { tool: String, name: String },
    #[error("index {index} is out of range for {tool:?}/{name:?} ({len} entries)")]
    IndexOutOfRange {
        tool: String,
        name: String,
        index: i64,
        len: usize,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    entry_number: u64,
    object: usize,
}

#[derive(Debug, Clone, Default)]
struct Key {
    entries: Vec<Entry>,
    /// The add number of each entry in `entries`.
    numbers: Vec<u64>,
    /// Add number → position in `entries`.
    position: HashMap<u64, usize>,
    adds: u64,
    /// Content hash → the `_REF_ID` of the first object with that content.
    by_content: HashMap<u64, String>,
}

impl Key {
    fn object(&self, slot: Slot) -> Option<&Map<String, Value>> {
        self.entries
            .get(*self.position.get(&slot.entry_number)?)?
            .objects
            .get(slot.object)
    }

    fn reindex(&mut self) {
        self.position = self
            .numbers
            .iter()
            .enumerate()
            .map(|(i, n)| (*n, i))
            .collect();
    }
}

/// The store of one simulation.
#[derive(Debug, Clone, Default)]
pub struct Store {
    tools: IndexMap<String, IndexMap<String, Key>>,
    by_ref: HashMap<String, (String, String, Slot)>,
    hidden: Map<String, Value>,
}

/// Hash of an object's content, ignoring `_REF_ID` and key order.
pub(super) fn content_hash(object: &Map<String, Value>) -> u64 {
    let mut h = Xxh3::new();
    hash_map(&mut h, object, true);
    h.finish()
}

fn hash_map(h: &mut Xxh3, map: &Map<String, Value>, skip_ref: bool) {
    let mut keys: Vec<&String> = map.keys().filter(|k| !(skip_ref && *k == REF_ID)).collect();
    keys.sort();
    h.write_u8(b'{');
    for k in keys {
        h.write(k.as_bytes());
        h.write_u8(0);
        hash_value(h, &map[k]);
    }
    h.write_u8(b'}');
}

fn hash_value(h: &mut Xxh3, v: &Value) {
    match v {
        Value::Null => h.write_u8(b'n'),
        Value::Bool(b) => h.write_u8(if *b { b't' } else { b'f' }),
        Value::Number(n) => {
            h.write_u8(b'#');
            h.write(n.to_string().as_bytes());
        }
        Value::String(s) => {
            h.write_u8(b'"');
            h.write(s.as_bytes());
            h.write_u8(0);
        }
        Value::Array(items) => {
            h.write_u8(b'[');
            items.iter().for_each(|i| hash_value(h, i));
            h.write_u8(b']');
        }
        Value::Object(m) => hash_map(h, m, false),
    }
}

fn without_ref(o: &Map<String, Value>) -> impl Iterator<Item = (&String, &Value)> {
    o.iter().filter(|(k, _)| *k != REF_ID)
}

fn same_content(a: &Map<String, Value>, b: &Map<String, Value>) -> bool {
    without_ref(a).count() == without_ref(b).count()
        && without_ref(a).all(|(k, v)| b.get(k) == Some(v))
}

fn resolve(index: i64, len: usize) -> Option<usize> {
    let i = if index < 0 { len as i64 + index } else { index };
    (0..len as i64).contains(&i).then_some(i as usize)
}

impl Store {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a result's objects (`to_json` without mapping) under `[tool][result.name]`;
    /// returns their `_REF_ID`s (a repeat's is its original's).
    pub fn add(
        &mut self,
        tool: &str,
        result: &ResultObject,
        include_duplicates: bool,
    ) -> Vec<String> {
        self.add_objects(
            tool,
            &result.name,
            result.to_json(false),
            result.metadata.clone(),
            include_duplicates,
        )
    }

    /// Adds objects as one new entry. Each gets a `_REF_ID`; an object whose content is
    /// already stored under this key becomes a `[repeat]` marker pointing at the
    /// original, unless `include_duplicates`. An empty list creates the key only.
    /// Returns the objects' `_REF_ID`s, in order.
    pub fn add_objects(
        &mut self,
        tool: &str,
        name: &str,
        objects: Vec<Map<String, Value>>,
        metadata: Map<String, Value>,
        include_duplicates: bool,
    ) -> Vec<String> {
        let key = self
            .tools
            .entry(tool.to_string())
            .or_default()
            .entry(name.to_string())
            .or_default();
        if objects.is_empty() {
            return Vec::new();
        }
        let number = key.adds;
        key.adds += 1;
        let mut stored = Vec::with_capacity(objects.len());
        let mut new_refs = Vec::new();
        let mut refs = Vec::with_capacity(objects.len());
        for (i, mut obj) in objects.into_iter().enumerate() {
            let hash = content_hash(&obj);
            // The hash finds the candidate in O(1); comparing contents rules out collisions.
            let original = key
                .by_content
                .get(&hash)
                .filter(|r| {
                    self.by_ref
                        .get(*r)
                        .and_then(|(_, _, slot)| key.object(*slot))
                        .is_some_and(|stored| same_content(stored, &obj))
                })
                .cloned();
            match original {
                Some(original) if !include_duplicates => {
                    refs.push(original.clone());
                    let mut marker = Map::new();
                    marker.insert("object_info".into(), "[repeat]".into());
                    marker.insert(REF_ID.into(), original.into());
                    stored.push(marker);
                }
                _ => {
                    let ref_id = format!("{tool}_{name}_{number}_{i}");
                    refs.push(ref_id.clone());
                    obj.shift_insert(0, REF_ID.into(), ref_id.clone().into());
                    key.by_content.entry(hash).or_insert_with(|| ref_id.clone());
                    new_refs.push((
                        ref_id,
                        Slot {
                            entry_number: number,
                            object: i,
                        },
                    ));
                    stored.push(obj);
                }
            }
        }
        key.position.insert(number, key.entries.len());
        key.entries.push(Entry {
            objects: stored,
            metadata,
        });
        key.numbers.push(number);
        for (r, slot) in new_refs {
            self.by_ref
                .insert(r, (tool.to_string(), name.to_string(), slot));
        }
        refs
    }

    /// Every entry, as `(tool, name, entry)`, in the order the keys were made.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str, &Entry)> {
        self.tools.iter().flat_map(|(tool, names)| {
            names.iter().flat_map(move |(name, key)| {
                key.entries
                    .iter()
                    .map(move |e| (tool.as_str(), name.as_str(), e))
            })
        })
    }

    /// All entries under `[tool][name]`, or `None` if the key was never created.
    pub fn find(&self, tool: &str, name: &str) -> Option<&[Entry]> {
        self.tools
            .get(tool)?
            .get(name)
            .map(|k| k.entries.as_slice())
    }

    /// One entry; negative indices count from the end, as in Python.
    pub fn find_entry(&self, tool: &str, name: &str, index: i64) -> Option<&Entry> {
        let entries = self.find(tool, name)?;
        resolve(index, entries.len()).map(|i| &entries[i])
    }

    /// The stored object with this `_REF_ID`.
    pub fn get_by_ref(&self, ref_id: &str) -> Option<&Map<String, Value>> {
        let (tool, name, slot) = self.by_ref.get(ref_id)?;
        self.tools.get(tool)?.get(name)?.object(*slot)
    }

    fn forget(&mut self, tool: &str, name: &str, range: std::ops::Range<usize>) {
        let Some(key) = self.tools.get_mut(tool).and_then(|t| t.get_mut(name)) else {
            return;
        };
        for e in range {
            for obj in &key.entries[e].objects {
                if obj.get("object_info").and_then(Value::as_str) == Some("[repeat]") {
                    continue;
                }
                if let Some(r) = obj.get(REF_ID).and_then(Value::as_str) {
                    self.by_ref.remove(r);
                    let hash = content_hash(obj);
                    if key.by_content.get(&hash).is_some_and(|v| v == r) {
                        key.by_content.remove(&hash);
                    }
                }
            }
        }
    }

    /// Removes every entry (`None`, the key stays, empty) or the entry at `index`.
    pub fn remove(&mut self, tool: &str, name: &str, index: Option<i64>) -> Result<(), StoreError> {
        let len = self.find(tool, name).map(<[Entry]>::len);
        let Some(len) = len else {
            return match index {
                None => Ok(()),
                Some(_) => Err(StoreError::Missing {
                    tool: tool.into(),
                    name: name.into(),
                }),
            };
        };
        let range = match index {
            None => 0..len,
            Some(i) => {
                let at = resolve(i, len).ok_or(StoreError::IndexOutOfRange {
                    tool: tool.into(),
                    name: name.into(),
                    index: i,
                    len,
                })?;
                at..at + 1
            }
        };
        self.forget(tool, name, range.clone());
        if let Some(key) = self.tools.get_mut(tool).and_then(|t| t.get_mut(name)) {
            key.entries.drain(range.clone());
            key.numbers.drain(range);
            key.reindex();
        }
        Ok(())
    }

    /// Replaces all entries with one (`None`) or the entry at `index`. Does nothing if
    /// the key does not exist, as in Elysia.
    pub fn replace(
        &mut self,
        tool: &str,
        name: &str,
        objects: Vec<Map<String, Value>>,
        metadata: Map<String, Value>,
        index: Option<i64>,
    ) -> Result<(), StoreError> {
        let Some(len) = self.find(tool, name).map(<[Entry]>::len) else {
            return Ok(());
        };
        let at = match index {
            None => None,
            Some(i) => Some(resolve(i, len).ok_or(StoreError::IndexOutOfRange {
                tool: tool.into(),
                name: name.into(),
                index: i,
                len,
            })?),
        };
        let range = at.map_or(0..len, |a| a..a + 1);
        self.forget(tool, name, range.clone());
        let Some(key) = self.tools.get_mut(tool).and_then(|t| t.get_mut(name)) else {
            return Ok(());
        };
        let number = key.adds;
        key.adds += 1;
        let mut refs = Vec::new();
        let objects: Vec<Map<String, Value>> = objects
            .into_iter()
            .enumerate()
            .map(|(i, mut o)| {
                let r = format!("{tool}_{name}_{number}_{i}");
                o.shift_insert(0, REF_ID.into(), r.clone().into());
                key.by_content
                    .entry(content_hash(&o))
                    .or_insert_with(|| r.clone());
                refs.push((
                    r,
                    Slot {
                        entry_number: number,
                        object: i,
                    },
                ));
                o
            })
            .collect();
        let entry = Entry { objects, metadata };
        match at {
            None => {
                key.entries = vec![entry];
                key.numbers = vec![number];
            }
            Some(a) => {
                key.entries[a] = entry;
                key.numbers[a] = number;
            }
        }
        key.reindex();
        for (r, slot) in refs {
            self.by_ref
                .insert(r, (tool.to_string(), name.to_string(), slot));
        }
        Ok(())
    }

    /// True when no key holds an entry.
    pub fn is_empty(&self) -> bool {
        self.tools
            .values()
            .all(|names| names.values().all(|k| k.entries.is_empty()))
    }

    /// Data tools keep out of the model's sight.
    pub fn hidden(&self) -> &Map<String, Value> {
        &self.hidden
    }

    /// The data tools keep out of the model's sight, to change.
    pub fn hidden_mut(&mut self) -> &mut Map<String, Value> {
        &mut self.hidden
    }

    /// `{"environment": {tool: {name: [entries]}}, "hidden_environment": {...}}`, a snapshot.
    pub fn to_json(&self) -> Value {
        let env: Map<String, Value> = self
            .tools
            .iter()
            .map(|(tool, names)| {
                let inner: Map<String, Value> = names
                    .iter()
                    .map(|(n, k)| {
                        (
                            n.clone(),
                            serde_json::to_value(&k.entries).unwrap_or(Value::Null),
                        )
                    })
                    .collect();
                (tool.clone(), Value::Object(inner))
            })
            .collect();
        serde_json::json!({ "environment": env, "hidden_environment": self.hidden })
    }
}

#[cfg(test)]
mod tests;
