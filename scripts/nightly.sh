#!/usr/bin/env bash
# Runs a cargo command, or a tool that runs cargo (trunk), on the nightly toolchain
# pinned here, with cargo judging a source file fresh by its checksum instead of its mtime
# (-Zchecksum-freshness). Why: `make test` runs on clean clones (CI) that share one build cache,
# and a clone's files are all newer than that cache; by mtime cargo rebuilt the crates under
# patches/ and everything above them (cubecl, cubek, every burn crate) in each of make test's
# three builds. scripts/wasm.sh adds what the page's threaded wasm needs on top of this.
#   scripts/nightly.sh cargo test
#   scripts/nightly.sh --toolchain      prints the toolchain
set -euo pipefail
toolchain=nightly-2026-05-20
if [ "${1:-}" = "--toolchain" ]; then
  echo "$toolchain"
  exit 0
fi
export RUSTUP_TOOLCHAIN=$toolchain
export CARGO_UNSTABLE_CHECKSUM_FRESHNESS=true
exec "$@"
