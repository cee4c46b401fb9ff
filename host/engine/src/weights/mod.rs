//! Weights in Hugging Face safetensors form: reading, writing, random initialisation; and
//! reading llama.cpp's GGUF files ([`gguf`]).

pub mod gguf;
pub mod init;
pub mod load;
pub mod safetensors;
pub mod save;
pub mod tensors;

pub use crate::model::io::{to_f32_vec, TensorExport, WeightSource};
pub use init::random_model;
pub use load::{load_model, load_model_with, open_weights, FileSource, GgufWeights, LoadConfig};
pub use save::{save_model, SaveDtype, SaveOptions};
