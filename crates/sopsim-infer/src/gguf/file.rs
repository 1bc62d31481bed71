//! The GGUF container: header, metadata and the tensor index, read from a memory map
//! with every length checked against the bytes that are actually there.
//!
//! A GGUF file is downloaded and shared like any document, so nothing in it is
//! trusted: a count or a length is accepted only if the rest of the file could hold
//! it, nesting is bounded, and a tensor's bytes must lie inside the file. Nothing here
//! allocates more than a small multiple of the file's own size.

use std::collections::HashMap;
use std::path::Path;

use memmap2::Mmap;

use super::GgufError;

/// A metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// An unsigned 8-bit integer.
    U8(u8),
    /// A signed 8-bit integer.
    I8(i8),
    /// An unsigned 16-bit integer.
    U16(u16),
    /// A signed 16-bit integer.
    I16(i16),
    /// An unsigned 32-bit integer.
    U32(u32),
    /// A signed 32-bit integer.
    I32(i32),
    /// An unsigned 64-bit integer.
    U64(u64),
    /// A signed 64-bit integer.
    I64(i64),
    /// A 32-bit float.
    F32(f32),
    /// A 64-bit float.
    F64(f64),
    /// A boolean.
    Bool(bool),
    /// A UTF-8 string.
    String(String),
    /// An array of values.
    Array(Vec<Value>),
}

impl Value {
    /// The value as an unsigned integer, if it is a non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a signed integer, if it is an integer that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::I8(v) => Some(v.into()),
            Value::I16(v) => Some(v.into()),
            Value::I32(v) => Some(v.into()),
            Value::I64(v) => Some(v),
            _ => self.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }

    /// The value as a float, if it is a number (integers converted).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => self.as_i64().map(|v| v as f64),
        }
    }

    /// The value as text, if it is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value as a boolean, if it is one.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The value's elements, if it is an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// Where one tensor's bytes are, and what they hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// Dimensions as GGUF lists them: the first is the row length.
    pub dims: Vec<u64>,
    /// The ggml type number.
    pub ggml_type: u32,
    /// Offset from the start of the file.
    pub start: usize,
}

/// A parsed GGUF file. The tensor data stays in the memory map.
#[derive(Debug)]
pub struct GgufFile {
    /// Every metadata value, by key.
    pub metadata: HashMap<String, Value>,
    /// Every tensor's place and type, by name.
    pub tensors: HashMap<String, TensorInfo>,
    /// Tensor names in file order.
    pub order: Vec<String>,
    map: Bytes,
}

/// Where a file's bytes live: mapped from disk, or in memory (built or received).
#[derive(Debug)]
enum Bytes {
    Mapped(Mmap),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

const MAGIC: &[u8; 4] = b"GGUF";
/// Arrays inside arrays are allowed this deep (the format uses one level at most).
const MAX_NESTING: usize = 2;
const MAX_DIMS: u32 = 4;

impl GgufFile {
    /// Maps and parses `path`. Only regular files are read.
    pub fn open(path: &Path) -> Result<Self, GgufError> {
        let io = |source| GgufError::Io {
            path: path.to_path_buf(),
            source,
        };
        // Checked before opening, and opened without waiting: opening a FIFO would
        // wait for a writer.
        if !std::fs::metadata(path).map_err(io)?.is_file() {
            return Err(GgufError::NotARegularFile(path.to_path_buf()));
        }
        let file = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(path)
                .map_err(io)?
        };
        let meta = file.metadata().map_err(io)?;
        if !meta.is_file() {
            return Err(GgufError::NotARegularFile(path.to_path_buf()));
        }
        // SAFETY: the map is read-only; a model file changed while it is loaded would
        // give wrong numbers, never undefined behaviour in safe code that only reads
        // bytes through bounds-checked slices.
        let map = unsafe { Mmap::map(&file) }.map_err(io)?;
        Self::parse(Bytes::Mapped(map))
    }

    /// Tells the system that bytes `start..start + len` will not be read again (they
    /// were copied elsewhere), so a mapped file's pages leave this process's memory.
    /// Reading them later still works: they are read from the file again.
    pub fn release(&self, start: usize, len: usize) {
        #[cfg(unix)]
        if let Bytes::Mapped(map) = &self.map {
            let page = 4096;
            let first = start.div_ceil(page) * page;
            let end = (start + len) / page * page;
            if end > first && end <= map.len() {
                // SAFETY: the map is read-only; dropping its pages only
                // makes a later read fetch them from the file again.
                let _ = unsafe {
                    map.unchecked_advise_range(
                        memmap2::UncheckedAdvice::DontNeed,
                        first,
                        end - first,
                    )
                };
            }
        }
        #[cfg(not(unix))]
        let _ = (start, len);
    }

    /// Parses a whole GGUF file held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self, GgufError> {
        Self::parse(Bytes::Owned(bytes))
    }

    fn parse(map: Bytes) -> Result<Self, GgufError> {
        let (metadata, tensors, order) = {
            let mut r = Reader { buf: &map, pos: 0 };
            if r.bytes(4)? != MAGIC {
                return Err(GgufError::Format("not a GGUF file (no GGUF magic)".into()));
            }
            let version = r.u32()?;
            if !(2..=3).contains(&version) {
                return Err(GgufError::Format(format!(
                    "GGUF version {version} is not supported (2 or 3)"
                )));
            }
            let tensor_count = r.count(8 + 4 + 4 + 8)?;
            let kv_count = r.count(8 + 4)?;
            let mut metadata = HashMap::with_capacity(kv_count.min(1024));
            for _ in 0..kv_count {
                let key = r.string()?;
                let ty = r.u32()?;
                let value = r.value(ty, 0).map_err(|e| e.at_key(&key))?;
                metadata.insert(key, value);
            }
            let mut infos = Vec::with_capacity(tensor_count.min(65_536));
            for _ in 0..tensor_count {
                let name = r.string()?;
                let n_dims = r.u32()?;
                if n_dims == 0 || n_dims > MAX_DIMS {
                    return Err(GgufError::Tensor {
                        name,
                        message: format!("{n_dims} dimensions (1 to {MAX_DIMS} allowed)"),
                    });
                }
                let dims = (0..n_dims)
                    .map(|_| r.u64())
                    .collect::<Result<Vec<_>, _>>()?;
                let ggml_type = r.u32()?;
                let offset = r.u64()?;
                infos.push((name, dims, ggml_type, offset));
            }
            let alignment = match metadata.get("general.alignment") {
                None => 32,
                Some(v) => match v.as_u64() {
                    Some(a) if a.is_power_of_two() && a <= 1 << 16 => a as usize,
                    _ => {
                        return Err(GgufError::Meta {
                            key: "general.alignment".into(),
                            message: format!("{v:?} is not a power of two up to 65536"),
                        })
                    }
                },
            };
            let data_start = r.pos.div_ceil(alignment) * alignment;
            let mut tensors = HashMap::with_capacity(infos.len());
            let mut order = Vec::with_capacity(infos.len());
            for (name, dims, ggml_type, offset) in infos {
                let start = usize::try_from(offset)
                    .ok()
                    .and_then(|o| o.checked_add(data_start))
                    .filter(|s| *s <= map.len())
                    .ok_or_else(|| GgufError::Tensor {
                        name: name.clone(),
                        message: format!("data offset {offset} is past the end of the file"),
                    })?;
                if tensors.contains_key(&name) {
                    return Err(GgufError::Tensor {
                        name,
                        message: "appears twice".into(),
                    });
                }
                order.push(name.clone());
                tensors.insert(
                    name,
                    TensorInfo {
                        dims,
                        ggml_type,
                        start,
                    },
                );
            }
            (metadata, tensors, order)
        };
        Ok(Self {
            metadata,
            tensors,
            order,
            map,
        })
    }

    /// The whole file's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// `len` bytes from `start`, if the file holds them.
    pub fn slice(&self, start: usize, len: usize) -> Option<&[u8]> {
        self.map.get(start..start.checked_add(len)?)
    }

    /// The metadata value at `key`, if there is one.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.get(key)
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn bytes(&mut self, n: usize) -> Result<&'a [u8], GgufError> {
        if n > self.remaining() {
            return Err(GgufError::Format(format!(
                "the file ends early: {n} bytes wanted at offset {}, {} left",
                self.pos,
                self.remaining()
            )));
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], GgufError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N)?);
        Ok(out)
    }

    fn u32(&mut self) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A count of items each at least `min_item` bytes long, refused if the rest of
    /// the file could not hold that many.
    fn count(&mut self, min_item: usize) -> Result<usize, GgufError> {
        let n = self.u64()?;
        match usize::try_from(n) {
            Ok(n) if n.saturating_mul(min_item.max(1)) <= self.remaining() => Ok(n),
            _ => Err(GgufError::Format(format!(
                "a count of {n} at offset {} is more than the file can hold",
                self.pos - 8
            ))),
        }
    }

    fn string(&mut self) -> Result<String, GgufError> {
        let len = self.count(1)?;
        let at = self.pos;
        let raw = self.bytes(len)?;
        String::from_utf8(raw.to_vec())
            .map_err(|_| GgufError::Format(format!("the string at offset {at} is not UTF-8")))
    }

    fn value(&mut self, ty: u32, depth: usize) -> Result<Value, GgufError> {
        Ok(match ty {
            0 => Value::U8(self.array::<1>()?[0]),
            1 => Value::I8(self.array::<1>()?[0] as i8),
            2 => Value::U16(u16::from_le_bytes(self.array()?)),
            3 => Value::I16(i16::from_le_bytes(self.array()?)),
            4 => Value::U32(self.u32()?),
            5 => Value::I32(i32::from_le_bytes(self.array()?)),
            6 => Value::F32(f32::from_le_bytes(self.array()?)),
            7 => match self.array::<1>()?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(GgufError::Format(format!("{b} is not a boolean"))),
            },
            8 => Value::String(self.string()?),
            9 => {
                if depth >= MAX_NESTING {
                    return Err(GgufError::Format("arrays nested too deeply".into()));
                }
                let item_ty = self.u32()?;
                let min = match item_ty {
                    0 | 1 | 7 => 1,
                    2 | 3 => 2,
                    4..=6 => 4,
                    8 | 10 | 11 | 12 => 8,
                    9 => 12,
                    other => return Err(GgufError::Format(format!("unknown value type {other}"))),
                };
                let n = self.count(min)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value(item_ty, depth + 1)?);
                }
                Value::Array(items)
            }
            10 => Value::U64(self.u64()?),
            11 => Value::I64(i64::from_le_bytes(self.array()?)),
            12 => Value::F64(f64::from_le_bytes(self.array()?)),
            other => return Err(GgufError::Format(format!("unknown value type {other}"))),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Writes a GGUF file from metadata and tensors (name, dims, type, bytes).
    pub(crate) fn write_gguf(
        metadata: &[(&str, Value)],
        tensors: &[(&str, Vec<u64>, u32, Vec<u8>)],
    ) -> Vec<u8> {
        fn string(out: &mut Vec<u8>, s: &str) {
            out.extend((s.len() as u64).to_le_bytes());
            out.extend(s.as_bytes());
        }
        fn value(out: &mut Vec<u8>, v: &Value) {
            match v {
                Value::U8(x) => out.push(*x),
                Value::I8(x) => out.push(*x as u8),
                Value::U16(x) => out.extend(x.to_le_bytes()),
                Value::I16(x) => out.extend(x.to_le_bytes()),
                Value::U32(x) => out.extend(x.to_le_bytes()),
                Value::I32(x) => out.extend(x.to_le_bytes()),
                Value::U64(x) => out.extend(x.to_le_bytes()),
                Value::I64(x) => out.extend(x.to_le_bytes()),
                Value::F32(x) => out.extend(x.to_le_bytes()),
                Value::F64(x) => out.extend(x.to_le_bytes()),
                Value::Bool(x) => out.push(u8::from(*x)),
                Value::String(s) => string(out, s),
                Value::Array(items) => {
                    let ty = items.first().map_or(4, type_of);
                    out.extend(ty.to_le_bytes());
                    out.extend((items.len() as u64).to_le_bytes());
                    for i in items {
                        value(out, i);
                    }
                }
            }
        }
        fn type_of(v: &Value) -> u32 {
            match v {
                Value::U8(_) => 0,
                Value::I8(_) => 1,
                Value::U16(_) => 2,
                Value::I16(_) => 3,
                Value::U32(_) => 4,
                Value::I32(_) => 5,
                Value::F32(_) => 6,
                Value::Bool(_) => 7,
                Value::String(_) => 8,
                Value::Array(_) => 9,
                Value::U64(_) => 10,
                Value::I64(_) => 11,
                Value::F64(_) => 12,
            }
        }
        let mut out = Vec::new();
        out.extend(MAGIC);
        out.extend(3u32.to_le_bytes());
        out.extend((tensors.len() as u64).to_le_bytes());
        out.extend((metadata.len() as u64).to_le_bytes());
        for (k, v) in metadata {
            string(&mut out, k);
            out.extend(type_of(v).to_le_bytes());
            value(&mut out, v);
        }
        let mut offset = 0u64;
        for (name, dims, ty, data) in tensors {
            string(&mut out, name);
            out.extend((dims.len() as u32).to_le_bytes());
            for d in dims {
                out.extend(d.to_le_bytes());
            }
            out.extend(ty.to_le_bytes());
            out.extend(offset.to_le_bytes());
            offset += (data.len() as u64).div_ceil(32) * 32;
        }
        while out.len() % 32 != 0 {
            out.push(0);
        }
        for (_, _, _, data) in tensors {
            out.extend(data);
            while out.len() % 32 != 0 {
                out.push(0);
            }
        }
        out
    }

    fn parse(bytes: Vec<u8>) -> Result<GgufFile, GgufError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        std::fs::write(&path, bytes).unwrap();
        GgufFile::open(&path)
    }

    #[test]
    fn reads_metadata_and_tensors() {
        let bytes = write_gguf(
            &[
                ("general.architecture", Value::String("llama".into())),
                (
                    "list",
                    Value::Array(vec![Value::String("a".into()), Value::String("b".into())]),
                ),
            ],
            &[("t", vec![4, 2], 0, vec![1u8; 32])],
        );
        let f = parse(bytes).unwrap();
        assert_eq!(
            f.get("general.architecture").unwrap().as_str(),
            Some("llama")
        );
        assert_eq!(f.get("list").unwrap().as_array().unwrap().len(), 2);
        let t = &f.tensors["t"];
        assert_eq!(t.dims, vec![4, 2]);
        assert_eq!(f.slice(t.start, 32).unwrap(), &[1u8; 32][..]);
    }

    #[test]
    fn refuses_counts_the_file_cannot_hold() {
        let mut bytes = write_gguf(&[("k", Value::U32(1))], &[]);
        // kv_count → 2^60
        bytes[16..24].copy_from_slice(&(1u64 << 60).to_le_bytes());
        assert!(parse(bytes)
            .unwrap_err()
            .to_string()
            .contains("more than the file"));
        let mut bytes = write_gguf(&[("k", Value::String("x".into()))], &[]);
        // the string's length → 2^62
        let at = 24 + 8 + 1 + 4;
        bytes[at..at + 8].copy_from_slice(&(1u64 << 62).to_le_bytes());
        assert!(parse(bytes).is_err());
    }

    #[test]
    fn refuses_truncated_files_and_other_magic() {
        let bytes = write_gguf(&[("k", Value::U32(0x0101_0101))], &[]);
        // Up to the end of the header (the padding after it may be cut).
        let header = bytes.iter().rposition(|b| *b != 0).unwrap() + 1;
        for cut in 0..header {
            assert!(parse(bytes[..cut].to_vec()).is_err(), "cut at {cut}");
        }
        assert!(parse(b"GGML....".to_vec()).is_err());
    }

    #[test]
    fn refuses_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            GgufFile::open(dir.path()),
            Err(GgufError::NotARegularFile(_))
        ));
    }
}
