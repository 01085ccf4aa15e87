//! webtrain: train the classic MNIST CNNs on the GPU, in the browser through WebGPU and natively
//! through wgpu, with one async training loop that the CLI and the page both drive.
//!
//! Three tiers, each using only those below it, and no circle among the modules
//! (tests/native/architecture.rs holds the code to this list).

// Core: what a run is and does, whoever drives it.
pub mod chart; // every chart: one run, runs overlaid, the range test, the schedule
pub mod config; // every setting: its name, default, bound and parser
pub mod data; // MNIST, one's own digits, batches, augmentation
pub mod device; // the device a run trains on: a GPU through wgpu or WebGPU, or every core
#[cfg(feature = "mpi")]
pub mod distributed; // a run over several processes and machines, on MPI
pub mod inspect; // inside the network: how each layer learns, where the digits lie
pub mod json_float; // non-finite floats in JSON
#[cfg(feature = "measure")]
pub mod measure; // benchmarks and profiles through the loop itself
pub mod metrics; // what a run produced, gathered from its events
pub mod model; // the two LeNets, initialised as PyTorch initialises them
pub mod onnx; // a trained model as a standard ONNX graph
pub mod pace; // a run's pace while its tab was in the background
pub mod platform; // waiting, threads and memory: what the browser and a native process do differently
pub mod predict; // what a model says of single digits
pub mod pytorch; // a run as one self-contained PyTorch script
pub mod readback; // reading results back from the device, and what a failed read means
pub mod runs; // runs kept: their records, table and export
pub mod train; // the training loop, its schedules, checkpoints, range test and fine-tune judgement
pub mod weights; // weights as PyTorch names and lays them out (safetensors)

// Engines: what answers the page's requests, natively and in the browser.
#[cfg(not(target_arch = "wasm32"))]
pub mod native; // `webtrain ui`'s engine and a run's folder
pub mod session; // an engine's session, the protocol, and the one driver of a run
#[cfg(target_arch = "wasm32")]
pub mod worker; // the browser's engine, in a Web Worker

// Front ends: what asks.
#[cfg(not(target_arch = "wasm32"))]
pub mod cli; // the commands
#[cfg(target_arch = "wasm32")]
pub mod page; // the page
