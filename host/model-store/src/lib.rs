//! What a `--model-path` names, and loading it.
//!
//! Every command that takes a model (`serve`, `run`, `generate`, `chat`, `eval`, `export`,
//! `train`, the judge and teacher models) goes through [`resolve`] and then
//! [`ModelFiles::load`] (or [`load::load_weights`] where only the weights are needed: the
//! trainer's start and reference, export), so they accept the same things:
//!
//! - a Hugging Face directory (`config.json`, safetensors, `tokenizer.json`);
//! - a checkpoint directory (`checkpoint-<step>/`, complete), LoRA adapters merged in;
//! - a save directory (its newest complete checkpoint);
//! - `<save-dir>/checkpoint-latest` (a symlink to the newest checkpoint; older runs wrote a
//!   text file naming it, which is read too);
//! - the word `latest`, resolved against the save directory the caller gives;
//! - a GGUF file (or a directory holding exactly one), its tokenizer and chat template read
//!   from the metadata.
//!
//! - [`checkpoints`]: the save directory's layout, shared with the trainer that writes it.
//! - [`resolve`](mod@resolve): a path or `latest` to a [`ModelSource`].
//! - [`text`]: the tokenizer and chat template of a source.
//! - [`load`]: weights (LoRA merged), tokenizer and template together.
//! - [`export`](mod@export): any of them as a Hugging Face directory.

#![warn(missing_docs)]

pub mod checkpoints;
pub mod export;
pub mod load;
pub mod resolve;
pub mod text;

pub use checkpoints::{
    is_complete, latest_checkpoint, list_checkpoints, point_latest, resolve_checkpoint,
    CHECKPOINT_LATEST, COMPLETE_MARKER, TRAINER_STATE,
};
pub use export::export;
pub use load::{LoadOptions, ModelFiles};
pub use resolve::{resolve, ModelSource};
pub use text::{tokenizer_and_template, tokenizer_files, TOKENIZER_FILES};
