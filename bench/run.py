#!/usr/bin/env python3
"""`make bench`: webtrain against PyTorch natively and against TensorFlow.js in the browser, on
the machine it runs on, in one go. Writes target/bench/results.json and target/bench/RESULTS.md;
bench/RESULTS.md is the curated copy, committed by hand.

Expects what `make bench` prepares: `cargo build --release`, a `trunk build --release` of the
page in $BENCH_DIST, bench/node_modules, a Python with torch in $TORCH_PYTHON and MNIST in
data/mnist. The work unit: lenet at batch 64, SGD(lr 0.01, momentum 0.9).
"""
import datetime, gzip, json, os, platform, shutil, socketserver, statistics
import subprocess, sys, threading
from functools import partial
from pathlib import Path

from gpu_report import kernel_lines

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import serve as page_server  # noqa: E402  (scripts/serve.py: `make serve`'s headers)
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
DIST = Path(os.environ.get("BENCH_DIST", TARGET / "bench-dist"))
TORCH_PYTHON = os.environ.get("TORCH_PYTHON", "python3")
# Steps: warm-up, per window, windows (the median is reported).
WARMUP, STEPS, REPEATS = (int(os.environ.get(k, d)) for k, d in
                          (("BENCH_WARMUP", 20), ("BENCH_STEPS", 20), ("BENCH_REPEATS", 5)))
TARGET_ACCURACY = 98.5
MFLOP_PER_SAMPLE = 13.76  # lenet forward 4.59 MFLOP, x3 for a training step
# The page's gzipped size limit: 3.5 MB, which leaves room for fusion (the GPU-work counts
# show it pays).
BUNDLE_LIMIT = 3_500_000
# The page's main thread while 100 kept runs are drawn at once, re-sorted and redrawn: its
# longest task, at most.
KEPT_RUNS_LIMIT_MS = 50


def log(message):
    print(f"bench: {message}", file=sys.stderr, flush=True)


def run_json(command, **kwargs):
    """The JSON line a benchmark prints, or why there is none."""
    log(" ".join(map(str, command)))
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        return {"ok": False, "error": lines[-1] if lines else f"exit {done.returncode}"}
    return {"ok": True, **json.loads(done.stdout.strip().splitlines()[-1])}


def webtrain_native(backend, target=None):
    command = [TARGET / "release/webtrain", "bench", "--backend", backend, "--warmup", WARMUP,
               "--steps", STEPS, "--repeats", REPEATS]
    if backend == "gpu":
        command.append("--kernels")
    if backend == "cpu":
        command.append("--ops")
    if target:
        command += ["--target-accuracy", target, "--epochs", 3]
    result = run_json(list(map(str, command)))
    return {"framework": "webtrain", "where": "native", **result, "backend": backend}


def pytorch(device, target=None):
    command = [TORCH_PYTHON, "bench/pytorch_lenet.py", "--device", device, "--warmup", WARMUP,
               "--steps", STEPS, "--repeats", REPEATS]
    if target:
        command += ["--target-accuracy", target, "--epochs", 3]
    result = run_json(list(map(str, command)))
    return {"framework": "pytorch", "where": "native", **result, "backend": device}


def serve(handler):
    """A loopback HTTP server on a free port for `handler`, one of scripts/serve.py's; returns
    its URL."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def browser():
    # The page as `make serve` serves it (cross-origin isolated: the CPU backend on every core),
    # and as a host that sends only the default headers serves it (one thread).
    isolated = serve(page_server.handler(DIST))
    not_isolated = serve(page_server.handler(DIST, isolated=False))
    # TF.js's page and the repository's files, with no header of the trainer page's.
    tfjs = serve(partial(page_server.Handler, headers={}, directory=str(ROOT)))
    command = ["node", "bench/browser.mjs", isolated, tfjs, WARMUP, STEPS, REPEATS, not_isolated]
    result = run_json(list(map(str, command)))
    if not result.pop("ok"):
        return {"chromium": None, "webtrain": [], "tfjs": [], "error": result["error"]}
    for row in result["webtrain"] + result["tfjs"]:
        row["where"] = "browser"
    return result


def kept_runs():
    # In the page as `make serve` serves it.
    result = run_json(["node", "bench/kept_runs.mjs", serve(page_server.handler(DIST))])
    result["met"] = result["ok"] and result["longest_task_ms"] <= KEPT_RUNS_LIMIT_MS
    return result


def bundle():
    wasm = next(DIST.glob("*.wasm"))
    raw = wasm.read_bytes()
    return {"file": wasm.name, "bytes": len(raw), "gzip_bytes": len(gzip.compress(raw, 9))}


def machine():
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
    gpus = []
    if shutil.which("nvidia-smi"):
        gpus = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                              capture_output=True, text=True).stdout.strip().splitlines()
    return {"cores": os.cpu_count(), "cpu": cpu, "gpus": gpus, "os": platform.platform(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def speed(row):
    """Samples/s of a row that ran, else None."""
    if not row.get("ok"):
        return None
    return row["throughput"]["samples_per_sec"] if "throughput" in row else row["samples_per_s"]


def best(rows):
    ran = [r for r in rows if speed(r)]
    return max(ran, key=speed) if ran else None


def find(rows, framework, backend, where=None):
    return next((r for r in rows if r["framework"] == framework and r["backend"] == backend
                 and (where is None or r["where"] == where)), {})


def page_cpu(rows, isolated=True):
    """The page's CPU row, served cross-origin isolated (threads) or not (one thread)."""
    return next((r for r in rows if r["framework"] == "webtrain" and r["where"] == "browser"
                 and r["backend"] == "cpu" and r.get("isolated", True) == isolated), {})


def ratio(a, b):
    return speed(a) / speed(b) if a and b and speed(a) and speed(b) else None


def main():
    results = {"machine": machine(), "settings": {
        "model": "lenet", "batch_size": 64, "optimizer": "sgd lr 0.01 momentum 0.9",
        "warmup_steps": WARMUP, "steps_per_window": STEPS, "windows": REPEATS,
        "mflop_per_sample": MFLOP_PER_SAMPLE}}
    rows = [webtrain_native("cpu", TARGET_ACCURACY), webtrain_native("gpu")]
    gpu, cpu = rows[1], rows[0]
    if speed(gpu) and speed(gpu) > speed(cpu):
        rows[1] = webtrain_native("gpu", TARGET_ACCURACY)
    rows.append(pytorch("cpu", TARGET_ACCURACY))
    if results["machine"]["gpus"]:
        rows.append(pytorch("cuda", TARGET_ACCURACY))
    in_browser = browser()
    results["chromium"] = in_browser["chromium"]
    if "error" in in_browser:
        results["browser_error"] = in_browser["error"]
    rows += in_browser["webtrain"] + in_browser["tfjs"]
    for row in rows:
        if speed(row):
            row["gflop_per_s"] = speed(row) * MFLOP_PER_SAMPLE / 1000
    results["rows"] = rows
    results["bundle"] = bundle()

    page = [r for r in rows if r["framework"] == "webtrain" and r["where"] == "browser"]
    tfjs = [r for r in rows if r["framework"] == "tfjs"]
    native_cpu = find(rows, "webtrain", "cpu", "native")
    targets = [
        ("browser GPU: webtrain WebGPU / TF.js webgpu", ratio(find(page, "webtrain", "gpu"), find(tfjs, "tfjs", "webgpu")), 4.0),
        ("browser GPU: webtrain WebGPU / TF.js webgl", ratio(find(page, "webtrain", "gpu"), find(tfjs, "tfjs", "webgl")), 2.0),
        ("browser overall: webtrain best / TF.js best", ratio(best(page), best(tfjs)), 20.0),
        ("browser CPU fallback / webtrain native CPU", ratio(page_cpu(page), native_cpu), 0.8),
        ("native CPU: webtrain / PyTorch", ratio(native_cpu, find(rows, "pytorch", "cpu")), 1.0),
    ]
    results["targets"] = [{"what": w, "ratio": r, "target": t, "met": r is not None and r >= t} for w, r, t in targets]
    results["gpu_work"] = gpu_work(find(page, "webtrain", "gpu"), find(tfjs, "tfjs", "webgpu"))
    results["bundle"]["met"] = results["bundle"]["gzip_bytes"] <= BUNDLE_LIMIT
    results["kept_runs"] = kept_runs()
    out = TARGET / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "RESULTS.md").write_text(markdown(results))
    print(markdown(results))


def gpu_work(webtrain, tfjs):
    """The WebGPU calls per training step (bench/gpu_counts.js) and their targets."""
    ours = (webtrain or {}).get("gpu_per_step")
    theirs = (tfjs or {}).get("gpu_per_step")
    checks = []
    if ours:
        # A webtrain log line also gathers the learning figures, which TF.js has no part of: the
        # steps compared are those that neither log nor checkpoint (TF.js's are all alike).
        quiet = ours.get("dispatches_per_quiet_step")
        if theirs and quiet:
            checks.append(("dispatches: TF.js webgpu / webtrain's steps that neither log nor checkpoint",
                           theirs["dispatches"] / quiet, "≥ 2"))
        checks.append(("bytes uploaded per step", ours["upload_bytes"], "≤ 1024"))
        checks.append(("readbacks on steps that neither log nor checkpoint", ours["readbacks_on_quiet_steps"], "0"))
        if ours.get("submits_per_quiet_step") is not None:
            checks.append(("submits per step that neither logs nor checkpoints", ours["submits_per_quiet_step"], "≤ 1"))
    met = {"≥ 2": lambda v: v >= 2, "≤ 1024": lambda v: v <= 1024, "0": lambda v: v == 0, "≤ 1": lambda v: v <= 1}
    return {"webtrain": ours, "tfjs": theirs, "webtrain_kernel_times": (webtrain or {}).get("kernel_times"),
            "checks": [{"what": w, "value": v, "wanted": t, "met": met[t](v)} for w, v, t in checks]}


def gpu_work_markdown(work):
    if not work["webtrain"]:
        return ["\nGPU work per step: not counted (no WebGPU run in the page)."]
    keys = ["dispatches", "submits", "uploads", "upload_bytes", "readbacks", "pipelines"]
    out = ["\nWebGPU calls per training step in the steady state, counted in the page's worker and in "
           "TF.js's page by wrapping the WebGPU API from the harness (bench/gpu_counts.js); "
           f"webtrain logs every {STEPS} steps (a loss read and a checkpoint), averaged over the "
           f"{work['webtrain'].get('steps', '?')} steps after the warm-up; TF.js reads its loss every step:\n",
           "| | " + " | ".join(keys) + " |", "|---|" + "---:|" * len(keys)]
    for name in ["webtrain", "tfjs"]:
        row = work[name]
        if row:
            out.append(f"| {name} | " + " | ".join(f"{row[k]:,.1f}" for k in keys) + " |")
    quiet = work["webtrain"].get("dispatches_per_quiet_step")
    if quiet is not None:
        out.append(f"\nwebtrain's steps that neither log nor checkpoint: {quiet:.1f} dispatches and "
                   f"{work['webtrain']['submits_per_quiet_step']:.2f} submits each; a log line adds its "
                   "loss read, a checkpoint and the learning figures.")
    kernels = work["webtrain"].get("kernels") or {}
    if kernels:
        out.append("\nwebtrain's dispatches per step by kernel: " + ", ".join(
            f"{name} {count:.1f}" for name, count in kernels.items()) + ".")
    times = work.get("webtrain_kernel_times")
    if times:
        out += [f"\nWhere a WebGPU step's GPU time goes in the page, from timestamps written around each "
                f"dispatch (timestamp-query inside passes; a run of its own, {times['steps']} steps): "
                f"{times['kernel_ms_per_step']:,.1f} ms of kernels per step.\n",
                "| kernel | dispatches | ms per step | share |", "|---|---:|---:|---:|"]
        for k in times["kernels"]:
            share = k["ms_per_step"] / times["kernel_ms_per_step"] if times["kernel_ms_per_step"] else 0
            out.append(f"| {k['name']} | {k['dispatches_per_step']:.1f} | {k['ms_per_step']:,.2f} | {share:.0%} |")
    out += ["\n| GPU work target | value | wanted | met |", "|---|---:|---:|---|"]
    for c in work["checks"]:
        out.append(f"| {c['what']} | {c['value']:,.2f} | {c['wanted']} | {'yes' if c['met'] else 'no'} |")
    return out


def markdown(results):
    m = results["machine"]
    out = [f"# Benchmark results\n",
           f"`make bench` on {m['date']}: {m['cores']} cores ({m['cpu']}), "
           f"GPU: {', '.join(m['gpus']) or 'none'}; Chromium {results['chromium'] or 'n/a'}.",
           "Work unit: lenet training steps at batch 64, SGD(lr 0.01, momentum 0.9), real MNIST; "
           f"median of {REPEATS} windows of {STEPS} steps after the warm-up.\n",
           "| framework | where | backend | adapter | samples/s | ms/step | GFLOP/s |",
           "|---|---|---|---|---:|---:|---:|"]
    for r in results["rows"]:
        adapter = r.get("adapter") or r.get("device") or ""
        if r.get("ok") and speed(r):
            ms = r["throughput"]["ms_per_step"] if "throughput" in r else r["ms_per_step"]
            out.append(f"| {r['framework']} | {r['where']} | {r['backend']} | {adapter} | "
                       f"{speed(r):,.1f} | {ms:,.1f} | {r['gflop_per_s']:.2f} |")
        else:
            out.append(f"| {r['framework']} | {r['where']} | {r['backend']} | {adapter} | "
                       f"cannot train it: {r.get('error', '?')} | | |")
    out += ["\n| target | ratio | wanted | met |", "|---|---:|---:|---|"]
    for t in results["targets"]:
        value = f"{t['ratio']:.2f}" if t["ratio"] is not None else "n/a"
        out.append(f"| {t['what']} | {value} | ≥ {t['target']} | {'yes' if t['met'] else 'no'} |")
    b = results["bundle"]
    out.append(f"| wasm bundle, gzipped | {b['gzip_bytes'] / 1e6:.2f} MB ({b['bytes'] / 1e6:.1f} MB raw) "
               f"| ≤ {BUNDLE_LIMIT / 1e6:.1f} MB | {'yes' if b['met'] else 'no'} |")
    k = results["kept_runs"]
    held = (f"{k['longest_task_ms']:.0f} ms ({k['tasks_over_50_ms']} tasks over 50 ms, "
            f"{k['records_mb']:.1f} MB of records)" if k["ok"] else f"n/a: {k['error']}")
    out.append(f"| 100 kept runs drawn, re-sorted and redrawn: the main thread's longest task | {held} "
               f"| ≤ {KEPT_RUNS_LIMIT_MS} ms | {'yes' if k['met'] else 'no'} |")
    threaded, single = page_cpu(results["rows"]), page_cpu(results["rows"], isolated=False)
    if ratio(threaded, single):
        out.append(f"\nThe page's CPU backend: {speed(threaded):,.1f} samples/s as `make serve` serves it "
                   f"({threaded.get('adapter')}), {speed(single):,.1f} served without COOP and COEP "
                   f"({single.get('adapter')}): threads ×{ratio(threaded, single):.2f}.")
    out += [f"\nTime to {TARGET_ACCURACY}% test accuracy (training time, evaluation excluded; "
            "test accuracy checked after each epoch):\n"]
    for r in results["rows"]:
        tta = r.get("time_to_accuracy")
        if not tta:
            continue
        reached = tta["reached"]
        epochs = ", ".join(f"{e['accuracy']:.2f}%" for e in tta["epochs"])
        when = (f"{reached['training_secs']:.1f} s (epoch {reached['epoch']})" if reached
                else "not reached")
        out.append(f"- {r['framework']} {r['where']} {r['backend']}: {when}; per epoch: {epochs}")
    out += gpu_work_markdown(results["gpu_work"])
    native = find(results["rows"], "webtrain", "gpu", "native")
    if native and native.get("kernels"):
        out.append(f"\nNatively on wgpu ({native.get('adapter')}, fusion and autotune on), counted and "
                   "timed by cubecl's launch observer (`webtrain bench --kernels`):\n\n```")
        out += kernel_lines(native["kernels"]) + ["```"]
    cpu = find(results["rows"], "webtrain", "cpu", "native")
    if cpu.get("ops"):
        out.append("\nWhere a CPU step's time goes, natively (`webtrain bench --ops`: the phases of "
                   "real steps, then each op alone at the step's shapes, medians):\n\n```")
        out += ops_lines(cpu["ops"]) + ["```"]
    threaded = page_cpu(results["rows"])
    if threaded.get("ops", {}).get("phases"):
        out.append(f"\nThe same in the page's worker (flex in wasm; {threaded.get('adapter')}):\n\n```")
        out += ops_lines(threaded["ops"]) + ["```"]
    first = [r for r in results["rows"] if "first_step_ms" in r and r.get("isolated", True)]
    out.append("\nThe page, from clicking Start to the first finished step: " + "; ".join(
        first_step_words(r) for r in first) + ".")
    return "\n".join(out) + "\n"


def ops_lines(profile):
    step = sum(p["ms"] for p in profile["phases"])
    row = lambda op: f"{op['name']:<34} {op['ms']:>8.2f} ms {100 * op['ms'] / step:>5.1f} %"
    return ([f"one {profile['model']} step at batch {profile['batch']} on the CPU: {step:.2f} ms"]
            + [row(p) for p in profile["phases"]] + ["each op alone, at the step's shapes:"]
            + [row(o) for o in profile["ops"]])


def first_step_words(row):
    words = f"{row['backend']} {row['first_step_ms'] / 1000:.2f} s when Start is clicked at once"
    if row.get("first_step_warm_ms") is not None:
        words += (f", {row['first_step_warm_ms'] / 1000:.2f} s once the page has built its kernels"
                  f" ({row['kernels_built_ms'] / 1000:.1f} s after it began loading)")
    return words


if __name__ == "__main__":
    main()
