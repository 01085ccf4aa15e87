//! A run's checkpoint: the weights, the optimizer's state, where the run is (epoch, batch,
//! step), the epoch's data order and the seed that drew it (nothing else in a run draws random
//! numbers). Kept as a `.safetensors` file, so that any safetensors reader can look inside.
//! Resuming from one gives the losses of a run that never stopped, bit for bit on the CPU.
//! Here a checkpoint is captured from a run and restored into one; `format` writes and reads
//! the file.

pub mod format;

use std::collections::{BTreeMap, HashMap};

use burn::prelude::*;
use burn::tensor::TensorData;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::config::{ConfigError, OptimizerKind, TrainConfig};
use crate::model::{
    Layout, NamedWeightsError, Net, flat_parameters, model_from_weights, pytorch_layout,
};
use crate::readback::{ReadbackError, read_together};
use crate::train::early_stop::EarlyStopState;
use crate::train::optimizer::{Optimizer, buffer_from_flat, flat_buffer};

/// Longer than any run within the settings' bounds takes (10,000 epochs of MNIST at 36
/// samples/s, SwiftShader's pace, take 1.7·10⁷ s), and short of what `Duration` cannot hold.
const MAX_TRAINING_SECS: f64 = 1e9;
/// The names in the file (`format`), which errors name too.
const FORMAT_KEY: &str = "format";
const FORMAT: &str = "webtrain checkpoint 1";
const WEIGHTS: &str = "weights.";
const STATE: &str = "optimizer.";
const ORDER: &str = "data.order";
/// Early stopping's best epoch's weights.
const BEST: &str = "best.";

#[derive(Debug, Error)]
pub enum CheckpointError {
    #[error("the checkpoint holds {0} bytes, more than any LeNet run's checkpoint")]
    TooLarge(usize),
    #[error("not a safetensors file: {0}")]
    NotSafetensors(String),
    #[error("not a webtrain checkpoint (its metadata has no format \"{FORMAT}\")")]
    NotACheckpoint,
    #[error("the checkpoint's {0} is unreadable: {1}")]
    Metadata(&'static str, String),
    #[error("the checkpoint's settings are invalid: {0}")]
    Config(#[from] ConfigError),
    #[error("the checkpoint's tensor {0} is not {1}")]
    Dtype(String, &'static str),
    #[error("the checkpoint lacks {0}")]
    Missing(String),
    #[error("the checkpoint's {name} has shape {found:?}, its model needs {expected:?}")]
    Shape {
        name: String,
        found: Vec<usize>,
        expected: Vec<usize>,
    },
    #[error("the checkpoint holds {0}, which its model and optimizer have no use for")]
    Unexpected(String),
    #[error(
        "the checkpoint keeps {found} optimizer buffers for {name}; {optimizer} keeps {expected}"
    )]
    Buffers {
        name: String,
        found: usize,
        optimizer: OptimizerKind,
        expected: usize,
    },
    #[error(
        "the checkpoint stops at epoch {epoch}, batch {batch}, outside its run of {epochs} epochs of {batches} batches"
    )]
    Position {
        epoch: usize,
        batch: usize,
        epochs: usize,
        batches: usize,
    },
    #[error("the checkpoint's data order is not an order of the run's {0} training samples")]
    Order(usize),
    #[error(
        "the checkpoint's {what} is {found}; at epoch {epoch}, batch {batch} it must be {expected}"
    )]
    Count {
        what: &'static str,
        found: u64,
        expected: u64,
        epoch: usize,
        batch: usize,
    },
    #[error("the checkpoint's training time ({0} s) is not one a run can have taken")]
    TrainingTime(f64),
    #[error("reading the model back from the device failed: {0}")]
    Readback(String),
    #[error("the GPU was lost while the model was read back: {0}")]
    DeviceLost(String),
}

impl From<ReadbackError> for CheckpointError {
    fn from(error: ReadbackError) -> Self {
        match error {
            ReadbackError::DeviceLost(reason) => Self::DeviceLost(reason),
            ReadbackError::Failed(why) => Self::Readback(why),
        }
    }
}

/// The checkpoint's weights, by their names in its file.
impl From<NamedWeightsError> for CheckpointError {
    fn from(error: NamedWeightsError) -> Self {
        match error {
            NamedWeightsError::Missing(name) => Self::Missing(format!("{WEIGHTS}{name}")),
            NamedWeightsError::Shape {
                name,
                found,
                expected,
            } => Self::Shape {
                name: format!("{WEIGHTS}{name}"),
                found,
                expected,
            },
            NamedWeightsError::Unexpected(name) => Self::Unexpected(format!("{WEIGHTS}{name}")),
            NamedWeightsError::Readback(error) => error.into(),
        }
    }
}

/// Where a run is: the step it takes next.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Position {
    /// The epoch of the next step, from 1.
    pub epoch: usize,
    /// The next batch within it, from 0.
    pub batch: usize,
    /// Steps taken so far.
    pub step: usize,
    pub trained_samples: usize,
    /// Training time so far: the run's samples per second go on from it.
    pub training_secs: f64,
}

impl Position {
    pub const START: Self = Self {
        epoch: 1,
        batch: 0,
        step: 0,
        trained_samples: 0,
        training_secs: 0.0,
    };
}

#[derive(Clone, Debug, PartialEq)]
pub struct Checkpoint {
    pub config: TrainConfig,
    pub position: Position,
    /// The training samples in the order the position's epoch visits them.
    pub order: Vec<u32>,
    /// Parameters by path (`fc1.weight`), in burn's layouts.
    pub weights: BTreeMap<String, TensorData>,
    pub optimizer_steps: u64,
    /// The optimizer's buffers by parameter path, each flat.
    pub optimizer_state: BTreeMap<String, Vec<TensorData>>,
    /// Early stopping's best epoch, its weights included.
    pub early_stop: EarlyStopState,
}

/// Reads flat tensors back together, in one transaction and without blocking (which WebGPU
/// cannot do), each given back in its shape: one wait for the device, not one per tensor.
async fn read_all(
    tensors: Vec<(Tensor<1>, Vec<usize>)>,
) -> Result<Vec<TensorData>, CheckpointError> {
    // One backend for all: a trained model's weights are autodiff tensors, the optimizer's
    // buffers are not (`inner` leaves those as they are).
    let (tensors, shapes): (Vec<_>, Vec<_>) = tensors
        .into_iter()
        .map(|(tensor, dims)| (tensor.inner(), dims))
        .unzip();
    let read = read_together(tensors).await?;
    Ok(read
        .into_iter()
        .zip(shapes)
        .map(|(values, dims)| TensorData::new(values, dims))
        .collect())
}

impl Checkpoint {
    /// Reads the run's state back from the device.
    pub async fn capture(
        config: &TrainConfig,
        position: Position,
        order: &[usize],
        model: &Net,
        optimizer: &Optimizer,
        early_stop: &EarlyStopState,
    ) -> Result<Self, CheckpointError> {
        // The weights and every optimizer buffer, read back in one transaction.
        let weights = flat_parameters(model);
        let mut tensors: Vec<_> = weights
            .iter()
            .map(|(_, tensor, dims)| (tensor.clone(), dims.clone()))
            .collect();
        let dims_of: HashMap<&str, &[usize]> = weights
            .iter()
            .map(|(name, _, dims)| (name.as_str(), dims.as_slice()))
            .collect();
        for (name, buffers) in &optimizer.state {
            let param_dims = dims_of.get(name.as_str()).copied().unwrap_or_default();
            for buffer in buffers {
                let flat = pytorch_layout(name, flat_buffer(buffer), param_dims, Layout::Pytorch);
                let dims = flat.dims().to_vec();
                tensors.push((flat, dims));
            }
        }
        let mut read = read_all(tensors).await?.into_iter();
        let weights = weights
            .into_iter()
            .map(|(name, _, _)| (name, read.next().expect("one read per tensor")))
            .collect();
        let optimizer_state = optimizer
            .state
            .iter()
            .map(|(name, buffers)| {
                let read = buffers
                    .iter()
                    .map(|_| read.next().expect("one read per tensor"));
                (name.clone(), read.collect())
            })
            .collect();
        Ok(Self {
            config: config.clone(),
            position,
            order: order.iter().map(|&i| i as u32).collect(),
            weights,
            optimizer_steps: optimizer.steps,
            optimizer_state,
            early_stop: early_stop.clone(),
        })
    }

    /// The model and optimizer on `device`, as they were; every tensor checked against the
    /// model the settings name.
    pub fn restore(&self, device: &Device) -> Result<(Net, Optimizer), CheckpointError> {
        let model = model_from_weights(self.config.model, &self.weights, device)?;
        // Checked on the host: the run rebuilds the best epoch's model on its device only at
        // its end, if it keeps it.
        if let Some(best) = &self.early_stop.best {
            model_from_weights(self.config.model, &best.weights, &Device::flex())?;
        }
        let mut optimizer = Optimizer::new(&self.config);
        optimizer.steps = self.optimizer_steps;
        let per_param = Optimizer::buffers_per_param(&self.config);
        for (name, buffers) in &self.optimizer_state {
            let Some(weight) = self.weights.get(name) else {
                return Err(CheckpointError::Unexpected(format!("{STATE}{name}")));
            };
            if buffers.len() != per_param {
                return Err(CheckpointError::Buffers {
                    name: format!("{STATE}{name}"),
                    found: buffers.len(),
                    optimizer: self.config.optimizer,
                    expected: per_param,
                });
            }
            let mut tensors = Vec::new();
            for (index, buffer) in buffers.iter().enumerate() {
                if buffer.shape().as_slice() != [weight.num_elements()] {
                    return Err(CheckpointError::Shape {
                        name: format!("{STATE}{name}.{index}"),
                        found: buffer.shape().to_vec(),
                        expected: vec![weight.num_elements()],
                    });
                }
                let flat = Tensor::from_data(buffer.clone(), device);
                let flat = pytorch_layout(name, flat, weight.shape().as_slice(), Layout::Ours);
                let shaped =
                    buffer_from_flat(flat, weight.shape().as_slice()).ok_or_else(|| {
                        CheckpointError::Shape {
                            name: format!("{STATE}{name}.{index}"),
                            found: buffer.shape().to_vec(),
                            expected: weight.shape().to_vec(),
                        }
                    })?;
                tensors.push(shaped);
            }
            optimizer.state.insert(name.clone(), tensors);
        }
        Ok((model, optimizer))
    }

    /// Checks the position, the counts that follow from it and the data order against the
    /// run's `epoch_len` training samples: every number a resumed run computes with.
    pub fn check_position(&self, epoch_len: usize) -> Result<(), CheckpointError> {
        let batches = epoch_len.div_ceil(self.config.batch_size);
        let Position {
            epoch,
            batch,
            step,
            trained_samples,
            training_secs,
        } = self.position;
        if epoch == 0 || epoch > self.config.epochs + 1 || batch >= batches {
            return Err(CheckpointError::Position {
                epoch,
                batch,
                epochs: self.config.epochs,
                batches,
            });
        }
        // Bounded by the settings' bounds (10,000 epochs, 2^32 samples): no overflow in u64.
        let done = (epoch - 1) as u64;
        let expected_step = done * batches as u64 + batch as u64;
        let expected_samples = done * epoch_len as u64
            + (batch as u64 * self.config.batch_size as u64).min(epoch_len as u64);
        for (what, found, expected) in [
            ("step", step as u64, expected_step),
            (
                "count of trained samples",
                trained_samples as u64,
                expected_samples,
            ),
            // Both optimizers count every step, Adam's bias corrections with it.
            (
                "optimizer's step count",
                self.optimizer_steps,
                expected_step,
            ),
        ] {
            if found != expected {
                return Err(CheckpointError::Count {
                    what,
                    found,
                    expected,
                    epoch,
                    batch,
                });
            }
        }
        if !(0.0..=MAX_TRAINING_SECS).contains(&training_secs) {
            return Err(CheckpointError::TrainingTime(training_secs));
        }
        let mut seen = vec![false; epoch_len];
        for &index in &self.order {
            match seen.get_mut(index as usize) {
                Some(seen @ false) => *seen = true,
                _ => return Err(CheckpointError::Order(epoch_len)),
            }
        }
        match self.order.len() == epoch_len {
            true => Ok(()),
            false => Err(CheckpointError::Order(epoch_len)),
        }
    }
}
