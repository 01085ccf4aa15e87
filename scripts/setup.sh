#!/usr/bin/env bash
# Installs what the Makefile's targets need, skipping whatever is already there.
#   scripts/setup.sh wasm      the nightly toolchain (scripts/nightly.sh) with rust-src and
#                              wasm32, wasm-bindgen-cli 0.2.130 (wasm-bindgen and the wasm tests'
#                              runner)
#   scripts/setup.sh trunk     trunk 0.21.14 (0.22 needs a newer rustc than 1.95)
#   scripts/setup.sh browser   Debian chromium + chromium-driver, Mesa lavapipe (software Vulkan)
#   scripts/setup.sh e2e       playwright-core and axe-core for the end-to-end tests (npm, no browser download)
#   scripts/setup.sh bench     TensorFlow.js + playwright-core (npm), PyTorch in $TORCH_VENV (pip)
#   scripts/setup.sh soak      the benchmark's npm packages only
#   scripts/setup.sh fuzz      nightly Rust and cargo-fuzz
set -euo pipefail
cd "$(dirname "$0")/.."

WASM_BINDGEN_VERSION=0.2.130   # must equal the wasm-bindgen pinned in Cargo.toml
TRUNK_VERSION=0.21.14

has_version() { command -v "$1" >/dev/null && "$1" --version 2>/dev/null | grep -q "$2"; }

setup_wasm() {
  local toolchain
  toolchain=$(scripts/nightly.sh --toolchain)
  # rust-src: std is rebuilt with atomics.
  rustup toolchain list | grep -q "^$toolchain" &&
    rustup component list --toolchain "$toolchain" --installed | grep -q '^rust-src' ||
    rustup toolchain install "$toolchain" --profile minimal --component rust-src \
      --target wasm32-unknown-unknown
  has_version wasm-bindgen "$WASM_BINDGEN_VERSION" ||
    cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
}

setup_trunk() {
  setup_wasm
  # --locked: a newer cssparser breaks lightningcss, trunk's CSS minifier.
  has_version trunk "$TRUNK_VERSION" || cargo install trunk --version "$TRUNK_VERSION" --locked
}

setup_browser() {
  local missing=()
  [ -x /usr/bin/chromium ] || missing+=(chromium)
  [ -x /usr/bin/chromedriver ] || missing+=(chromium-driver)
  ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1 || missing+=(mesa-vulkan-drivers)
  [ ${#missing[@]} -eq 0 ] && return
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}"
}

setup_e2e() {
  [ -d tests/e2e/node_modules/playwright-core ] && [ -d tests/e2e/node_modules/axe-core ] ||
    (cd tests/e2e && npm ci --no-audit --no-fund)
}

setup_soak() {
  [ -d bench/node_modules/@tensorflow/tfjs ] || (cd bench && npm ci --no-audit --no-fund)
}

setup_fuzz() {
  rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
  command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --version 0.13.2 --locked
}

setup_bench() {
  setup_soak
  local venv=${TORCH_VENV:-$HOME/.cache/webtrain/torch-venv}
  "$venv/bin/python" -c 'import torch, numpy, safetensors' 2>/dev/null && return
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet torch numpy safetensors
}

for what in "$@"; do
  case "$what" in
    wasm) setup_wasm ;;
    trunk) setup_trunk ;;
    browser) setup_browser ;;
    e2e) setup_e2e ;;
    bench) setup_bench ;;
    soak) setup_soak ;;
    fuzz) setup_fuzz ;;
    *) echo "setup.sh: unknown component '$what'" >&2; exit 2 ;;
  esac
done
