#!/usr/bin/env python3
"""Loads a run's model.safetensors into the PyTorch reference model, strictly, and checks that
PyTorch gets the test accuracy the run reported (metrics.json's last epoch). Then saves the
model as PyTorch writes it, to RUN/pytorch.safetensors, for `webtrain eval` to read back.

  $TORCH_VENV/bin/python scripts/check-pytorch-weights.py runs/<run> [--data data/mnist]

What a PyTorch user does with our weights is the two lines marked below.
"""
import argparse, json, sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from pytorch_lenet import MODELS, load  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("run", type=Path)
    p.add_argument("--data", default="data/mnist")
    a = p.parse_args()
    metrics = json.loads((a.run / "metrics.json").read_text())
    model = MODELS[metrics["config"]["model"]]()
    model.load_state_dict(load_file(a.run / "model.safetensors"))  # strict: every name and shape
    model.eval()
    reported = metrics["epochs"][-1]
    x, y = load(a.data, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
    x, y = x[:reported["total"]], y[:reported["total"]]
    with torch.no_grad():
        correct = (model(x).argmax(1) == y).sum().item()
    print(f"PyTorch: {correct}/{len(y)} correct; webtrain reported {reported['correct']}/{reported['total']}")
    save_file(model.state_dict(), a.run / "pytorch.safetensors")
    # Float sums in another order may flip a borderline image or two, no more.
    sys.exit(0 if abs(correct - reported["correct"]) <= 2 else 1)


if __name__ == "__main__":
    main()
