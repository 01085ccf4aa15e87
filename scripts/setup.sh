#!/usr/bin/env bash
# Installs what the Makefile's targets need, skipping whatever is already there.
#   scripts/setup.sh wasm      the toolchain rust-toolchain.toml names (rust-src and wasm32
#                              with it), the crates a wasm32 build needs (std's too) and
#                              wasm-bindgen-cli 0.2.130 (wasm-bindgen and the browser tests'
#                              runner)
#   scripts/setup.sh trunk     wasm's, and trunk 0.21.14 (the page's build)
#   scripts/setup.sh wasm-pack wasm's, and wasm-pack 0.15.1 (`wasm-pack test`)
#   scripts/setup.sh browser   Debian chromium + chromium-driver, Mesa lavapipe (software Vulkan)
#   scripts/setup.sh e2e       playwright-core, axe-core and onnxruntime-web for the end-to-end tests (npm,
#                              no browser download)
#   scripts/setup.sh bench     TensorFlow.js + playwright-core (npm), PyTorch in $TORCH_VENV (pip)
#   scripts/setup.sh pytorch   torch and torchvision in $TORCH_VENV (pip): the PyTorch script's check
#   scripts/setup.sh soak      the benchmark's npm packages only
#   scripts/setup.sh fuzz      cargo-fuzz
#   scripts/setup.sh onnx      onnx and onnxruntime in $ONNX_VENV (pip): the ONNX export's checks
#   scripts/setup.sh mpi       Debian's Open MPI (openmpi-bin, libopenmpi-dev) and libclang, which
#                              the mpi crate's bindings are generated with: the `mpi` feature
set -euo pipefail
cd "$(dirname "$0")/.."

WASM_BINDGEN_VERSION=0.2.130   # must equal the wasm-bindgen pinned in Cargo.toml
TRUNK_VERSION=0.21.14
WASM_PACK_VERSION=0.15.1

tools_target=$HOME/.cache/webtrain/tools-target

has_version() { command -v "$1" >/dev/null && "$1" --version 2>/dev/null | grep -q "$2"; }

setup_wasm() {
  # Installs rust-toolchain.toml's toolchain where it is missing (rustup would on the first
  # cargo command anyway).
  rustup --quiet toolchain install >/dev/null
  # Every crate a wasm32 build needs, std's own dependencies (dlmalloc) among them: trunk runs
  # cargo offline (Trunk.toml), so whatever is not in the registry cache by then cannot build.
  cargo fetch --quiet --target wasm32-unknown-unknown
  # The tools build in a folder of their own, shared among them, away from the project's build.
  # Not --locked: wasm-bindgen-cli 0.2.130's lockfile names a yanked webpki-roots.
  has_version wasm-bindgen "$WASM_BINDGEN_VERSION" ||
    cargo install --target-dir "$tools_target" wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
}

setup_wasm_pack() {
  setup_wasm
  has_version wasm-pack "$WASM_PACK_VERSION" ||
    cargo install --target-dir "$tools_target" wasm-pack --version "$WASM_PACK_VERSION"
}

setup_trunk() {
  setup_wasm
  # --locked: a newer cssparser breaks lightningcss, trunk's CSS minifier.
  has_version trunk "$TRUNK_VERSION" ||
    cargo install --locked --target-dir "$tools_target" trunk --version "$TRUNK_VERSION"
}

# Installs the Debian packages named, where any is missing.
apt_install() {
  local missing=()
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" || missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] && return
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}"
}

setup_onnx() {
  local venv=${ONNX_VENV:-$HOME/.cache/webtrain/onnx-venv}
  "$venv/bin/python" -c 'import onnx, onnxruntime, numpy' 2>/dev/null && return
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet onnx onnxruntime numpy
}

setup_mpi() {
  apt_install openmpi-bin libopenmpi-dev libclang-dev
}

setup_browser() {
  apt_install chromium chromium-driver mesa-vulkan-drivers
}

setup_e2e() {
  [ -d tests/e2e/node_modules/playwright-core ] && [ -d tests/e2e/node_modules/axe-core ] &&
    [ -d tests/e2e/node_modules/onnxruntime-web ] ||
    (cd tests/e2e && npm ci --no-audit --no-fund)
}

setup_soak() {
  [ -d bench/node_modules/@tensorflow/tfjs ] || (cd bench && npm ci --no-audit --no-fund)
}

setup_fuzz() {
  command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --version 0.13.2 --locked
}

setup_pytorch() {
  local venv=${TORCH_VENV:-$HOME/.cache/webtrain/torch-venv}
  "$venv/bin/python" -c 'import torch, torchvision, numpy, safetensors' 2>/dev/null && return
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet torch torchvision numpy safetensors
}

setup_bench() {
  setup_soak
  setup_pytorch
}

for what in "$@"; do
  case "$what" in
    wasm) setup_wasm ;;
    trunk) setup_trunk ;;
    wasm-pack) setup_wasm_pack ;;
    browser) setup_browser ;;
    e2e) setup_e2e ;;
    bench) setup_bench ;;
    pytorch) setup_pytorch ;;
    soak) setup_soak ;;
    fuzz) setup_fuzz ;;
    mpi) setup_mpi ;;
    onnx) setup_onnx ;;
    *) echo "setup.sh: unknown component '$what'" >&2; exit 2 ;;
  esac
done
