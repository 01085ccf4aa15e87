#!/usr/bin/env python3
"""A "drawn-like" test set: MNIST's 10,000 test digits under fixed transforms of the kind that
digits drawn with a mouse or a finger show, one folder of IDX files per kind.

  python3 bench/drawn_like.py [--mnist data/mnist] [--out data/drawn-like]

Kinds (each digit i under each, the sign of a shift or slant alternating with i):
  off-centre  moved 4 px sideways and 3 px up or down
  small       shrunk to 70 %
  large       grown to 125 % (a digit filling the pad; an edge may be cut)
  slanted     sheared 20° one way or the other
  thick       strokes a pixel thicker (grey dilation, 3x3 cross)
  thin        strokes a pixel thinner (grey erosion, 2x2 square)

Each folder holds t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, and links to MNIST's
training pair so that `webtrain eval --data <folder>` reads it as a whole set. The transforms
sample bilinearly about the image's centre, as webtrain's augmentation does (blank beyond the
frame), with numpy alone (`scripts/setup.sh bench` installs it).
"""
import argparse, gzip, math, os, struct

import numpy as np

SIDE = 28


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic, count = struct.unpack(">II", data[:8])
    if magic == 2051:
        return np.frombuffer(data, np.uint8, offset=16).reshape(count, SIDE, SIDE)
    return np.frombuffer(data, np.uint8, offset=8)


def write_idx(path, array):
    if array.ndim == 3:
        header = struct.pack(">IIII", 2051, len(array), SIDE, SIDE)
    else:
        header = struct.pack(">II", 2049, len(array))
    with open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def find(folder, name):
    for candidate in (name, name + ".gz"):
        path = os.path.join(folder, candidate)
        if os.path.exists(path):
            return path
    raise SystemExit(f"{name} not in {folder} (make data downloads MNIST)")


def affine(images, matrices):
    """Each image under its forward 2x2 matrix and shift (pixels), about the centre:
    out(p) = in(M⁻¹ (p − c − shift) + c), bilinear, 0 beyond the frame."""
    n = len(images)
    c = (SIDE - 1) / 2
    ys, xs = np.mgrid[0:SIDE, 0:SIDE].astype(np.float64)
    out = np.zeros((n, SIDE, SIDE))
    padded = np.zeros((n, SIDE + 2, SIDE + 2))
    padded[:, 1:-1, 1:-1] = images
    for i, (m, shift) in enumerate(matrices):
        inv = np.linalg.inv(m)
        dx, dy = xs - c - shift[0], ys - c - shift[1]
        sx = inv[0, 0] * dx + inv[0, 1] * dy + c
        sy = inv[1, 0] * dx + inv[1, 1] * dy + c
        # Beyond a pixel of the frame, blank; within it, the padding reads as blank.
        sx = np.clip(sx, -1, SIDE) + 1
        sy = np.clip(sy, -1, SIDE) + 1
        x0 = np.clip(np.floor(sx).astype(int), 0, SIDE)
        y0 = np.clip(np.floor(sy).astype(int), 0, SIDE)
        fx, fy = sx - x0, sy - y0
        p = padded[i]
        out[i] = ((1 - fx) * (1 - fy) * p[y0, x0] + fx * (1 - fy) * p[y0, x0 + 1]
                  + (1 - fx) * fy * p[y0 + 1, x0] + fx * fy * p[y0 + 1, x0 + 1])
    return np.clip(np.rint(out), 0, 255)


def sign(i):
    return 1 if i % 2 == 0 else -1


def off_centre(images):
    return affine(images, [(np.eye(2), (4 * sign(i), 3 * sign(i // 2))) for i in range(len(images))])


def scaled(factor):
    return lambda images: affine(images, [(factor * np.eye(2), (0, 0))] * len(images))


def slanted(images):
    shear = math.tan(math.radians(20))
    return affine(images, [(np.array([[1, shear * sign(i)], [0, 1]]), (0, 0))
                           for i in range(len(images))])


def neighbours(images, offsets, pick):
    padded = np.pad(images.astype(np.int32), ((0, 0), (1, 1), (1, 1)))
    views = [padded[:, 1 + dy:1 + dy + SIDE, 1 + dx:1 + dx + SIDE] for dy, dx in offsets]
    return pick(np.stack(views), axis=0)


def thick(images):
    return neighbours(images, [(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)], np.max)


def thin(images):
    return neighbours(images, [(0, 0), (1, 0), (0, 1), (1, 1)], np.min)


KINDS = {
    "off-centre": off_centre,
    "small": scaled(0.7),
    "large": scaled(1.25),
    "slanted": slanted,
    "thick": thick,
    "thin": thin,
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mnist", default="data/mnist")
    p.add_argument("--out", default="data/drawn-like")
    a = p.parse_args()
    images = read_idx(find(a.mnist, "t10k-images-idx3-ubyte")).astype(np.float64)
    labels = read_idx(find(a.mnist, "t10k-labels-idx1-ubyte"))
    for kind, transform in KINDS.items():
        folder = os.path.join(a.out, kind)
        os.makedirs(folder, exist_ok=True)
        write_idx(os.path.join(folder, "t10k-images-idx3-ubyte"), transform(images))
        write_idx(os.path.join(folder, "t10k-labels-idx1-ubyte"), labels)
        for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"):
            target = find(a.mnist, name)
            link = os.path.join(folder, os.path.basename(target))
            if not os.path.lexists(link):
                os.symlink(os.path.abspath(target), link)
        print(f"{folder}: {len(labels)} digits")


if __name__ == "__main__":
    main()
