#!/usr/bin/env python3
"""Serves a built page (trunk's dist) on 127.0.0.1 with the HTTP headers `make serve` sends:
Trunk.toml's [serve.headers], read from there so that the two never differ. The end-to-end tests
and the benchmarks serve the page with it.

  python3 scripts/serve.py DIST PORT [--not-isolated]

--not-isolated leaves out the two headers that make the page cross-origin isolated (COOP, COEP),
as a host that sends only the defaults would: the page then trains on one CPU thread.
"""
import functools, http.server, sys, tomllib
from pathlib import Path

HEADERS = tomllib.loads((Path(__file__).parent.parent / "Trunk.toml").read_text())["serve"]["headers"]
ISOLATION = ("Cross-Origin-Opener-Policy", "Cross-Origin-Embedder-Policy")


class Handler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *args, headers=HEADERS, **kwargs):
        self.sent_headers = headers
        super().__init__(*args, **kwargs)

    def end_headers(self):
        for name, value in self.sent_headers.items():
            self.send_header(name, value)
        super().end_headers()

    def log_message(self, *args):
        pass


def handler(dist, isolated=True):
    """A request handler for `dist` that sends `make serve`'s headers, less COOP and COEP
    unless `isolated`."""
    headers = {name: value for name, value in HEADERS.items() if isolated or name not in ISOLATION}
    return functools.partial(Handler, headers=headers, directory=str(dist))


if __name__ == "__main__":
    dist, port = sys.argv[1], int(sys.argv[2])
    isolated = "--not-isolated" not in sys.argv[3:]
    http.server.ThreadingHTTPServer(("127.0.0.1", port), handler(dist, isolated)).serve_forever()
