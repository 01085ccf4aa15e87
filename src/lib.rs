//! webtrain: train the classic MNIST CNNs on the GPU, in the browser through WebGPU and natively
//! through wgpu, with one async training loop that the CLI and the page both drive.

pub mod bench;
pub mod chart;
pub mod checkpoint;
#[cfg(not(target_arch = "wasm32"))]
pub mod cli;
pub mod config;
pub mod data;
pub mod device;
pub mod interval;
pub mod json_float;
pub mod kernel_profile;
pub mod metrics;
pub mod model;
pub mod op_profile;
pub mod optimizer;
#[cfg(target_arch = "wasm32")]
pub mod page;
pub mod platform;
pub mod predict;
pub mod resident;
pub mod session;
pub mod step;
pub mod train;
pub mod warm_up;
pub mod weights;
#[cfg(target_arch = "wasm32")]
pub mod worker;
