//! What can go wrong on the page, said in one line where it shows.

use thiserror::Error;

use crate::config::ConfigError;
use crate::device::DeviceError;

#[derive(Debug, Error)]
pub enum PageError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error(transparent)]
    Range(#[from] crate::train::lr_find::LrRangeError),
    /// What the worker refused, in its words.
    #[error("{0}")]
    Worker(String),
    /// The engine can answer nothing more.
    #[error("{engine} stopped: {why}")]
    EngineGone { engine: &'static str, why: String },
    #[error("{file}: cannot be read: {message}")]
    Read { file: String, message: String },
    #[error("{file}: larger than the {} MiB such a file can be", limit >> 20)]
    TooLarge { file: String, limit: usize },
    #[error("choose all four files: {0} is missing")]
    MissingFile(&'static str),
    #[error("the browser refused the download: {0}")]
    Save(String),
    #[error("the browser's storage: {0}")]
    Storage(String),
    #[error("the native engine is there only when webtrain ui opens the page (with its token)")]
    NoNative,
    #[error("the page could not be drawn: {0}")]
    Dom(String),
}
