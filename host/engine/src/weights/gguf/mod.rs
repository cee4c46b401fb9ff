//! GGUF, llama.cpp's single-file model format: the header, typed metadata and tensor table
//! ([`reader`]), and dequantisation of ggml tensor types to f32 ([`dequant`]).
//!
//! Mapping GGUF tensor names and layouts onto this crate's models is not done here.

pub mod dequant;
pub mod reader;

pub use dequant::{dequantize, GgmlType};
pub use reader::{GgufFile, MetaType, MetaValue, TensorInfo, DEFAULT_ALIGNMENT};

#[cfg(test)]
mod tests;
