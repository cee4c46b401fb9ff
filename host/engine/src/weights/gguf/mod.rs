//! GGUF, llama.cpp's single-file model format: the header, typed metadata and tensor table
//! ([`reader`]), dequantisation of ggml tensor types to f32 ([`dequant`]), and building a Llama
//! [`crate::model::Model`] from a file ([`model`]).

pub mod model;
pub mod reader;

pub use crate::quant::ggml::{dequantize, GgmlType};
pub use model::{config_from_gguf, gguf_path, load_gguf_model, load_gguf_model_with, GgufSource};
pub use reader::{GgufFile, MetaType, MetaValue, TensorInfo, DEFAULT_ALIGNMENT};

#[cfg(test)]
mod tests;
