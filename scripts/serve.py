#!/usr/bin/env python3
"""Serves a built page (trunk's dist) on 127.0.0.1 with the HTTP headers `make serve` sends:
Trunk.toml's [serve.headers], read from there so that the two never differ. The end-to-end tests
and the benchmarks serve the page with it.

  python3 scripts/serve.py DIST PORT
"""
import functools, http.server, sys, tomllib
from pathlib import Path

HEADERS = tomllib.loads((Path(__file__).parent.parent / "Trunk.toml").read_text())["serve"]["headers"]


class Handler(http.server.SimpleHTTPRequestHandler):
    def end_headers(self):
        for name, value in HEADERS.items():
            self.send_header(name, value)
        super().end_headers()

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    dist, port = sys.argv[1], int(sys.argv[2])
    handler = functools.partial(Handler, directory=dist)
    http.server.ThreadingHTTPServer(("127.0.0.1", port), handler).serve_forever()
