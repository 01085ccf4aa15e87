//! Reading results back from the device without blocking (WebGPU cannot block), and what a
//! failed read means: a lost GPU, which a run survives on the CPU, or any other fault.

use burn::prelude::*;
use burn::tensor::kind::Basic;
use burn::tensor::{Element, ExecutionError, Transaction};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ReadbackError {
    #[error("reading results back from the device failed: {0}")]
    Failed(String),
    #[error("the GPU was lost: {0}")]
    DeviceLost(String),
}

impl From<ExecutionError> for ReadbackError {
    fn from(error: ExecutionError) -> Self {
        match error {
            ExecutionError::DevicePoisoned { reason } => Self::DeviceLost(reason),
            other => Self::Failed(other.to_string()),
        }
    }
}

/// Each of `tensors`' values in row-major order, read back in one transfer (burn's
/// `Transaction`): no copy of them into one tensor on the device first.
pub async fn read_together<const D: usize>(
    tensors: Vec<Tensor<D>>,
) -> Result<Vec<Vec<f32>>, ReadbackError> {
    let mut transaction = Transaction::default();
    for tensor in tensors {
        transaction = transaction.register(tensor);
    }
    let read = transaction.execute_async().await?;
    read.into_iter()
        .map(|data| {
            data.convert::<f32>()
                .try_into_vec::<f32>()
                .map_err(|e| ReadbackError::Failed(format!("{e:?}")))
        })
        .collect()
}

/// A one-element tensor's value.
pub async fn read_scalar<E: Element, K: Basic>(tensor: Tensor<1, K>) -> Result<E, ReadbackError> {
    Ok(tensor.into_scalar_async::<E>().await?)
}

/// A tensor's values as `E`, in row-major order.
pub async fn read_values<E: Element, const D: usize, K: Basic>(
    tensor: Tensor<D, K>,
) -> Result<Vec<E>, ReadbackError> {
    let data = tensor.into_data_async().await?;
    // Converted first: an integer tensor's element type is the backend's.
    data.convert::<E>()
        .try_into_vec::<E>()
        .map_err(|e| ReadbackError::Failed(format!("{e:?}")))
}
