#!/usr/bin/env python3
"""Augmentation against none: lenet trained on all of MNIST with the default settings, with and
without `--augment on` (the default ranges), for 2 and 10 epochs, on webtrain's CPU backend;
each model's accuracy on MNIST's test set and on the drawn-like set (bench/drawn_like.py),
kind by kind.

  python3 bench/drawn_like.py && python3 bench/augmentation.py [--seeds 1] [--epochs 2 10]

Prints each model's accuracies as it is measured, then one JSON line with them all.
"""
import argparse, json, os, re, statistics, subprocess, sys, tempfile

KINDS = ["off-centre", "small", "large", "slanted", "thick", "thin"]
ACCURACY = re.compile(r"Accuracy: (\d+)/(\d+)")


def accuracy_of(output):
    correct, total = map(int, ACCURACY.findall(output)[-1])
    return 100.0 * correct / total


def measure(binary, data, drawn_like, epochs, seed, augment):
    with tempfile.TemporaryDirectory() as out:
        run = [binary, "train", "--data", data, "--model", "lenet", "--backend", "cpu",
               "--epochs", str(epochs), "--seed", str(seed), "--augment", augment,
               "--out", f"{out}/run"]
        mnist = accuracy_of(subprocess.run(run, check=True, capture_output=True, text=True).stdout)
        found = {"mnist": mnist}
        for kind in KINDS:
            evaluate = [binary, "eval", "--weights", f"{out}/run/model.safetensors",
                        "--model", "lenet", "--backend", "cpu",
                        "--data", os.path.join(drawn_like, kind)]
            done = subprocess.run(evaluate, check=True, capture_output=True, text=True)
            found[kind] = accuracy_of(done.stdout)
        found["drawn-like"] = statistics.mean(found[kind] for kind in KINDS)
        return found


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--epochs", type=int, nargs="+", default=[2, 10])
    p.add_argument("--webtrain", default=os.environ.get("WEBTRAIN", "target/debug/webtrain"))
    p.add_argument("--data", default="data/mnist")
    p.add_argument("--drawn-like", default="data/drawn-like")
    a = p.parse_args()
    results = []
    for epochs in a.epochs:
        for augment in ("off", "on"):
            for seed in range(1, a.seeds + 1):
                found = measure(a.webtrain, a.data, a.drawn_like, epochs, seed, augment)
                results.append({"epochs": epochs, "augment": augment, "seed": seed, **found})
                figures = ", ".join(f"{k} {v:.2f}" for k, v in found.items())
                print(f"{epochs} epochs, augment {augment}, seed {seed}: {figures}",
                      file=sys.stderr, flush=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
