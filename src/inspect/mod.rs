//! Inside the network: how each layer learns (`learning`, its figures gathered on the device
//! by `probe` and watched by `watch`), and where the digits lie in a layer's space (`pca`).

pub mod learning;
pub mod pca;
pub mod probe;
pub mod watch;
