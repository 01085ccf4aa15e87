#!/usr/bin/env python3
"""A short run over many seeds, webtrain against PyTorch: does a systematic difference hide in
the first hundred steps? Each side uses its own initialisation and shuffle from each seed.

  python3 bench/seeds.py [--seeds 10] [--webtrain target/debug/webtrain] [--data data/mnist]

The run: lenet, the first 4,000 training images, 1 epoch, batch 64, SGD lr 0.05
momentum 0.9, test accuracy on the first 1,000 test images, webtrain on its CPU backend.
Prints each seed's accuracies, then one JSON line with both means and standard deviations.
Needs torch (scripts/setup.sh bench puts it in $TORCH_VENV; run this with that python).
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_lenet import LeNet, load  # noqa: E402

TRAIN, TEST, BATCH, LR, MOMENTUM = 4000, 1000, 64, 0.05, 0.9


def pytorch(seed, x, y, xt, yt):
    torch.manual_seed(seed)
    model = LeNet()
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    perm = torch.randperm(TRAIN)
    for i in range(0, TRAIN, BATCH):
        b = perm[i:i + BATCH]
        opt.zero_grad()
        F.cross_entropy(model(x[b]), y[b]).backward()
        opt.step()
    with torch.no_grad():
        return 100.0 * (model(xt).argmax(1) == yt).sum().item() / TEST


def webtrain(seed, binary, data):
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            [binary, "train", "--data", data, "--model", "lenet", "--backend", "cpu",
             "--train-limit", str(TRAIN), "--test-limit", str(TEST), "--epochs", "1",
             "--batch-size", str(BATCH), "--lr", str(LR), "--momentum", str(MOMENTUM),
             "--seed", str(seed), "--out", f"{out}/run"],
            check=True, stdout=subprocess.DEVNULL)
        with open(f"{out}/run/metrics.json") as f:
            epoch = json.load(f)["epochs"][-1]
        return 100.0 * epoch["correct"] / epoch["total"]


def summary(values):
    return {"mean": statistics.mean(values), "stdev": statistics.stdev(values),
            "min": min(values), "max": max(values), "runs": values}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--webtrain", default=os.environ.get("WEBTRAIN", "target/debug/webtrain"))
    p.add_argument("--data", default="data/mnist")
    a = p.parse_args()
    x, y = load(a.data, "train-images-idx3-ubyte", "train-labels-idx1-ubyte")
    xt, yt = load(a.data, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
    x, y, xt, yt = x[:TRAIN], y[:TRAIN], xt[:TEST], yt[:TEST]
    ours, theirs = [], []
    for seed in range(1, a.seeds + 1):
        ours.append(webtrain(seed, a.webtrain, a.data))
        theirs.append(pytorch(seed, x, y, xt, yt))
        print(f"seed {seed}: webtrain {ours[-1]:.1f} %, pytorch {theirs[-1]:.1f} %", file=sys.stderr)
    report = {"torch": torch.__version__, "webtrain": summary(ours), "pytorch": summary(theirs)}
    report["mean_difference"] = report["webtrain"]["mean"] - report["pytorch"]["mean"]
    print(json.dumps(report))


if __name__ == "__main__":
    main()
