#!/usr/bin/env python3
"""Trunk post-build hook: puts the sha256 of each inline <script> trunk wrote into the page's
Content-Security-Policy, in place of the SCRIPT_HASHES placeholder, so the policy allows the
loader trunk inlines and nothing else: no 'unsafe-inline', and no script from another origin."""
import base64, hashlib, os, re
from pathlib import Path

page = Path(os.environ["TRUNK_STAGING_DIR"]) / "index.html"
html = page.read_text()
inline = re.findall(r"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", html, re.S)
hashes = " ".join(
    f"'sha256-{base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()}'"
    for script in inline)
if "SCRIPT_HASHES" not in html:
    raise SystemExit(f"{page}: no SCRIPT_HASHES placeholder in its Content-Security-Policy")
page.write_text(html.replace("SCRIPT_HASHES", hashes))
