//! The native integration tests, in one binary so that burn and wgpu are linked once. The
//! browser's are in tests/browser; tests/kernel_profile.rs has a process of its own.
#![cfg(not(target_arch = "wasm32"))]

#[path = "../common/augment_check.rs"]
mod augment_check;
#[path = "../common/mod.rs"]
mod common;
#[path = "../common/conv_cases.rs"]
mod conv_cases;
#[path = "../corpus/mod.rs"]
mod corpus;

mod architecture;
mod augment;
mod binary;
mod cli;
mod cli_devices;
mod cli_results;
mod cli_schedules;
mod compare;
mod cubecl_kernels;
mod data_parallel;
mod early_stop;
mod fine_tune;
mod flex_kernels;
mod inspect;
mod intervals;
mod layers;
mod learning;
mod lr_find;
#[cfg(feature = "mpi")]
mod mpi;
mod onnx;
mod pytorch_parity;
mod pytorch_script;
mod resume;
mod saliency;
mod settings;
mod training;
mod ui;
mod weights;
