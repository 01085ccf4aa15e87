#!/usr/bin/env python3
"""The PyTorch peer of `webtrain bench`: the same LeNet, data, batch and optimizer as
reference/lenet_pytorch.py (PyTorch's MNIST example; its models are imported from there), timed
the way webtrain times itself, so the two figures compare like for like.

  python3 bench/pytorch_lenet.py --data data/mnist [--model lenet|lenet-small] [--device auto|cpu|cuda] [--warmup 20]
      [--steps 50] [--repeats 3] [--target-accuracy 98.5 --epochs 3]

Prints one JSON line: throughput (median of `repeats` windows of `steps` steps after the
warm-up, a loss read closing each window as webtrain's do) and, with --target-accuracy, the
training time (evaluation excluded) to the first epoch whose test accuracy reaches it.
"""
import argparse, gzip, json, os, statistics, sys, time

import numpy as np
import torch, torch.nn.functional as F, torch.optim as optim

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
from lenet_pytorch import LeNet, LeNetSmall  # noqa: E402


MODELS = {"lenet": LeNet, "lenet-small": LeNetSmall}


def idx_bytes(data, name):
    """An IDX file's bytes, raw or, when only that is there, gzipped (as webtrain reads them)."""
    if not os.path.exists(f"{data}/{name}") and os.path.exists(f"{data}/{name}.gz"):
        with gzip.open(f"{data}/{name}.gz") as f:
            return np.frombuffer(f.read(), dtype=np.uint8)
    return np.fromfile(f"{data}/{name}", dtype=np.uint8)


def load(data, images, labels):
    x = idx_bytes(data, images)[16:].reshape(-1, 1, 28, 28).astype(np.float32) / 255.0
    y = idx_bytes(data, labels)[8:].astype(np.int64)
    return torch.from_numpy((x - 0.1307) / 0.3081), torch.from_numpy(y)


def batches(n, bs, dev):
    """Shuffled batch indices, epoch after epoch, like the reference's loop."""
    while True:
        perm = torch.randperm(n, device=dev)
        for i in range(0, n - bs + 1, bs):
            yield perm[i:i + bs]


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def throughput(a, dev, x, y):
    model = MODELS[a.model]().to(dev)
    opt = optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    order = batches(len(x), a.batch_size, dev)

    def step():
        b = next(order)
        opt.zero_grad()
        loss = F.cross_entropy(model(x[b]), y[b])
        loss.backward()
        opt.step()
        return loss

    # Warm up as webtrain does: to a whole number of windows, then the step that starts the clock.
    warmup = max(1, -(-a.warmup // a.steps)) * a.steps
    for _ in range(warmup):
        step()
    step().item()
    sync(dev)
    windows = []
    for _ in range(a.repeats):
        start = time.perf_counter()
        for _ in range(a.steps - 1):
            step()
        step().item()
        sync(dev)
        windows.append(time.perf_counter() - start)
    median = statistics.median(windows)
    return {
        "warmup_steps": warmup + 1,
        "steps_per_window": a.steps,
        "batch_size": a.batch_size,
        "window_secs": windows,
        "samples_per_sec": a.steps * a.batch_size / median,
        "ms_per_step": 1000 * median / a.steps,
    }


def time_to_accuracy(a, dev, x, y, xt, yt):
    model = MODELS[a.model]().to(dev)
    opt = optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    training_secs, epochs, reached = 0.0, [], None
    for epoch in range(1, a.epochs + 1):
        sync(dev)
        start = time.perf_counter()
        perm = torch.randperm(len(x), device=dev)
        for i in range(0, len(x), a.batch_size):
            b = perm[i:i + a.batch_size]
            opt.zero_grad()
            F.cross_entropy(model(x[b]), y[b]).backward()
            opt.step()
        sync(dev)
        training_secs += time.perf_counter() - start
        with torch.no_grad():
            correct = (model(xt).argmax(1) == yt).sum().item()
        result = {"epoch": epoch, "accuracy": 100.0 * correct / len(xt), "training_secs": training_secs}
        epochs.append(result)
        if result["accuracy"] >= a.target_accuracy:
            reached = result
            break
    return {"target": a.target_accuracy, "epochs": epochs, "reached": reached}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="data/mnist")
    p.add_argument("--model", default="lenet", choices=MODELS)
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--target-accuracy", type=float)
    p.add_argument("--epochs", type=int, default=3)
    a = p.parse_args()
    # As many threads as cores, as webtrain's CPU backend uses.
    torch.set_num_threads(os.cpu_count())
    torch.manual_seed(a.seed)
    name = a.device if a.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    x, y = load(a.data, "train-images-idx3-ubyte", "train-labels-idx1-ubyte")
    xt, yt = load(a.data, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
    x, y, xt, yt = x.to(dev), y.to(dev), xt.to(dev), yt.to(dev)
    report = {
        "framework": "pytorch",
        "model": a.model,
        "version": torch.__version__,
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"CPU, {torch.get_num_threads()} threads",
        "throughput": throughput(a, dev, x, y),
        "time_to_accuracy": time_to_accuracy(a, dev, x, y, xt, yt) if a.target_accuracy else None,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
