//! The tensors of a safetensors file as f32 (from F32, F16 or BF16), read one at a
//! time:
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

/// An open safetensors file and its header's index of tensors, read as f32 on demand.
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
    /// Opens `path` and reads its header; the tensors' data is read later.
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

    /// The open file.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Where tensor `name`'s values start in the file and how many there are, if it is
    /// an f32 tensor (one that can be read in place, a row at a time).
    pub fn place(&self, name: &str) -> Option<(u64, usize)> {
        let e = self.tensors.get(name).filter(|e| e.dtype == "F32")?;
        let [begin, end] = e.data_offsets;
        let bytes = end.checked_sub(begin)?;
        Some((self.data + begin, usize::try_from(bytes / 4).ok()?))
    }

    /// Tensor `name`'s values as f32, converted from F16 or BF16; `None` when there is
    /// no such tensor, an error for another type.
    pub fn read(&self, name: &str) -> Option<io::Result<Vec<f32>>> {
        let e = self.tensors.get(name)?;
        let width: u64 = match e.dtype.as_str() {
            "F32" => 4,
            "F16" | "BF16" => 2,
            other => {
                return Some(Err(invalid(format!(
                    "tensor {name:?} is {other}, not F32, F16 or BF16"
                ))))
            }
        };
        let [begin, end] = e.data_offsets;
        let Some(len) = end.checked_sub(begin).filter(|n| n % width == 0) else {
            return Some(Err(invalid(format!("tensor {name:?}'s byte range"))));
        };
        let mut bytes = Vec::new();
        let Ok(len) = usize::try_from(len) else {
            return Some(Err(invalid(format!("tensor {name:?} is too large"))));
        };
        if bytes.try_reserve_exact(len).is_err() {
            return Some(Err(invalid(format!("tensor {name:?} is too large"))));
        }
        bytes.resize(len, 0);
        let mut file = &self.file;
        let read = file
            .seek(SeekFrom::Start(self.data + begin))
            .and_then(|_| file.read_exact(&mut bytes));
        Some(read.map(|()| {
            match e.dtype.as_str() {
                "F16" => bytes
                    .chunks_exact(2)
                    .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                    .collect(),
                "BF16" => bytes
                    .chunks_exact(2)
                    .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
                    .collect(),
                _ => bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
            }
        }))
    }
}

fn invalid(what: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("not a safetensors file: {what}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A safetensors file holding `tensors` (name, dtype, little-endian bytes).
    fn file_with(tensors: &[(&str, &str, Vec<u8>)]) -> tempfile::NamedTempFile {
        let mut header = serde_json::Map::new();
        header.insert("__metadata__".into(), serde_json::json!({"format": "pt"}));
        let mut data = Vec::new();
        for (name, dtype, bytes) in tensors {
            let begin = data.len();
            data.extend_from_slice(bytes);
            header.insert(
                name.to_string(),
                serde_json::json!({"dtype": dtype, "shape": [bytes.len() / 4], "data_offsets": [begin, data.len()]}),
            );
        }
        let header = serde_json::to_vec(&header).unwrap();
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(&header);
        out.extend_from_slice(&data);
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), out).unwrap();
        file
    }

    fn f32_bytes(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn f32_f16_and_bf16_tensors_are_read_as_f32_and_only_f32_placed() {
        let halves: Vec<u8> = [1.5f32, -0.25]
            .iter()
            .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
            .collect();
        let brains: Vec<u8> = [2.0f32, -3.0]
            .iter()
            .flat_map(|v| half::bf16::from_f32(*v).to_le_bytes())
            .collect();
        let file = file_with(&[
            ("a", "F32", f32_bytes(&[1.0, -2.5])),
            ("half", "F16", halves),
            ("brain", "BF16", brains),
            ("ints", "I64", vec![0; 8]),
            ("b", "F32", f32_bytes(&[0.25, 3.0, 7.0])),
        ]);
        let t = F32Tensors::open(file.path()).unwrap();
        assert_eq!(t.read("a").unwrap().unwrap(), vec![1.0, -2.5]);
        assert_eq!(t.read("b").unwrap().unwrap(), vec![0.25, 3.0, 7.0]);
        assert_eq!(t.read("half").unwrap().unwrap(), vec![1.5, -0.25]);
        assert_eq!(t.read("brain").unwrap().unwrap(), vec![2.0, -3.0]);
        assert!(t.read("ints").unwrap().is_err(), "no integer weights");
        let data_start = std::fs::read(file.path()).unwrap().len() as u64 - 24;
        assert_eq!(t.place("b"), Some((data_start + 12, 3)));
        assert_eq!(t.place("half"), None, "only f32 is read in place");
        assert!(t.read("missing").is_none());
    }

    #[test]
    fn a_broken_file_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.safetensors");
        for bytes in [
            Vec::new(),
            u64::MAX.to_le_bytes().to_vec(),
            [&10u64.to_le_bytes()[..], b"{not json}"].concat(),
        ] {
            std::fs::write(&path, &bytes).unwrap();
            assert!(F32Tensors::open(&path).is_err(), "{bytes:?}");
        }
        // A tensor said to run past the end of the file.
        let file = file_with(&[("a", "F32", f32_bytes(&[1.0]))]);
        let mut bytes = std::fs::read(file.path()).unwrap();
        bytes.truncate(bytes.len() - 2);
        std::fs::write(&path, &bytes).unwrap();
        let t = F32Tensors::open(&path).unwrap();
        assert!(t.read("a").unwrap().is_err());
    }
}
