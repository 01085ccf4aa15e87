use std::path::Path;

use webtrain::data::Mnist;

/// The real MNIST set in data/mnist, put there by `make data`.
pub fn mnist() -> Mnist {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/mnist");
    Mnist::load_dir(&dir).unwrap_or_else(|e| panic!("{e}"))
}
