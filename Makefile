# webtrain: `make serve` opens the trainer page at http://127.0.0.1:8080, `make test` tests.
# Every target installs what it needs, skipping what is already installed. The toolchain is
# rust-toolchain.toml's and every build flag is in .cargo/config.toml, so the commands below
# are the plain tools' and work as well typed by hand.

# The benchmark's PyTorch, in a virtual environment of its own (scripts/setup.sh bench).
export TORCH_VENV ?= $(HOME)/.cache/webtrain/torch-venv
# Where make bench and make soak put the release page they serve, with the measurement code
# (the `measure` feature) that the page's own build leaves off.
BENCH_DIST := target/bench-dist

.PHONY: serve dist ui train test bench bench-gpu soak fuzz check-pytorch data

data:
	scripts/fetch-mnist.sh data/mnist

serve: data
	scripts/setup.sh trunk
	trunk serve --release

# The page for any static host, at any path (its links are relative), in dist/: upload that
# folder (docs/hosting.md; .github/workflows/pages.yml publishes it on GitHub Pages).
dist: data
	scripts/setup.sh trunk
	trunk build --release --public-url ./

# The page and a native engine it trains on (the machine's GPU, or every core): prints the
# page's URL with its token. Flags through ARGS, e.g. make ui ARGS="--out runs --open".
ui: dist
	cargo run -- ui --dist dist $(ARGS)

# The build the tests use (Cargo.toml's dev profile: its dependencies fully optimised). Flags
# through ARGS, e.g. make train ARGS="--epochs 1 --backend cpu".
train: data
	cargo run -- train $(ARGS)

# The code's format and clippy's lints first, then the tests: natively, then in headless
# Chromium (the browser suites, threaded as the page is), then the page end to end.
test: data
	scripts/setup.sh trunk wasm-pack browser e2e mpi onnx pytorch
	cargo fmt --check
	cargo clippy --all-targets -- -D warnings
	cargo clippy --features mpi --all-targets -- -D warnings
	cargo clippy --target wasm32-unknown-unknown --all-targets -- -D warnings
	cargo test
	cargo test --features mpi --test native mpi
	wasm-pack test --headless --chrome
	scripts/e2e.sh

# Speed against PyTorch (native) and TensorFlow.js (same headless Chromium): writes
# target/bench/RESULTS.md; bench/RESULTS.md is the curated copy, committed by hand.
bench: data
	scripts/setup.sh trunk browser bench
	cargo build --release
	trunk build --release --features measure --dist $(BENCH_DIST)
	BENCH_DIST=$(BENCH_DIST) TORCH_PYTHON=$(TORCH_VENV)/bin/python python3 bench/run.py

# On a machine with an NVIDIA GPU: webtrain on wgpu (Vulkan) against PyTorch with CUDA, batch 64
# and 512, speed and time to 98.5 % (bench/gpu.sh; writes target/bench/gpu/<date>.txt).
# Elsewhere it says what it skips. WEBTRAIN= a release binary built elsewhere, PYTHON= a python with torch.
bench-gpu: data
	cargo build --release
	bench/gpu.sh

# Ten epochs natively and in headless Chromium; memory after each epoch must stay within 5 %
# (bench/soak.py; SOAK_EPOCHS, SOAK_BACKEND, SOAK_TRAIN_LIMIT). About 20 minutes on 2 cores.
soak: data
	scripts/setup.sh trunk browser soak
	cargo build --release
	trunk build --release --features measure --dist $(BENCH_DIST)
	BENCH_DIST=$(BENCH_DIST) python3 bench/soak.py

# libFuzzer on the IDX parser and on the weights and checkpoint loaders, FUZZ_SECONDS each,
# from the seeds in fuzz/seeds; what they find lands in fuzz/artifacts.
FUZZ_SECONDS ?= 600
fuzz:
	scripts/setup.sh fuzz
	cd fuzz && for target in idx checkpoint; do \
	  mkdir -p corpus/$$target && \
	  cargo fuzz run -s none $$target \
	    corpus/$$target seeds/$$target -- -max_total_time=$(FUZZ_SECONDS) || exit 1; \
	done

# A full CLI run; its model.safetensors loaded strictly into the PyTorch reference model, which
# must get the run's test accuracy; and the file PyTorch writes back, evaluated by the CLI.
check-pytorch: data
	scripts/setup.sh bench
	cargo run -- train --out target/check-pytorch
	$(TORCH_VENV)/bin/python scripts/check-pytorch-weights.py target/check-pytorch
	cargo run -- eval --weights target/check-pytorch/pytorch.safetensors
