#!/usr/bin/env python3
"""{{title}}

The same run in PyTorch, with PyTorch's own classes: the model, MNIST as webtrain reads and
normalises it, the optimizer, schedule, weight decay, early stopping and augmentation of the
run, its seed, and webtrain's log lines. PyTorch draws its own initial weights and batches from
the seed, so the curve is another draw of the same run: the accuracy lands within the spread
over seeds, not on the same figure.

  python3 {{file}} [--data data/mnist] [--device cpu|cuda] [--out model.pt]

Needs torch{{needs}}. --data holds MNIST's four IDX files, raw or gzipped.{{not_reproduced}}
"""
import argparse, copy, gzip, math, os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset
{{imports}}
# The run's settings, as webtrain names them.
SEED = {{seed}}
EPOCHS = {{epochs}}
BATCH_SIZE = {{batch_size}}
LOG_INTERVAL = {{log_interval}}
TRAIN_LIMIT = {{train_limit}}  # the first N training images; None: all of them
TEST_LIMIT = {{test_limit}}  # the first N test images; None: all of them
FREEZE_CONV = {{freeze_conv}}  # the convolutions left as they are
# Early stopping, as Keras's EarlyStopping(restore_best_weights=True): after PATIENCE epochs
# without an improvement of more than MIN_DELTA, the run ends with the best epoch's model.
PATIENCE = {{patience}}  # None: never
MIN_DELTA = {{min_delta}}
STOP_ON = "{{stop_on}}"  # "loss": the test loss; "accuracy": the test accuracy in %

# MNIST's mean and standard deviation, as torchvision's MNIST examples normalise it.
PIXEL_MEAN, PIXEL_STD = 0.1307, 0.3081


{{model}}


def optimizer_for(parameters):
    return {{optimizer}}


def scheduler_for(optimizer, batches_per_epoch):
    """The schedule, and whether it steps once an epoch (else once a batch)."""
    return {{scheduler}}


def augmentation():
    """Each training image's random transform, on pixels from 0 to 1; None: none."""
    return {{augmentation}}


def idx(data, name):
    """An IDX file's bytes, raw or, when only that is there, gzipped."""
    path = os.path.join(data, name)
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        with gzip.open(path + ".gz") as f:
            return f.read()
    with open(path, "rb") as f:
        return f.read()


def mnist(data, prefix, limit):
    """Images as pixels from 0 (paper) to 1 (ink), and their labels."""
    images = torch.frombuffer(bytearray(idx(data, f"{prefix}-images-idx3-ubyte")), dtype=torch.uint8)
    labels = torch.frombuffer(bytearray(idx(data, f"{prefix}-labels-idx1-ubyte")), dtype=torch.uint8)
    images = images[16:].view(-1, 1, 28, 28).float() / 255.0
    labels = labels[8:].long()
    return images[:limit], labels[:limit]


class Digits(Dataset):
    """Images normalised as the model takes them, each transformed first when `transform` is."""

    def __init__(self, images, labels, transform=None):
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        image = self.images[i]
        if self.transform is not None:
            image = self.transform(image)
        return (image - PIXEL_MEAN) / PIXEL_STD, self.labels[i]


def evaluate(model, images, labels, device):
    """The mean cross-entropy and the number right."""
    model.eval()
    loss, correct = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(labels), 1000):
            x = ((images[start:start + 1000] - PIXEL_MEAN) / PIXEL_STD).to(device)
            y = labels[start:start + 1000].to(device)
            output = model(x)
            loss += F.cross_entropy(output, y, reduction="sum").item()
            correct += (output.argmax(1) == y).sum().item()
    return loss / len(labels), correct


def improved(value, best):
    if best is None:
        return math.isfinite(value)
    if STOP_ON == "loss":
        return value < best - MIN_DELTA
    return value > best + MIN_DELTA


def main():
    # argparse formats the description with %: a run named "50%" stays text.
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0].replace("%", "%%"))
    parser.add_argument("--data", default="data/mnist", help="MNIST's four IDX files")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, mps…")
    parser.add_argument("--out", help="where to save the model's state_dict")
    args = parser.parse_args()
    torch.manual_seed(SEED)
    device = torch.device(args.device)
    train_images, train_labels = mnist(args.data, "train", TRAIN_LIMIT)
    test_images, test_labels = mnist(args.data, "t10k", TEST_LIMIT)
    training = Digits(train_images, train_labels, augmentation())
    loader = DataLoader(training, batch_size=BATCH_SIZE, shuffle=True,
                        generator=torch.Generator().manual_seed(SEED))
    model = Model().to(device)
    if FREEZE_CONV:
        for parameter in [*model.conv1.parameters(), *model.conv2.parameters()]:
            parameter.requires_grad_(False)
    optimizer = optimizer_for([p for p in model.parameters() if p.requires_grad])
    scheduler, each_epoch = scheduler_for(optimizer, len(loader))
    best, best_epoch, best_weights, since_best = None, None, None, 0
    for epoch in range(1, EPOCHS + 1):
        model.train()
        for batch, (x, y) in enumerate(loader):
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            if batch % LOG_INTERVAL == 0 or batch + 1 == len(loader):
                if not math.isfinite(loss.item()):
                    print(f"Diverged: the loss is {loss.item()} at epoch {epoch}, batch {batch}")
                    return
            if batch % LOG_INTERVAL == 0:
                print(f"Train Epoch: {epoch} [{batch * BATCH_SIZE}/{len(training)} "
                      f"({100.0 * batch / len(loader):.0f}%)]\tLoss: {loss.item():.6f}")
            if scheduler is not None and not each_epoch:
                scheduler.step()
        if scheduler is not None and each_epoch:
            scheduler.step()
        test_loss, correct = evaluate(model, test_images, test_labels, device)
        total = len(test_labels)
        print(f"Test set: Average loss: {test_loss:.4f}, Accuracy: {correct}/{total} "
              f"({100.0 * correct / total:.2f}%)")
        if PATIENCE is None:
            continue
        value = test_loss if STOP_ON == "loss" else 100.0 * correct / total
        if improved(value, best):
            best, best_epoch, best_weights, since_best = value, epoch, copy.deepcopy(model.state_dict()), 0
            continue
        since_best += 1
        if since_best >= PATIENCE:
            break
    if best_weights is not None:
        model.load_state_dict(best_weights)
        why = "Early stopping: the test set stopped improving" if since_best >= PATIENCE else "Early stopping"
        what = f"test loss {best:.4f}" if STOP_ON == "loss" else f"test accuracy {best:.2f}%"
        print(f"{why}; keeping epoch {best_epoch}'s model, the best ({what})")
    if args.out:
        torch.save(model.state_dict(), args.out)
        print(f"Saved the model's state_dict to {args.out}")


if __name__ == "__main__":
    main()
