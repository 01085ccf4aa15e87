//! Why a run, an evaluation or a range test could not go on.

use thiserror::Error;

use super::checkpoint::CheckpointError;
use super::lr_find::LrRangeError;
use crate::config::ConfigError;
use crate::readback::ReadbackError;

#[derive(Debug, Error)]
pub enum TrainError {
    #[error("invalid settings: {0}")]
    Config(#[from] ConfigError),
    #[error("the {0} set is empty")]
    EmptyData(&'static str),
    #[error("reading results back from the device failed: {0}")]
    Readback(String),
    #[error(
        "the processes' weights drifted apart at epoch {epoch}: rank {rank}'s differ from rank \
         0's (other settings or other data)"
    )]
    Drifted { epoch: usize, rank: usize },
    #[error("the GPU was lost: {0}")]
    DeviceLost(String),
    #[error(transparent)]
    Checkpoint(CheckpointError),
    #[error(transparent)]
    Range(#[from] LrRangeError),
}

/// Whichever read notices that the GPU is gone, the run goes on on the CPU.
impl From<CheckpointError> for TrainError {
    fn from(error: CheckpointError) -> Self {
        match error {
            CheckpointError::DeviceLost(reason) => Self::DeviceLost(reason),
            other => Self::Checkpoint(other),
        }
    }
}

impl From<ReadbackError> for TrainError {
    fn from(error: ReadbackError) -> Self {
        match error {
            ReadbackError::DeviceLost(reason) => Self::DeviceLost(reason),
            ReadbackError::Failed(why) => Self::Readback(why),
        }
    }
}

impl From<burn::tensor::ExecutionError> for TrainError {
    fn from(error: burn::tensor::ExecutionError) -> Self {
        ReadbackError::from(error).into()
    }
}
