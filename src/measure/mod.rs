//! Measurement: what the benchmarks and profiles read of a run, built only with the `measure`
//! feature (on by default; the page's release build leaves it off). Each reports figures and
//! nothing here asserts on speed.

pub mod bench;
pub mod kernel_profile;
pub mod op_profile;
