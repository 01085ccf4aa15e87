#!/usr/bin/env bash
# Runs a command that builds the page's wasm (trunk, wasm-pack) the way every wasm build of this
# project is built: threaded. The CPU backend's thread pool (src/platform.rs) needs atomics and
# bulk memory in every crate, std's included, so std is rebuilt from source (-Zbuild-std) by a
# nightly toolchain pinned here; scripts/setup.sh wasm installs it. Native builds stay on stable.
#   scripts/wasm.sh trunk build --release
#   scripts/wasm.sh --toolchain        prints the toolchain
set -euo pipefail
toolchain=nightly-2026-05-20
if [ "${1:-}" = "--toolchain" ]; then
  echo "$toolchain"
  exit 0
fi
export RUSTUP_TOOLCHAIN=$toolchain
export CARGO_UNSTABLE_BUILD_STD=std,panic_abort
# A shared memory needs a maximum: 4 GiB, as unshared. The other link arguments a threaded
# module needs are in build.rs.
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="-C target-feature=+atomics,+bulk-memory,+mutable-globals -C link-arg=--max-memory=4294967296"
exec "$@"
