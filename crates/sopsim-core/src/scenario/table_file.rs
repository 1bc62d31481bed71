//! Files a population reads: persona tables (`.csv` with a header row, or JSON / JSON
//! Lines objects) and edge lists (`.csv` rows of two member names).

use std::path::Path;

use indexmap::IndexMap;
use serde_json::Value;

use super::data_file::{read_objects, DataFileError};

/// Largest table read.
const MAX_TABLE_BYTES: u64 = 64 << 20;

/// A table that cannot be used.
#[derive(Debug, thiserror::Error)]
pub(super) enum TableFileError {
    #[error(transparent)]
    Read(std::io::Error),
    #[error(transparent)]
    Objects(DataFileError),
    #[error("line {line}: {message}")]
    Csv { line: u64, message: String },
    #[error("line {line}: expected two member names, found {found} field(s)")]
    NotAPair { line: u64, found: usize },
}

fn is_csv(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"))
}

fn csv_error(e: csv::Error) -> TableFileError {
    let line = e.position().map_or(0, csv::Position::line);
    let message = match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!("{len} field(s) where the header has {expected_len}"),
        csv::ErrorKind::Utf8 { .. } => "not UTF-8 text".into(),
        _ => e.to_string(),
    };
    TableFileError::Csv { line, message }
}

/// A reader of the file's records; with a header row, every row must be as long.
fn csv_reader(
    path: &Path,
    headers: bool,
) -> Result<csv::Reader<std::io::Cursor<Vec<u8>>>, TableFileError> {
    let bytes = crate::files::read_bounded(path, MAX_TABLE_BYTES).map_err(TableFileError::Read)?;
    Ok(csv::ReaderBuilder::new()
        .has_headers(headers)
        .flexible(!headers)
        .trim(csv::Trim::All)
        .from_reader(std::io::Cursor::new(bytes)))
}

/// A persona table's rows, in order, each field as text.
pub(super) fn read_rows(path: &Path) -> Result<Vec<IndexMap<String, Value>>, TableFileError> {
    if !is_csv(path) {
        let file = read_objects(path).map_err(TableFileError::Objects)?;
        return Ok(file
            .objects
            .into_iter()
            .map(|o| o.into_iter().collect())
            .collect());
    }
    let mut reader = csv_reader(path, true)?;
    let headers: Vec<String> = reader
        .headers()
        .map_err(csv_error)?
        .iter()
        .map(str::to_string)
        .collect();
    reader
        .records()
        .map(|record| {
            let record = record.map_err(csv_error)?;
            Ok(headers
                .iter()
                .cloned()
                .zip(record.iter().map(|f| Value::String(f.to_string())))
                .collect())
        })
        .collect()
}

/// An edge list's pairs of names, in order.
pub(super) fn read_edges(path: &Path) -> Result<Vec<(String, String)>, TableFileError> {
    let mut reader = csv_reader(path, false)?;
    reader
        .records()
        .map(|record| {
            let record = record.map_err(csv_error)?;
            let line = record.position().map_or(0, csv::Position::line);
            match (record.len(), record.get(0), record.get(1)) {
                (2, Some(a), Some(b)) => Ok((a.to_string(), b.to_string())),
                (found, ..) => Err(TableFileError::NotAPair { line, found }),
            }
        })
        .collect()
}
