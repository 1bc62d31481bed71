//! Data files for the `json_lookup` tool: a JSON array of objects, or JSON Lines with
//! one object a line. Read and checked when the scenario is loaded, and again when a
//! simulation's tools start.

use std::path::Path;

use serde_json::{Map, Value};

/// Largest data file read.
const MAX_DATA_BYTES: u64 = 64 << 20;

/// A data file's objects and their field names (in first-seen order).
#[derive(Debug)]
pub struct DataFile {
    /// The objects, in file order.
    pub objects: Vec<Map<String, Value>>,
    /// Every field name any object has, in first-seen order.
    pub fields: Vec<String>,
}

/// A data file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DataFileError {
    /// The file cannot be read.
    #[error(transparent)]
    Read(std::io::Error),
    /// The file is not UTF-8 text.
    #[error("not UTF-8 text")]
    NotUtf8,
    /// The file, read as one JSON document, is not an array.
    #[error("expected an array of objects")]
    NotArray,
    /// The file, read as one JSON document, is not valid JSON.
    #[error(transparent)]
    Json(serde_json::Error),
    /// A line of a JSON Lines file is not valid JSON.
    #[error("line {line}: {source}")]
    Line {
        /// The line's number, counting from 1.
        line: usize,
        /// Why the line is not valid JSON.
        #[source]
        source: serde_json::Error,
    },
    /// An item is not an object; its position, counting from 1.
    #[error("item {0} is not an object")]
    NotObject(usize),
    /// The file holds no objects.
    #[error("the file holds no objects")]
    Empty,
}

/// Reads a data file's objects.
pub fn read_objects(path: &Path) -> Result<DataFile, DataFileError> {
    let bytes = crate::files::read_bounded(path, MAX_DATA_BYTES).map_err(DataFileError::Read)?;
    let text = std::str::from_utf8(&bytes).map_err(|_| DataFileError::NotUtf8)?;
    let values: Vec<Value> = if text.trim_start().starts_with('[') {
        match crate::user_json::parse(text) {
            Ok(Value::Array(items)) => items,
            Ok(_) => return Err(DataFileError::NotArray),
            Err(e) => return Err(DataFileError::Json(e)),
        }
    } else {
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                crate::user_json::parse(l).map_err(|source| DataFileError::Line {
                    line: i + 1,
                    source,
                })
            })
            .collect::<Result<_, _>>()?
    };
    let mut objects = Vec::with_capacity(values.len());
    // First-seen order, in time linear in the keys however many distinct ones.
    let mut fields: indexmap::IndexSet<String> = indexmap::IndexSet::new();
    for (i, v) in values.into_iter().enumerate() {
        let Value::Object(obj) = v else {
            return Err(DataFileError::NotObject(i + 1));
        };
        for k in obj.keys() {
            if !fields.contains(k) {
                fields.insert(k.clone());
            }
        }
        objects.push(obj);
    }
    let fields = fields.into_iter().collect();
    if objects.is_empty() {
        return Err(DataFileError::Empty);
    }
    Ok(DataFile { objects, fields })
}
