#!/usr/bin/env bash
# Runs a command that builds the page's wasm (trunk, or cargo test --target
# wasm32-unknown-unknown) the way every wasm build of this project is built: threaded. The CPU
# backend's thread pool (src/platform.rs) needs atomics and bulk memory in every crate, std's
# included, so std is rebuilt from source (-Zbuild-std) by the nightly toolchain
# scripts/nightly.sh pins; scripts/setup.sh wasm installs it.
#   scripts/wasm.sh trunk build --release
set -euo pipefail
# `test` too, though only the wasm tests link it: a build of tests adds libtest to the std it
# rebuilds, and every crate built with it then depends on libtest, so the page's build (no
# tests) had every crate's hash differ and compiled burn and all below it again after
# the wasm tests had (~15 min of a fresh make test).
export CARGO_UNSTABLE_BUILD_STD=std,panic_abort,test
# A shared memory needs a maximum: 4 GiB, as unshared. The other link arguments a threaded
# module needs are in build.rs.
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="-C target-feature=+atomics,+bulk-memory,+mutable-globals -C link-arg=--max-memory=4294967296"
# `cargo test --target wasm32-unknown-unknown` runs each test wasm through wasm-bindgen's own
# runner (wasm-bindgen-cli installs it beside wasm-bindgen) in the browser CHROMEDRIVER drives,
# headless, with webdriver.json's flags: what wasm-pack test did, without a tool of its own to
# install, and without the `cargo build --tests` it ran first, which built every test target
# for wasm, the native-only ones (tests/cli.rs, tests/ui.rs, …) and the unit tests included.
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner
export WASM_BINDGEN_TEST_ONLY_WEB=1
exec "$(dirname "$0")/nightly.sh" "$@"
