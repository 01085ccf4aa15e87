//! Inside the network: how each layer learns (`learning`), and where the digits lie in a
//! layer's space (`pca`).

pub mod learning;
pub mod pca;
