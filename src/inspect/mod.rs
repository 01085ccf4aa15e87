//! Inside the network: how each layer learns (`learning`, its figures gathered on the device
//! by `probe` and watched by `watch`), what one digit does in each layer (`inside`, with its
//! `saliency`), and where the digits lie in fc1's space (`projector`, by `pca`).

pub mod inside;
pub mod learning;
pub mod pca;
pub mod probe;
pub mod projector;
pub mod saliency;
pub mod watch;

use thiserror::Error;

use crate::readback::ReadbackError;

#[derive(Debug, Error)]
pub enum InspectError {
    #[error(transparent)]
    Readback(#[from] ReadbackError),
    #[error("the digits cannot be projected: {0}")]
    Projection(#[from] pca::ProjectionError),
}
