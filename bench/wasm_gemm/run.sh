#!/usr/bin/env bash
# gemm natively against gemm in the page's wasm, one thread each (see Cargo.toml): builds both
# (the wasm on the toolchain rust-toolchain.toml pins) and prints them.
set -euo pipefail
cd "$(dirname "$0")"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/webtrain/wasm-gemm-target}
echo "native (this CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)):"
cargo run --release --quiet
# RUSTFLAGS replaces .cargo/config.toml's wasm flags: one thread, no shared memory.
RUSTFLAGS="-C link-arg=--allow-undefined" cargo build --release --quiet --lib --target wasm32-unknown-unknown
echo "in the browser:"
node run.mjs "$CARGO_TARGET_DIR/wasm32-unknown-unknown/release/wasm_gemm_bench.wasm"
