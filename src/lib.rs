//! webtrain: train the classic MNIST CNNs on the GPU, in the browser through WebGPU and natively
//! through wgpu, with one async training loop that the CLI and the page both drive.

#[cfg(not(target_arch = "wasm32"))]
pub mod cli;
pub mod config;
pub mod data;
pub mod device;
pub mod json_float;
#[cfg(feature = "measure")]
pub mod measure;
pub mod metrics;
pub mod model;
#[cfg(target_arch = "wasm32")]
pub mod page;
pub mod platform;
pub mod predict;
pub mod runs;
pub mod session;
pub mod train;
pub mod weights;
#[cfg(target_arch = "wasm32")]
pub mod worker;
