//! The GGUF container: header, typed metadata, tensor table, aligned tensor data.
//!
//! Layout (v2 and v3, little-endian): magic `GGUF`, u32 version, u64 tensor count, u64 metadata
//! count; the metadata entries (u64-length string key, u32 value type, value); the tensor infos
//! (name, u32 n_dims, u64 dims, u32 ggml type, u64 offset into the data section); zero padding
//! to `general.alignment` (default 32); the tensor data. Only the header and tables are read at
//! open; tensors are read one at a time with a seek, so a file is never held in memory whole.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};

use crate::quant::ggml::{dequantize, supported_list, GgmlType};

/// Tensor data alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// Most dimensions a tensor may have (ggml's GGML_MAX_DIMS).
const MAX_DIMS: u32 = 4;

/// Deepest nesting of metadata arrays accepted: real files nest at most once, and the limit keeps
/// a corrupt file from overflowing the stack.
const MAX_ARRAY_DEPTH: usize = 16;

/// The type tag of a metadata value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaType {
    /// u8.
    U8,
    /// i8.
    I8,
    /// u16.
    U16,
    /// i16.
    I16,
    /// u32.
    U32,
    /// i32.
    I32,
    /// f32.
    F32,
    /// bool (one byte, 0 or 1).
    Bool,
    /// UTF-8 string with a u64 length.
    String,
    /// Array of values of one type (arrays may nest).
    Array,
    /// u64.
    U64,
    /// i64.
    I64,
    /// f64.
    F64,
}

impl MetaType {
    /// The type with GGUF id `id`, if it is one.
    pub fn from_id(id: u32) -> Option<Self> {
        use MetaType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    /// Fewest bytes one value of this type takes in the file (a string or array is at least its
    /// length field); bounds array lengths before anything is allocated.
    fn min_size(self) -> u64 {
        use MetaType::*;
        match self {
            U8 | I8 | Bool => 1,
            U16 | I16 => 2,
            U32 | I32 | F32 => 4,
            U64 | I64 | F64 | String => 8,
            Array => 12,
        }
    }
}

impl fmt::Display for MetaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            MetaType::U8 => "u8",
            MetaType::I8 => "i8",
            MetaType::U16 => "u16",
            MetaType::I16 => "i16",
            MetaType::U32 => "u32",
            MetaType::I32 => "i32",
            MetaType::F32 => "f32",
            MetaType::Bool => "bool",
            MetaType::String => "string",
            MetaType::Array => "array",
            MetaType::U64 => "u64",
            MetaType::I64 => "i64",
            MetaType::F64 => "f64",
        };
        f.write_str(s)
    }
}

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaValue {
    /// u8.
    U8(u8),
    /// i8.
    I8(i8),
    /// u16.
    U16(u16),
    /// i16.
    I16(i16),
    /// u32.
    U32(u32),
    /// i32.
    I32(i32),
    /// f32.
    F32(f32),
    /// bool.
    Bool(bool),
    /// string.
    String(String),
    /// Array: the element type as written (kept so an empty array still has one) and the values.
    Array(MetaType, Vec<MetaValue>),
    /// u64.
    U64(u64),
    /// i64.
    I64(i64),
    /// f64.
    F64(f64),
}

impl MetaValue {
    /// This value's type tag.
    pub fn meta_type(&self) -> MetaType {
        match self {
            MetaValue::U8(_) => MetaType::U8,
            MetaValue::I8(_) => MetaType::I8,
            MetaValue::U16(_) => MetaType::U16,
            MetaValue::I16(_) => MetaType::I16,
            MetaValue::U32(_) => MetaType::U32,
            MetaValue::I32(_) => MetaType::I32,
            MetaValue::F32(_) => MetaType::F32,
            MetaValue::Bool(_) => MetaType::Bool,
            MetaValue::String(_) => MetaType::String,
            MetaValue::Array(..) => MetaType::Array,
            MetaValue::U64(_) => MetaType::U64,
            MetaValue::I64(_) => MetaType::I64,
            MetaValue::F64(_) => MetaType::F64,
        }
    }

    /// Any integer value as i128 (wide enough for every integer type), else `None`.
    fn as_int(&self) -> Option<i128> {
        Some(match *self {
            MetaValue::U8(v) => v.into(),
            MetaValue::I8(v) => v.into(),
            MetaValue::U16(v) => v.into(),
            MetaValue::I16(v) => v.into(),
            MetaValue::U32(v) => v.into(),
            MetaValue::I32(v) => v.into(),
            MetaValue::U64(v) => v.into(),
            MetaValue::I64(v) => v.into(),
            _ => return None,
        })
    }

    /// Any integer value that fits in a u64 (writers differ on u32 vs u64 for counts).
    pub fn as_u64(&self) -> Option<u64> {
        self.as_int().and_then(|v| u64::try_from(v).ok())
    }

    /// Any integer value that fits in an i64.
    pub fn as_i64(&self) -> Option<i64> {
        self.as_int().and_then(|v| i64::try_from(v).ok())
    }

    /// An f32 or f64 value as f64.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            MetaValue::F32(v) => Some(v.into()),
            MetaValue::F64(v) => Some(v),
            _ => None,
        }
    }

    /// A bool value.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            MetaValue::Bool(v) => Some(v),
            _ => None,
        }
    }

    /// A string value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// An array's values.
    pub fn as_array(&self) -> Option<&[MetaValue]> {
        match self {
            MetaValue::Array(_, v) => Some(v),
            _ => None,
        }
    }

    /// A short description for error messages: the type, and the element type of an array.
    fn describe(&self) -> String {
        match self {
            MetaValue::Array(t, v) => format!("an array of {} {t}", v.len()),
            other => format!("a {}", other.meta_type()),
        }
    }
}

/// One entry of the tensor table.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// Tensor name, e.g. `blk.0.attn_q.weight`.
    pub name: String,
    /// Dimensions in ggml order: `dims[0]` varies fastest (the reverse of a PyTorch shape).
    pub dims: Vec<u64>,
    /// Element type.
    pub ggml_type: GgmlType,
    /// Byte offset from the start of the tensor data section.
    pub offset: u64,
}

impl TensorInfo {
    /// Shape in row-major (PyTorch/HF) order: `dims` reversed.
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().rev().map(|&d| d as usize).collect()
    }

    /// Number of elements (1 for a tensor with no dims).
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// Bytes of data, when the type's block layout is known.
    pub fn n_bytes(&self) -> Option<u64> {
        self.ggml_type.bytes_for(self.n_elements())
    }
}

/// An open GGUF file whose header and tables have been parsed and checked against its size.
#[derive(Debug)]
pub struct GgufFile {
    path: PathBuf,
    file: File,
    version: u32,
    metadata: BTreeMap<String, MetaValue>,
    tensors: Vec<TensorInfo>,
    index: HashMap<String, usize>,
    alignment: u64,
    data_start: u64,
}

impl GgufFile {
    /// Opens `path` and parses the header, metadata and tensor table. Every tensor whose type
    /// has a known block layout is checked to lie inside the file, so a truncated download fails
    /// here rather than halfway through loading a model.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let file = File::open(path).map_err(|e| anyhow!("cannot open GGUF file {shown}: {e}"))?;
        let len = file
            .metadata()
            .map_err(|e| anyhow!("cannot stat GGUF file {shown}: {e}"))?
            .len();
        let mut r = Reader {
            inner: BufReader::new(file),
            pos: 0,
            len,
            path: shown.clone(),
            item: "the header".into(),
        };

        let magic: [u8; 4] = r.array("magic").map_err(|_| {
            anyhow!("{shown} is not a GGUF file: it is {len} bytes, too short for the 4-byte magic")
        })?;
        if &magic != b"GGUF" {
            bail!(
                "{shown} is not a GGUF file: it starts with bytes {magic:02x?} ({:?}), not \"GGUF\"",
                String::from_utf8_lossy(&magic)
            );
        }
        let version = r.u32("version")?;
        if version != 2 && version != 3 {
            if matches!(version.swap_bytes(), 2 | 3) {
                bail!(
                    "{shown} is a big-endian GGUF file (version {}), which this reader does \
                     not support: only little-endian files are read",
                    version.swap_bytes()
                );
            }
            bail!(
                "{shown} has GGUF version {version}, which is not supported (supported: 2 and \
                 3; version 1 files predate 64-bit lengths, re-convert with a current llama.cpp)"
            );
        }
        let n_tensors = r.u64("tensor count")?;
        let n_kv = r.u64("metadata count")?;
        let mut metadata = BTreeMap::new();
        for i in 0..n_kv {
            r.item = format!("metadata entry #{i}");
            let key = r.string("key")?;
            r.item = format!("metadata entry #{i} ({key:?})");
            let type_id = r.u32("value type")?;
            let ty = MetaType::from_id(type_id).ok_or_else(|| {
                anyhow!(
                    "{shown}: metadata key {key:?} has unknown value type {type_id} (known: 0..=12)"
                )
            })?;
            let value = r.value(ty, 0)?;
            if metadata.insert(key.clone(), value).is_some() {
                bail!("{shown}: metadata key {key:?} appears twice");
            }
        }

        let alignment = match metadata.get("general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some(v) => match v.as_u64() {
                Some(a) if a > 0 => a,
                _ => bail!(
                    "{shown}: general.alignment must be a positive integer, got {v:?} ({})",
                    v.describe()
                ),
            },
        };

        // A tensor info takes at least 24 bytes: bounding the capacity by what the rest of the
        // file could hold keeps a corrupt count from exhausting memory before the reads fail.
        let cap = n_tensors.min(r.remaining() / 24) as usize;
        let mut tensors = Vec::with_capacity(cap);
        let mut index = HashMap::with_capacity(cap);
        for i in 0..n_tensors {
            r.item = format!("tensor info #{i}");
            let name = r.string("name")?;
            r.item = format!("tensor info #{i} ({name:?})");
            let n_dims = r.u32("dimension count")?;
            if n_dims > MAX_DIMS {
                bail!("{shown}: tensor {name} has {n_dims} dimensions; GGUF allows at most {MAX_DIMS}");
            }
            let mut dims = Vec::with_capacity(n_dims as usize);
            for _ in 0..n_dims {
                dims.push(r.u64("dimensions")?);
            }
            let ggml_type = GgmlType::from_id(r.u32("tensor type")?);
            let offset = r.u64("data offset")?;
            if offset % alignment != 0 {
                bail!(
                    "{shown}: tensor {name} has data offset {offset}, not a multiple of the \
                     alignment {alignment}"
                );
            }
            let mut n: u64 = 1;
            for &d in &dims {
                n = n.checked_mul(d).ok_or_else(|| {
                    anyhow!("{shown}: tensor {name} has dims {dims:?}, too many elements")
                })?;
            }
            if let Some((block, _)) = ggml_type.block_layout() {
                let row = dims.first().copied().unwrap_or(1);
                if row % block as u64 != 0 {
                    bail!(
                        "{shown}: tensor {name} has dims {dims:?} but {ggml_type} stores rows in \
                         blocks of {block}: dims[0] must be a multiple of {block}"
                    );
                }
            }
            if index.insert(name.clone(), tensors.len()).is_some() {
                bail!("{shown}: tensor {name} appears twice in the tensor table");
            }
            tensors.push(TensorInfo {
                name,
                dims,
                ggml_type,
                offset,
            });
        }

        let data_start = r.pos.div_ceil(alignment).saturating_mul(alignment);
        for t in &tensors {
            let Some(bytes) = t.n_bytes() else { continue };
            let end = data_start
                .checked_add(t.offset)
                .and_then(|s| s.checked_add(bytes));
            if end.is_none_or(|end| end > len) {
                bail!(
                    "{shown}: tensor {} ({}, dims {:?}, {bytes} bytes at file offset {}) extends \
                     past the end of the file ({len} bytes): the file is truncated or corrupt",
                    t.name,
                    t.ggml_type,
                    t.dims,
                    data_start.saturating_add(t.offset)
                );
            }
        }

        Ok(GgufFile {
            path: path.to_path_buf(),
            file: r.inner.into_inner(),
            version,
            metadata,
            tensors,
            index,
            alignment,
            data_start,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// All metadata, by key.
    pub fn metadata(&self) -> &BTreeMap<String, MetaValue> {
        &self.metadata
    }

    /// The metadata value under `key`, if present.
    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.metadata.get(key)
    }

    /// The tensor table, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The table entry of tensor `name`, if present.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.index.get(name).map(|&i| &self.tensors[i])
    }

    /// Tensor data alignment (`general.alignment`, default 32).
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// File offset where the tensor data section starts (tensor offsets are relative to it).
    pub fn data_start(&self) -> u64 {
        self.data_start
    }

    /// Row-major (PyTorch/HF) shape of tensor `name`: the ggml dims reversed.
    pub fn shape(&self, name: &str) -> Result<Vec<usize>> {
        Ok(self.info(name)?.shape())
    }

    /// Tensor `name` as f32 values in row-major order of [`GgufFile::shape`] (which is ggml's
    /// element order, so no transposition is involved).
    pub fn read_f32(&mut self, name: &str) -> Result<Vec<f32>> {
        let info = self.info(name)?;
        let ty = info.ggml_type;
        if !ty.is_supported() {
            bail!(
                "{}: tensor {name} has type {ty}, which is not supported (supported: {})",
                self.path.display(),
                supported_list()
            );
        }
        let n = usize::try_from(info.n_elements())?;
        let bytes = self.read_raw(name)?;
        dequantize(ty, &bytes, n)
            .map_err(|e| anyhow!("{}: tensor {name}: {e}", self.path.display()))
    }

    /// The raw bytes of tensor `name` as stored (still quantised).
    pub fn read_raw(&mut self, name: &str) -> Result<Vec<u8>> {
        let info = self.info(name)?;
        let shown = self.path.display();
        let n_bytes = info.n_bytes().ok_or_else(|| {
            anyhow!(
                "{shown}: tensor {name} has type {}, whose size this reader does not know",
                info.ggml_type
            )
        })?;
        let start = self.data_start + info.offset;
        let mut bytes = vec![0u8; usize::try_from(n_bytes)?];
        self.file
            .seek(SeekFrom::Start(start))
            .and_then(|_| self.file.read_exact(&mut bytes))
            .map_err(|e| {
                anyhow!("{shown}: reading tensor {name} ({n_bytes} bytes at offset {start}): {e}")
            })?;
        Ok(bytes)
    }

    fn info(&self, name: &str) -> Result<&TensorInfo> {
        self.tensor(name).ok_or_else(|| {
            anyhow!(
                "{}: no tensor named {name} (the file has {} tensors)",
                self.path.display(),
                self.tensors.len()
            )
        })
    }

    fn require(&self, key: &str) -> Result<&MetaValue> {
        self.metadata
            .get(key)
            .ok_or_else(|| anyhow!("{}: metadata key {key} is missing", self.path.display()))
    }

    fn wrong_type(&self, key: &str, v: &MetaValue, want: &str) -> anyhow::Error {
        anyhow!(
            "{}: metadata key {key} is {}, expected {want}",
            self.path.display(),
            v.describe()
        )
    }

    /// Integer metadata `key` as u32 (any integer type whose value fits).
    pub fn get_u32(&self, key: &str) -> Result<u32> {
        let v = self.require(key)?;
        v.as_int()
            .and_then(|x| u32::try_from(x).ok())
            .ok_or_else(|| self.wrong_type(key, v, "an integer that fits in u32"))
    }

    /// Integer metadata `key` as u64 (any integer type whose value fits).
    pub fn get_u64(&self, key: &str) -> Result<u64> {
        let v = self.require(key)?;
        v.as_u64()
            .ok_or_else(|| self.wrong_type(key, v, "an integer that fits in u64"))
    }

    /// Integer metadata `key` as i64 (any integer type whose value fits).
    pub fn get_i64(&self, key: &str) -> Result<i64> {
        let v = self.require(key)?;
        v.as_i64()
            .ok_or_else(|| self.wrong_type(key, v, "an integer that fits in i64"))
    }

    /// Float metadata `key` as f32 (an f64 is rounded).
    pub fn get_f32(&self, key: &str) -> Result<f32> {
        self.get_f64(key).map(|v| v as f32)
    }

    /// Float metadata `key` as f64.
    pub fn get_f64(&self, key: &str) -> Result<f64> {
        let v = self.require(key)?;
        v.as_f64().ok_or_else(|| self.wrong_type(key, v, "a float"))
    }

    /// Bool metadata `key`.
    pub fn get_bool(&self, key: &str) -> Result<bool> {
        let v = self.require(key)?;
        v.as_bool().ok_or_else(|| self.wrong_type(key, v, "a bool"))
    }

    /// String metadata `key`.
    pub fn get_str(&self, key: &str) -> Result<&str> {
        let v = self.require(key)?;
        v.as_str()
            .ok_or_else(|| self.wrong_type(key, v, "a string"))
    }

    /// Array metadata `key` (values of any type).
    pub fn get_array(&self, key: &str) -> Result<&[MetaValue]> {
        let v = self.require(key)?;
        v.as_array()
            .ok_or_else(|| self.wrong_type(key, v, "an array"))
    }

    /// Array-of-strings metadata `key` (e.g. `tokenizer.ggml.tokens`).
    pub fn get_str_array(&self, key: &str) -> Result<Vec<&str>> {
        let v = self.require(key)?;
        v.as_array()
            .and_then(|a| a.iter().map(MetaValue::as_str).collect::<Option<Vec<_>>>())
            .ok_or_else(|| self.wrong_type(key, v, "an array of strings"))
    }

    /// Array-of-integers metadata `key` as i64 (e.g. `tokenizer.ggml.token_type`).
    pub fn get_i64_array(&self, key: &str) -> Result<Vec<i64>> {
        let v = self.require(key)?;
        v.as_array()
            .and_then(|a| a.iter().map(MetaValue::as_i64).collect::<Option<Vec<_>>>())
            .ok_or_else(|| self.wrong_type(key, v, "an array of integers"))
    }

    /// Array-of-floats metadata `key` as f32 (e.g. `tokenizer.ggml.scores`).
    pub fn get_f32_array(&self, key: &str) -> Result<Vec<f32>> {
        let v = self.require(key)?;
        v.as_array()
            .and_then(|a| {
                a.iter()
                    .map(|x| x.as_f64().map(|f| f as f32))
                    .collect::<Option<Vec<_>>>()
            })
            .ok_or_else(|| self.wrong_type(key, v, "an array of floats"))
    }
}

/// Sequential little-endian reads over the header that know the file length, so running out of
/// file is reported as truncation naming the item being read, before any large allocation.
struct Reader {
    inner: BufReader<File>,
    pos: u64,
    len: u64,
    path: String,
    /// What is being read, for errors: "the header", "metadata entry #3 (\"general.name\")".
    item: String,
}

impl Reader {
    /// Bytes left after the current position.
    fn remaining(&self) -> u64 {
        self.len.saturating_sub(self.pos)
    }

    /// Errors unless `n` more bytes remain.
    fn need(&self, n: u64, what: &str) -> Result<()> {
        if n > self.remaining() {
            bail!(
                "{}: truncated GGUF file: it ends inside {} ({what}: {n} bytes needed at offset \
                 {}, the file has {} bytes)",
                self.path,
                self.item,
                self.pos,
                self.len
            );
        }
        Ok(())
    }

    fn bytes(&mut self, n: u64, what: &str) -> Result<Vec<u8>> {
        self.need(n, what)?;
        let mut buf = vec![0u8; n as usize];
        self.read_into(&mut buf, what)?;
        Ok(buf)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        self.need(N as u64, what)?;
        let mut buf = [0u8; N];
        self.read_into(&mut buf, what)?;
        Ok(buf)
    }

    fn read_into(&mut self, buf: &mut [u8], what: &str) -> Result<()> {
        self.inner.read_exact(buf).map_err(|e| {
            anyhow!(
                "{}: reading {} ({what}) at offset {}: {e}",
                self.path,
                self.item,
                self.pos
            )
        })?;
        self.pos += buf.len() as u64;
        Ok(())
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        self.array(what).map(u64::from_le_bytes)
    }

    fn string(&mut self, what: &str) -> Result<String> {
        let n = self.u64(what)?;
        let bytes = self.bytes(n, what)?;
        String::from_utf8(bytes).map_err(|e| {
            anyhow!(
                "{}: {} ({what}) is not valid UTF-8: {e}",
                self.path,
                self.item
            )
        })
    }

    /// One value of type `ty`; `depth` counts enclosing arrays.
    fn value(&mut self, ty: MetaType, depth: usize) -> Result<MetaValue> {
        Ok(match ty {
            MetaType::U8 => MetaValue::U8(self.array::<1>("u8 value")?[0]),
            MetaType::I8 => MetaValue::I8(self.array::<1>("i8 value")?[0] as i8),
            MetaType::U16 => MetaValue::U16(u16::from_le_bytes(self.array("u16 value")?)),
            MetaType::I16 => MetaValue::I16(i16::from_le_bytes(self.array("i16 value")?)),
            MetaType::U32 => MetaValue::U32(u32::from_le_bytes(self.array("u32 value")?)),
            MetaType::I32 => MetaValue::I32(i32::from_le_bytes(self.array("i32 value")?)),
            MetaType::F32 => MetaValue::F32(f32::from_le_bytes(self.array("f32 value")?)),
            MetaType::U64 => MetaValue::U64(u64::from_le_bytes(self.array("u64 value")?)),
            MetaType::I64 => MetaValue::I64(i64::from_le_bytes(self.array("i64 value")?)),
            MetaType::F64 => MetaValue::F64(f64::from_le_bytes(self.array("f64 value")?)),
            MetaType::Bool => match self.array::<1>("bool value")?[0] {
                0 => MetaValue::Bool(false),
                1 => MetaValue::Bool(true),
                b => bail!(
                    "{}: {} has bool value byte {b}; only 0 and 1 are valid",
                    self.path,
                    self.item
                ),
            },
            MetaType::String => MetaValue::String(self.string("string value")?),
            MetaType::Array => {
                if depth >= MAX_ARRAY_DEPTH {
                    bail!(
                        "{}: {} nests arrays more than {MAX_ARRAY_DEPTH} deep",
                        self.path,
                        self.item
                    );
                }
                let type_id = self.u32("array element type")?;
                let elem = MetaType::from_id(type_id).ok_or_else(|| {
                    anyhow!(
                        "{}: {} is an array of unknown value type {type_id} (known: 0..=12)",
                        self.path,
                        self.item
                    )
                })?;
                let n = self.u64("array length")?;
                self.need(n.saturating_mul(elem.min_size()), "array elements")?;
                let mut values = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    values.push(self.value(elem, depth + 1)?);
                }
                MetaValue::Array(elem, values)
            }
        })
    }
}
