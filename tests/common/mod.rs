use std::path::PathBuf;

use webtrain::data::Mnist;

/// The checkout whose `cargo test` runs this test, as cargo says when it runs it. Not
/// `env!`'s: clones share one build folder (.cargo/config.toml), and a test binary built for
/// the same sources in another clone is reused, with that clone's paths compiled into it.
pub fn checkout() -> PathBuf {
    runtime_or_compiled("CARGO_MANIFEST_DIR", env!("CARGO_MANIFEST_DIR"))
}

/// The `webtrain` binary of the checkout that runs this test (the features it was built with
/// are that `cargo test`'s), for the reason [`checkout`] gives.
#[allow(dead_code)] // not every test binary runs the CLI
pub fn webtrain() -> PathBuf {
    runtime_or_compiled("CARGO_BIN_EXE_webtrain", env!("CARGO_BIN_EXE_webtrain"))
}

fn runtime_or_compiled(name: &str, compiled: &str) -> PathBuf {
    std::env::var_os(name).map_or_else(|| PathBuf::from(compiled), PathBuf::from)
}

/// The real MNIST set in data/mnist, put there by `make data`.
pub fn mnist() -> Mnist {
    let dir = checkout().join("data/mnist");
    Mnist::load_dir(&dir).unwrap_or_else(|e| panic!("{e}"))
}
