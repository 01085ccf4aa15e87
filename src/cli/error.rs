//! What can go wrong in a command, said once at the edge, and the exit code it ends with.

use std::path::PathBuf;

use thiserror::Error;

use crate::data::DataError;
use crate::device::DeviceError;
#[cfg(feature = "measure")]
use crate::measure::bench::BenchError;
use crate::native::run_folder::FilesError;
use crate::session::SessionError;
use crate::train::checkpoint::CheckpointError;
use crate::train::{Divergence, TrainError};
use crate::weights::WeightsError;

#[derive(Debug, Error)]
pub enum CliError {
    #[error("ui: {0}")]
    Serve(String),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Data(#[from] DataError),
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error(transparent)]
    Train(#[from] TrainError),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    Files(#[from] FilesError),
    #[cfg(feature = "measure")]
    #[error(transparent)]
    Bench(#[from] BenchError),
    #[error("{}: {source}", .path.display())]
    Weights { path: PathBuf, source: WeightsError },
    #[error("{}: {source}", .path.display())]
    Checkpoint {
        path: PathBuf,
        source: CheckpointError,
    },
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Chart(#[from] crate::chart::style::ChartError),
    #[error(transparent)]
    Inspect(#[from] crate::inspect::InspectError),
    #[error("there is no test digit {digit}: the test set has {len}, from 0")]
    NoSuchDigit { digit: usize, len: usize },
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the argument '--resume' cannot be used with '--{}': a resumed run keeps its \
         checkpoint's settings, and only --epochs may extend it",
        .0.replace('_', "-")
    )]
    ResumeWith(&'static str),
    #[error(
        "{} is a checkpoint, not weights: export its run's model.safetensors, or the run's folder",
        .0.display()
    )]
    CheckpointAsWeights(PathBuf),
    #[error("{}: {source}", .path.display())]
    Export {
        path: PathBuf,
        source: crate::onnx::OnnxError,
    },
    #[error(
        "this webtrain was built without MPI: build it with `cargo build --release --features \
         mpi`, after `scripts/setup.sh mpi` (Open MPI and libclang)"
    )]
    #[cfg(not(feature = "mpi"))]
    NoMpi,
    #[cfg(feature = "mpi")]
    #[error(transparent)]
    Distributed(#[from] crate::distributed::DistributedError),
    /// Another process of a distributed run said what went wrong.
    #[cfg(feature = "mpi")]
    #[error("")]
    SaidByAnotherRank,
    #[error("cannot catch Ctrl-C: {0}")]
    Signal(String),
    #[error(
        "interrupted at epoch {epoch}, step {step}; go on with: webtrain train --resume {}",
        .checkpoint.display()
    )]
    Interrupted {
        epoch: usize,
        step: usize,
        checkpoint: PathBuf,
    },
    /// What a run's recorder could not write, as it said it.
    #[error("{0}")]
    FilesNotWritten(String),
    #[error(
        "training {divergence}; the last weights with a finite loss are in {}: try a lower --lr",
        .out.display()
    )]
    Diverged {
        divergence: Divergence,
        out: PathBuf,
    },
}

/// The shell's code for a process ended by Ctrl-C (128 + SIGINT).
pub const INTERRUPTED_EXIT: i32 = 130;
/// A run that diverged: its files are written, but a script should not go on as if it trained.
pub const DIVERGED_EXIT: u8 = 1;
