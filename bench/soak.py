#!/usr/bin/env python3
"""`make soak`: long runs must not leak. Trains SOAK_EPOCHS (10) epochs with the CLI and in the
page in headless Chromium, prints the memory after every epoch (the process's RSS natively;
the training worker's wasm memory and the GPU memory burn reserves, in the page; the main
thread's JS heap for information), and fails if a gated figure grows by 5 % or more from
epoch 2 to the last.

Environment: SOAK_EPOCHS, SOAK_BACKEND (auto), SOAK_TRAIN_LIMIT (all 60,000),
CARGO_TARGET_DIR (the release CLI and BENCH_DIST, the page's release build, come from there).
"""
import json, os, subprocess, sys, tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from run import serve  # noqa: E402  (the benchmark's loopback server)

ROOT = Path(__file__).resolve().parent.parent
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
DIST = Path(os.environ.get("BENCH_DIST", TARGET / "bench-dist"))
EPOCHS = int(os.environ.get("SOAK_EPOCHS", "10"))
BACKEND = os.environ.get("SOAK_BACKEND", "auto")
TRAIN_LIMIT = os.environ.get("SOAK_TRAIN_LIMIT", "")
LIMIT = 5.0  # % growth from epoch 2 to the last


def native():
    with tempfile.TemporaryDirectory() as out:
        command = [str(TARGET / "release" / "webtrain"), "train", "--epochs", str(EPOCHS),
                   "--backend", BACKEND, "--out", out]
        if TRAIN_LIMIT:
            command += ["--train-limit", TRAIN_LIMIT]
        run = subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if run.returncode != 0:
            sys.exit(f"soak: the CLI failed: {run.stderr.strip()}")
        metrics = json.loads((Path(out) / "metrics.json").read_text())
    return metrics["backend"], [
        {"epoch": m["epoch"], "RSS": m["process_bytes"], "GPU": m["device_reserved_bytes"]}
        for m in metrics["memory"]
    ]


def browser():
    query = f"?epochs={EPOCHS}&backend={BACKEND}" + (f"&train_limit={TRAIN_LIMIT}" if TRAIN_LIMIT else "")
    output = subprocess.run(["node", "bench/soak.mjs", serve(DIST), query], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    result = json.loads(output.strip().splitlines()[-1])
    if result["state"] != "done":
        sys.exit(f"soak: the page ended {result['state']}: {result['error']}")
    return result["adapter"], [
        {"epoch": e["epoch"], "wasm": e["process_bytes"], "GPU": e["device_bytes"], "JS heap": e["js_heap_bytes"]}
        for e in result["epochs"]
    ]


def report(where, adapter, epochs, gated):
    columns = [c for c in epochs[0] if c != "epoch" and any(e[c] is not None for e in epochs)]
    print(f"\n{where} ({adapter}), MB after each epoch:")
    print("epoch  " + "".join(f"{c:>10}" for c in columns))
    for e in epochs:
        print(f"{e['epoch']:>5}  " + "".join(f"{e[c] / 1e6:>10.1f}" for c in columns))
    failures = []
    for c in columns:
        first, last = epochs[min(1, len(epochs) - 1)][c], epochs[-1][c]
        growth = 100.0 * (last - first) / first
        verdict = "gated" if c in gated else "for information"
        print(f"  {c}: {growth:+.2f} % from epoch {epochs[min(1, len(epochs) - 1)]['epoch']} "
              f"to {epochs[-1]['epoch']} ({verdict})")
        if c in gated and growth >= LIMIT:
            failures.append(f"{where} {c} grew {growth:.2f} %")
    return failures


def main():
    failures = report("native", *native(), gated={"RSS", "GPU"})
    failures += report("page", *browser(), gated={"wasm", "GPU"})
    if failures:
        sys.exit("soak: " + "; ".join(failures) + f" (limit {LIMIT} %)")
    print(f"\nsoak: memory flat within {LIMIT} % from epoch 2 to epoch {EPOCHS}")


if __name__ == "__main__":
    main()
