#!/usr/bin/env python3
"""Trunk's post-build hook, in two steps whose order matters (trunk runs a stage's hooks at once,
so they are one hook):

1. The page's Content-Security-Policy: the sha256 of each inline <script> trunk wrote goes in
   place of the SCRIPT_HASHES placeholder, so the policy allows the loader trunk inlines and
   nothing else: no 'unsafe-inline', and no script from another origin.
2. The service worker (web/service-worker.js): the build's hash (of every file, index.html as
   step 1 left it), the files it keeps for offline use, and the headers a host of the page must
   send (Trunk.toml's [serve.headers]), in place of its placeholders. The page's file names do
   not change between builds (Trunk.toml's filehash = false), so the hash is what tells the
   browser that a build is new, and which cache is whose.

  python3 scripts/post-build.py                      as trunk's hook (TRUNK_STAGING_DIR)
  python3 scripts/post-build.py --service-worker DIR step 2 alone, on a built page changed since
"""
import base64, hashlib, json, os, re, sys, tomllib
from pathlib import Path

ROOT = Path(__file__).parent.parent
SERVICE_WORKER = "service-worker.js"
# MNIST's files: the training worker keeps them itself, once downloaded (src/worker/cache.rs).
NOT_KEPT = re.compile(r"-idx[13]-ubyte\.gz$")


def csp_hashes(staging):
    page = staging / "index.html"
    html = page.read_text()
    inline = re.findall(r"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", html, re.S)
    hashes = " ".join(
        f"'sha256-{base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()}'"
        for script in inline)
    if "SCRIPT_HASHES" not in html:
        raise SystemExit(f"{page}: no SCRIPT_HASHES placeholder in its Content-Security-Policy")
    page.write_text(html.replace("SCRIPT_HASHES", hashes))


def service_worker(staging):
    template = ROOT / "web" / SERVICE_WORKER
    files = sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*")
                   if p.is_file() and p.name != SERVICE_WORKER and not NOT_KEPT.search(p.name))
    build = hashlib.sha256()
    for name in files:
        build.update(name.encode() + b"\0" + (staging / name).read_bytes())
    trunk = tomllib.loads((ROOT / "Trunk.toml").read_text())
    filled = template.read_text()
    for placeholder, value in [("'BUILD'", json.dumps(build.hexdigest()[:16])),
                               ("['FILES']", json.dumps(["./", *files])),
                               ("{'HEADERS': ''}", json.dumps(trunk["serve"]["headers"]))]:
        if placeholder not in filled:
            raise SystemExit(f"{template}: no {placeholder} placeholder")
        filled = filled.replace(placeholder, value)
    (staging / SERVICE_WORKER).write_text(filled)


if sys.argv[1:2] == ["--service-worker"]:
    service_worker(Path(sys.argv[2]))
else:
    staging = Path(os.environ["TRUNK_STAGING_DIR"])
    csp_hashes(staging)
    service_worker(staging)
