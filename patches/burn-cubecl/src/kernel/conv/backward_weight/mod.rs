// webtrain patch: the weight gradient of a 2D convolution in one kernel (PATCH.md).
pub mod direct;
pub mod fallback;
pub mod implicit_gemm;

#[cfg(feature = "autotune")]
pub mod tune;

#[cfg(feature = "autotune")]
pub(crate) use tune::*;
