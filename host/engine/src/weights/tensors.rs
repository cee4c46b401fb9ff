//! Small f32 safetensors files (adapters, optimizer moments): write with metadata, read back
//! whole.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::{bail, Context, Result};
use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};

/// One named f32 tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct NamedTensor {
    /// The tensor's name in the file.
    pub name: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Row-major values.
    pub data: Vec<f32>,
}

/// Writes `tensors` as F32 safetensors with `metadata` (plus `format: pt`, which transformers
/// requires) to `path`.
pub fn write_f32(path: &Path, tensors: &[NamedTensor], metadata: &[(&str, String)]) -> Result<()> {
    let bytes: Vec<Vec<u8>> = tensors
        .iter()
        .map(|t| t.data.iter().flat_map(|v| v.to_le_bytes()).collect())
        .collect();
    let views = tensors
        .iter()
        .zip(&bytes)
        .map(|(t, b)| {
            Ok((
                t.name.clone(),
                TensorView::new(Dtype::F32, t.shape.clone(), b)?,
            ))
        })
        .collect::<Result<Vec<_>, safetensors::SafeTensorError>>()
        .map_err(|e| anyhow::anyhow!("cannot encode tensors for {}: {e}", path.display()))?;
    let mut meta: HashMap<String, String> = metadata
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    meta.insert("format".into(), "pt".into());
    safetensors::serialize_to_file(views, Some(meta), path)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
}

/// Every tensor of an F32 safetensors file by name, plus its metadata.
pub fn read_f32(path: &Path) -> Result<(BTreeMap<String, NamedTensor>, HashMap<String, String>)> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let bad = |e: safetensors::SafeTensorError| {
        anyhow::anyhow!("{} is not a valid safetensors file: {e}", path.display())
    };
    let (_, header) = SafeTensors::read_metadata(&bytes).map_err(bad)?;
    let st = SafeTensors::deserialize(&bytes).map_err(bad)?;
    let mut out = BTreeMap::new();
    for (name, view) in st.tensors() {
        if view.dtype() != Dtype::F32 {
            bail!(
                "{}: {name} is {:?}, expected F32",
                path.display(),
                view.dtype()
            );
        }
        let data = view
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        out.insert(
            name.clone(),
            NamedTensor {
                name,
                shape: view.shape().to_vec(),
                data,
            },
        );
    }
    Ok((out, header.metadata().clone().unwrap_or_default()))
}
