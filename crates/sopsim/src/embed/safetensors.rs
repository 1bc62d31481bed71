//! The f32 tensors of a safetensors file, read one at a time:
//! building an encoder then holds one tensor besides what it builds from it, where
//! mapping the file left every page it read resident until the end (91 MB for
//! MiniLM). The format: an 8-byte little-endian header length, a JSON header naming
//! each tensor's dtype, shape and byte range, then the data.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use serde::Deserialize;

/// The longest header read: MiniLM's is 9 KB.
const MAX_HEADER: u64 = 64 << 20;

pub struct F32Tensors {
    file: File,
    /// Where the data starts: after the length and the header.
    data: u64,
    tensors: HashMap<String, Entry>,
}

#[derive(Deserialize)]
struct Entry {
    dtype: String,
    data_offsets: [u64; 2],
}

impl F32Tensors {
    pub fn open(path: &Path) -> io::Result<Self> {
        let mut file = File::open(path)?;
        let mut len = [0u8; 8];
        file.read_exact(&mut len)?;
        let len = u64::from_le_bytes(len);
        if len > MAX_HEADER {
            return Err(invalid(format!("a header of {len} bytes")));
        }
        let mut header = vec![0u8; len as usize];
        file.read_exact(&mut header)?;
        // Besides the tensors, the header may hold `__metadata__`, which is no tensor.
        let entries: HashMap<String, serde_json::Value> =
            serde_json::from_slice(&header).map_err(|e| invalid(format!("its header: {e}")))?;
        let tensors = entries
            .into_iter()
            .filter(|(name, _)| name != "__metadata__")
            .map(|(name, v)| {
                let entry: Entry = serde_json::from_value(v)
                    .map_err(|e| invalid(format!("tensor {name:?}: {e}")))?;
                Ok((name, entry))
            })
            .collect::<io::Result<_>>()?;
        Ok(Self {
            file,
            data: 8 + len,
            tensors,
        })
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    /// Where tensor `name`'s values start in the file and how many there are, if it is
    /// an f32 tensor.
    pub fn place(&self, name: &str) -> Option<(u64, usize)> {
        let e = self.tensors.get(name).filter(|e| e.dtype == "F32")?;
        let [begin, end] = e.data_offsets;
        let bytes = end.checked_sub(begin)?;
        Some((self.data + begin, usize::try_from(bytes / 4).ok()?))
    }

    /// Tensor `name`'s values, if it is an f32 tensor (`None` for another type, left to
    /// a reader that converts).
    pub fn read(&self, name: &str) -> Option<io::Result<Vec<f32>>> {
        let (offset, values) = self.place(name)?;
        let mut bytes = Vec::new();
        if bytes.try_reserve_exact(values * 4).is_err() {
            return Some(Err(invalid(format!("tensor {name:?} is too large"))));
        }
        bytes.resize(values * 4, 0);
        let mut file = &self.file;
        let read = file
            .seek(SeekFrom::Start(offset))
            .and_then(|_| file.read_exact(&mut bytes));
        Some(read.map(|()| {
            bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        }))
    }
}

fn invalid(what: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("not a safetensors file: {what}"),
    )
}
