#!/usr/bin/env bash
# Builds the page with trunk, serves it on 127.0.0.1:$PORT and runs the end-to-end tests in
# headless Chromium against it. The debug build reuses what `wasm-pack test` compiled.
set -euo pipefail
cd "$(dirname "$0")/.."
port=${PORT:-8090}
dist=${CARGO_TARGET_DIR:-target}/e2e-dist

trunk build --offline --dist "$dist"
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$dist" >/dev/null 2>&1 &
server=$!
trap 'kill $server' EXIT
for _ in $(seq 50); do curl -fs "http://127.0.0.1:$port/" >/dev/null && break; sleep 0.2; done
# A server that could not bind means another one holds the port: these tests would drive it.
kill -0 "$server" 2>/dev/null || { echo "e2e: port $port is taken (set PORT)" >&2; exit 1; }
WEBTRAIN_URL="http://127.0.0.1:$port" WEBTRAIN_CLI=${CARGO_TARGET_DIR:-target}/debug/webtrain node --test --test-concurrency=1 tests/e2e/page.test.mjs
