#!/usr/bin/env bash
# Builds the page with trunk, serves it on 127.0.0.1:$PORT and runs the end-to-end tests in
# headless Chromium against it. The debug build reuses what the browser tests compiled.
set -euo pipefail
cd "$(dirname "$0")/.."
port=${PORT:-8090}
dist=${CARGO_TARGET_DIR:-target}/e2e-dist

# Relative links, as `make dist` writes them: the page works at any path.
trunk build --dist "$dist" --public-url ./
# Another server on the port would be the one these tests drive.
if curl -fs "http://127.0.0.1:$port/" >/dev/null; then
  echo "e2e: port $port is taken (set PORT)" >&2
  exit 1
fi
# With the headers `make serve` sends (Trunk.toml's [serve.headers]).
python3 scripts/serve.py "$dist" "$port" &
server=$!
trap 'kill $server' EXIT
for _ in $(seq 50); do curl -fs "http://127.0.0.1:$port/" >/dev/null && break; sleep 0.2; done
# The spec reporter ends on the failing tests, with their errors: the end of a long log names them.
WEBTRAIN_DIST="$dist" WEBTRAIN_URL="http://127.0.0.1:$port" WEBTRAIN_CLI=${CARGO_TARGET_DIR:-target}/debug/webtrain node --test --test-concurrency=1 \
  --test-reporter=spec tests/e2e/page.test.mjs
