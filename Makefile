# webtrain: `make serve` trains (the page arrives with the browser issue), `make test` tests.
# Every target installs what it needs, skipping what is already installed.

export CARGO_TARGET_DIR ?= $(HOME)/.cache/webtrain/target
# Training tests in the browser take longer than wasm-bindgen-test's default 20 s.
export WASM_BINDGEN_TEST_TIMEOUT ?= 900
CHROMEDRIVER ?= /usr/bin/chromedriver

.PHONY: serve train test data setup

data:
	scripts/fetch-mnist.sh data/mnist

setup:
	scripts/setup.sh wasm browser

train: data
	cargo run --release -- train

serve: train

test: data setup
	cargo test
	wasm-pack test --headless --chrome --chromedriver $(CHROMEDRIVER) -- --test web
