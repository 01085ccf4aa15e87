#!/usr/bin/env python3
"""webtrain natively on the CPU against PyTorch on the same cores, in interleaved pairs (A, B,
A, B, ...), the fair comparison on a machine whose speed drifts.

  python3 bench/cpu_pairs.py [--pairs 5] [--models lenet,lenet-small] [--accuracy-pairs 3]

Needs a release build (`cargo build --release`) and TORCH_PYTHON (a python with torch, as
`make bench` installs it). Per model: samples/s at batch 64 (median of 3 windows of 50 steps
after 20, as `make bench`), each pair's ratio; then the training time to 98.5 % test accuracy
within 3 epochs for lenet. Prints a Markdown table and, last, one JSON line with every figure.
"""
import argparse, json, os, pathlib, statistics, subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
TORCH_PYTHON = os.environ.get("TORCH_PYTHON", os.path.expanduser("~/.cache/webtrain/torch-venv/bin/python"))
WINDOWS = ["--warmup", "20", "--steps", "50", "--repeats", "3"]


def last_json(command):
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def webtrain(model, accuracy=False):
    command = [str(ROOT / "target/release/webtrain"), "bench", "--backend", "cpu", "--model", model, *WINDOWS]
    if accuracy:
        command += ["--target-accuracy", "98.5", "--epochs", "3"]
    return last_json(command)


def pytorch(model, accuracy=False):
    command = [TORCH_PYTHON, "bench/pytorch_lenet.py", "--device", "cpu", "--model", model, *WINDOWS]
    if accuracy:
        command += ["--target-accuracy", "98.5", "--epochs", "3"]
    return last_json(command)


def reached(result):
    found = (result.get("time_to_accuracy") or {}).get("reached")
    return found and found["training_secs"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--models", default="lenet,lenet-small")
    p.add_argument("--accuracy-pairs", type=int, default=3)
    a = p.parse_args()
    figures = {}
    for model in a.models.split(","):
        pairs = []
        for _ in range(a.pairs):
            ours = webtrain(model)["throughput"]["samples_per_sec"]
            theirs = pytorch(model)["throughput"]["samples_per_sec"]
            pairs.append({"webtrain": ours, "pytorch": theirs, "ratio": ours / theirs})
        figures[model] = {"throughput": pairs}
    accuracy = []
    for _ in range(a.accuracy_pairs):
        accuracy.append({"webtrain": reached(webtrain("lenet", True)), "pytorch": reached(pytorch("lenet", True))})
    figures["time_to_98_5_lenet"] = accuracy

    print("| model | webtrain samples/s | PyTorch samples/s | ratio (median) |")
    print("|---|---|---|---|")
    for model in a.models.split(","):
        pairs = figures[model]["throughput"]
        span = lambda key: f"{min(p[key] for p in pairs):,.0f}–{max(p[key] for p in pairs):,.0f}"
        ratios = [p["ratio"] for p in pairs]
        print(f"| {model} | {span('webtrain')} | {span('pytorch')} | "
              f"{min(ratios):.2f}–{max(ratios):.2f} ({statistics.median(ratios):.2f}) |")
    for pair in accuracy:
        print(f"time to 98.5 %, lenet: webtrain {pair['webtrain']} s, PyTorch {pair['pytorch']} s")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
