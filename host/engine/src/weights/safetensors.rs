//! A safetensors reader that checks the header against the file size up front, so a truncated
//! or corrupt file fails with one line naming the file and tensor, and reads one tensor at a time
//! (a shard is never held in memory whole).

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

/// Element types the reader converts to f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileDtype {
    /// 32-bit float.
    F32,
    /// bfloat16.
    BF16,
    /// IEEE half.
    F16,
    /// 64-bit float.
    F64,
}

impl FileDtype {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "F32" => Some(FileDtype::F32),
            "BF16" => Some(FileDtype::BF16),
            "F16" => Some(FileDtype::F16),
            "F64" => Some(FileDtype::F64),
            _ => None,
        }
    }

    fn size(self) -> usize {
        match self {
            FileDtype::F32 => 4,
            FileDtype::BF16 | FileDtype::F16 => 2,
            FileDtype::F64 => 8,
        }
    }
}

#[derive(Deserialize)]
struct RawInfo {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: [u64; 2],
}

/// Header entry of one tensor.
#[derive(Clone, Debug)]
pub struct TensorInfo {
    /// Element type name as written in the file (`F32`, `BF16`, ...).
    pub dtype: String,
    /// Shape.
    pub shape: Vec<usize>,
    /// Byte range inside the data section.
    pub offsets: [u64; 2],
}

/// An open safetensors file whose header has been validated.
#[derive(Debug)]
pub struct SafetensorsFile {
    path: PathBuf,
    file: File,
    data_start: u64,
    tensors: HashMap<String, TensorInfo>,
}

impl SafetensorsFile {
    /// Opens `path` and validates its header against the file length.
    pub fn open(path: &Path) -> Result<Self> {
        let mut file = File::open(path)
            .map_err(|e| anyhow::anyhow!("missing weights file {}: {e}", path.display()))?;
        let len = file.metadata()?.len();
        let corrupt = |why: String| {
            anyhow::anyhow!(
                "{}: truncated or corrupt safetensors file ({why})",
                path.display()
            )
        };
        if len < 8 {
            return Err(corrupt(format!("{len} bytes, too short for a header")));
        }
        let mut n = [0u8; 8];
        file.read_exact(&mut n)?;
        let header_len = u64::from_le_bytes(n);
        if header_len > len - 8 {
            return Err(corrupt(format!(
                "header claims {header_len} bytes but the file has {len}"
            )));
        }
        let mut header = vec![0u8; header_len as usize];
        file.read_exact(&mut header)?;
        let raw: HashMap<String, serde_json::Value> = serde_json::from_slice(&header)
            .map_err(|e| corrupt(format!("header is not valid JSON: {e}")))?;
        let data_len = len - 8 - header_len;
        let mut tensors = HashMap::new();
        for (name, v) in raw {
            if name == "__metadata__" {
                continue;
            }
            let info: RawInfo = serde_json::from_value(v)
                .map_err(|e| corrupt(format!("bad header entry for tensor {name}: {e}")))?;
            let [start, end] = info.data_offsets;
            if start > end || end > data_len {
                return Err(corrupt(format!(
                    "tensor {name} needs bytes {start}..{end} but the data section has {data_len}"
                )));
            }
            if let Some(dt) = FileDtype::parse(&info.dtype) {
                let want = info.shape.iter().product::<usize>() as u64 * dt.size() as u64;
                if want != end - start {
                    return Err(corrupt(format!(
                        "tensor {name} has shape {:?} ({want} bytes) but {} bytes of data",
                        info.shape,
                        end - start
                    )));
                }
            }
            tensors.insert(
                name,
                TensorInfo {
                    dtype: info.dtype,
                    shape: info.shape,
                    offsets: [start, end],
                },
            );
        }
        Ok(SafetensorsFile {
            path: path.to_path_buf(),
            file,
            data_start: 8 + header_len,
            tensors,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Header entry of `name`, if present.
    pub fn info(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.get(name)
    }

    /// Names of all tensors in the file.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(|s| s.as_str())
    }

    /// Reads tensor `name` and converts it to f32.
    pub fn read_f32(&mut self, name: &str) -> Result<Vec<f32>> {
        let info = self
            .tensors
            .get(name)
            .with_context(|| format!("tensor {name} is not in {}", self.path.display()))?;
        let Some(dt) = FileDtype::parse(&info.dtype) else {
            bail!(
                "tensor {name} in {} has unsupported dtype {} (expected F32, BF16, F16 or F64)",
                self.path.display(),
                info.dtype
            );
        };
        let [start, end] = info.offsets;
        let mut bytes = vec![0u8; (end - start) as usize];
        self.file.seek(SeekFrom::Start(self.data_start + start))?;
        self.file.read_exact(&mut bytes).map_err(|e| {
            anyhow::anyhow!(
                "{}: truncated or corrupt safetensors file (reading tensor {name}: {e})",
                self.path.display()
            )
        })?;
        Ok(decode(&bytes, dt))
    }
}

fn decode(bytes: &[u8], dt: FileDtype) -> Vec<f32> {
    match dt {
        FileDtype::F32 => bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        FileDtype::BF16 => bytes
            .chunks_exact(2)
            .map(|c| half::bf16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32())
            .collect(),
        FileDtype::F16 => bytes
            .chunks_exact(2)
            .map(|c| half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32())
            .collect(),
        FileDtype::F64 => bytes
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")) as f32)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use safetensors::tensor::TensorView;
    use safetensors::Dtype;

    #[test]
    fn reads_every_float_dtype_as_f32() {
        let vals = [1.5f32, -2.25, 0.0, 3.0];
        let f32b: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        let bf16b: Vec<u8> = vals
            .iter()
            .flat_map(|v| half::bf16::from_f32(*v).to_bits().to_le_bytes())
            .collect();
        let f16b: Vec<u8> = vals
            .iter()
            .flat_map(|v| half::f16::from_f32(*v).to_bits().to_le_bytes())
            .collect();
        let f64b: Vec<u8> = vals
            .iter()
            .flat_map(|v| (*v as f64).to_le_bytes())
            .collect();
        let views = vec![
            ("a", TensorView::new(Dtype::F32, vec![2, 2], &f32b).unwrap()),
            ("b", TensorView::new(Dtype::BF16, vec![4], &bf16b).unwrap()),
            ("c", TensorView::new(Dtype::F16, vec![4, 1], &f16b).unwrap()),
            ("d", TensorView::new(Dtype::F64, vec![4], &f64b).unwrap()),
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.safetensors");
        safetensors::serialize_to_file(views, None, &path).unwrap();
        let mut f = SafetensorsFile::open(&path).unwrap();
        for name in ["a", "b", "c", "d"] {
            assert_eq!(f.read_f32(name).unwrap(), vals, "{name}");
        }
        assert_eq!(f.info("c").unwrap().shape, vec![4, 1]);
        let e = f.read_f32("zz").unwrap_err().to_string();
        assert!(e.contains("tensor zz is not in"), "{e}");
    }
}
