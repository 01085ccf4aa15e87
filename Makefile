# webtrain: `make serve` opens the trainer page at http://127.0.0.1:8080, `make test` tests.
# Every target installs what it needs, skipping what is already installed.

export CARGO_TARGET_DIR ?= $(HOME)/.cache/webtrain/target
# Training tests in the browser take longer than wasm-bindgen-test's default 20 s.
export WASM_BINDGEN_TEST_TIMEOUT ?= 900
CHROMEDRIVER ?= /usr/bin/chromedriver

.PHONY: serve train test data

data:
	scripts/fetch-mnist.sh data/mnist

serve: data
	scripts/setup.sh trunk
	trunk serve --release --offline

train: data
	cargo run -- train

test: data
	scripts/setup.sh trunk browser e2e
	cargo test
	wasm-pack test --headless --chrome --chromedriver $(CHROMEDRIVER) -- --test web --test web_fallback
	scripts/e2e.sh
