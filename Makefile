# webtrain: `make serve` opens the trainer page at http://127.0.0.1:8080, `make test` tests.
# Every target installs what it needs, skipping what is already installed.

export CARGO_TARGET_DIR ?= $(HOME)/.cache/webtrain/target
# Training tests in the browser take longer than wasm-bindgen-test's default 20 s.
export WASM_BINDGEN_TEST_TIMEOUT ?= 900
CHROMEDRIVER ?= /usr/bin/chromedriver
# The suites that run in headless Chromium (scripts/wasm.sh names their runner).
WASM_TESTS := web web_fallback web_corpus web_device_lost web_protocol
# The benchmark's PyTorch, in a virtual environment of its own (scripts/setup.sh bench).
export TORCH_VENV ?= $(HOME)/.cache/webtrain/torch-venv
# Every wasm build is threaded: a pinned nightly with -Zbuild-std (scripts/wasm.sh says why).
WASM := scripts/wasm.sh
# make test builds on that nightly natively too: its checksum freshness spares a clean clone
# (CI) the rebuild of everything above patches/ (scripts/nightly.sh says why).
NIGHTLY := scripts/nightly.sh

.PHONY: serve ui train test bench bench-gpu soak fuzz check-pytorch data

data:
	scripts/fetch-mnist.sh data/mnist

serve: data
	scripts/setup.sh trunk
	$(WASM) trunk serve --release --offline

# The page and a native engine it trains on (this machine's GPU, or every core): prints the
# page's URL with its token. Flags through ARGS, e.g. make ui ARGS="--out runs --open".
ui: data
	scripts/setup.sh trunk
	$(WASM) trunk build --release --offline
	cargo build --release
	$(CARGO_TARGET_DIR)/release/webtrain ui --dist dist $(ARGS)

# Release: the dev profile's dependencies train at about half the speed (see README, Performance).
train: data
	cargo run --release -- train

test: data
	scripts/setup.sh trunk browser e2e
	$(NIGHTLY) cargo test
	CHROMEDRIVER=$(CHROMEDRIVER) $(WASM) cargo test --target wasm32-unknown-unknown $(addprefix --test ,$(WASM_TESTS))
	scripts/e2e.sh

# Speed against PyTorch (native) and TensorFlow.js (same headless Chromium): bench/RESULTS.md.
bench: data
	scripts/setup.sh trunk browser bench
	cargo build --release
	$(WASM) trunk build --release --offline --dist $(CARGO_TARGET_DIR)/bench-dist
	BENCH_DIST=$(CARGO_TARGET_DIR)/bench-dist TORCH_PYTHON=$(TORCH_VENV)/bin/python python3 bench/run.py

# On a machine with an NVIDIA GPU: webtrain on wgpu (Vulkan) against PyTorch with CUDA, batch 64
# and 512, speed and time to 98.5 % (bench/gpu.sh; writes bench/gpu/<date>.txt). Elsewhere it
# says what it skips. WEBTRAIN= a release binary built elsewhere, PYTHON= a python with torch.
bench-gpu: data
	cargo build --release
	bench/gpu.sh

# Ten epochs natively and in headless Chromium; memory after each epoch must stay within 5 %
# (bench/soak.py; SOAK_EPOCHS, SOAK_BACKEND, SOAK_TRAIN_LIMIT). About 20 minutes on 2 cores.
soak: data
	scripts/setup.sh trunk browser soak
	cargo build --release
	$(WASM) trunk build --release --offline --dist $(CARGO_TARGET_DIR)/bench-dist
	BENCH_DIST=$(CARGO_TARGET_DIR)/bench-dist python3 bench/soak.py

# libFuzzer on the IDX parser and on the weights and checkpoint loaders, FUZZ_SECONDS each,
# from the seeds in fuzz/seeds; what they find lands in fuzz/artifacts. Needs nightly Rust.
FUZZ_SECONDS ?= 600
fuzz:
	scripts/setup.sh fuzz
	cd fuzz && for target in idx checkpoint; do \
	  mkdir -p corpus/$$target && \
	  CARGO_TARGET_DIR=$(HOME)/.cache/webtrain/fuzz-target cargo +nightly fuzz run -s none $$target \
	    corpus/$$target seeds/$$target -- -max_total_time=$(FUZZ_SECONDS) || exit 1; \
	done

# A full CLI run; its model.safetensors loaded strictly into the PyTorch reference model, which
# must get the run's test accuracy; and the file PyTorch writes back, evaluated by the CLI.
check-pytorch: data
	scripts/setup.sh bench
	cargo run --release -- train --out $(CARGO_TARGET_DIR)/check-pytorch
	$(TORCH_VENV)/bin/python scripts/check-pytorch-weights.py $(CARGO_TARGET_DIR)/check-pytorch
	cargo run --release -- eval --weights $(CARGO_TARGET_DIR)/check-pytorch/pytorch.safetensors
