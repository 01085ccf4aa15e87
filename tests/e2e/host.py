#!/usr/bin/env python3
"""A plain static host for the end-to-end tests, as a host the page does not control behaves:
no header of the page's, and each request logged to stderr when it starts ("GET /path HTTP/1.1")
and when its answer has been sent whole ("sent /path"), so that a test can tell which requests
never finished.

  python3 tests/e2e/host.py DIR PORT [--answer STATUS] [--hold PATH UNTIL]

--answer STATUS   answers every request with STATUS and a page of its own, as a host that is
                  down (503) or has lost the files (404) does
--hold PATH UNTIL answers a request for PATH only once the file UNTIL exists
"""
import argparse, functools, http.server, os, sys, time


class Host(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *args, answer=None, hold=None, **kwargs):
        self.answer, self.hold = answer, hold
        super().__init__(*args, **kwargs)

    def handle_one_request(self):
        super().handle_one_request()
        if getattr(self, "requestline", ""):
            sys.stderr.write(f"sent {self.path}\n")
            sys.stderr.flush()

    def do_GET(self):
        sys.stderr.write(f'"{self.requestline}"\n')
        sys.stderr.flush()
        if self.hold and self.path.split("?")[0] == self.hold[0]:
            while not os.path.exists(self.hold[1]):
                time.sleep(0.1)
        if self.answer:
            self.send_error(self.answer, "the host's own error page")
            return
        super().do_GET()

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("port", type=int)
    parser.add_argument("--answer", type=int)
    parser.add_argument("--hold", nargs=2, metavar=("PATH", "UNTIL"))
    args = parser.parse_args()
    handler = functools.partial(Host, answer=args.answer, hold=args.hold, directory=args.dir)
    http.server.ThreadingHTTPServer(("127.0.0.1", args.port), handler).serve_forever()
