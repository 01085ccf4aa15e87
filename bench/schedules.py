#!/usr/bin/env python3
"""One-cycle against the default constant learning rate: lenet trained on all of MNIST for the
same epochs with each, over several seeds, on webtrain's CPU backend; the mean and spread of
the final test accuracy (all 10,000 test images).

  python3 bench/schedules.py [--seeds 10] [--epochs 2] [--webtrain target/debug/webtrain]

The runs: SGD with momentum 0.9, batch 64; constant at the default 0.01; one-cycle peaking at
0.01 (the same rate) and at 0.04 (what `webtrain lr-find` suggests for lenet, rounded). Prints
each run's accuracy as it ends, then one JSON line with each schedule's summary.
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

RUNS = {
    "constant 0.01": ["--schedule", "constant", "--lr", "0.01"],
    "one-cycle, peak 0.01": ["--schedule", "onecycle", "--lr", "0.01"],
    "one-cycle, peak 0.04": ["--schedule", "onecycle", "--lr", "0.04"],
}


def accuracy(binary, data, epochs, seed, settings):
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            [binary, "train", "--data", data, "--model", "lenet", "--backend", "cpu",
             "--epochs", str(epochs), "--seed", str(seed), *settings, "--out", f"{out}/run"],
            check=True, stdout=subprocess.DEVNULL)
        with open(f"{out}/run/metrics.json") as f:
            epoch = json.load(f)["epochs"][-1]
        return 100.0 * epoch["correct"] / epoch["total"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--webtrain", default=os.environ.get("WEBTRAIN", "target/debug/webtrain"))
    p.add_argument("--data", default="data/mnist")
    a = p.parse_args()
    found = {name: [] for name in RUNS}
    for seed in range(1, a.seeds + 1):
        for name, settings in RUNS.items():
            found[name].append(accuracy(a.webtrain, a.data, a.epochs, seed, settings))
            print(f"seed {seed}, {name}: {found[name][-1]:.2f} %", file=sys.stderr, flush=True)
    report = {name: {"mean": statistics.mean(v), "stdev": statistics.stdev(v) if len(v) > 1 else 0.0,
                     "min": min(v), "max": max(v), "runs": v}
              for name, v in found.items()}
    print(json.dumps({"epochs": a.epochs, "seeds": a.seeds, "runs": report}))


if __name__ == "__main__":
    main()
