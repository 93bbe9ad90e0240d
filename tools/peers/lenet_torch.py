#!/usr/bin/python3
"""Peer baseline: the asgd-bench lenet trained in PyTorch on one process.

Same model and recipe as `asgd train --model lenet --dataset fashion-mnist`:
28x28x1 Fashion-MNIST (pixels / 255, per-pixel training-mean subtraction),
conv 5x5x32 pad 2 + ReLU + maxpool 2/2, conv 5x5x64 pad 2 + ReLU + maxpool 2/2,
fc 3136->1024 + ReLU, fc 1024->10, softmax cross-entropy (mean over the batch),
SGD with momentum and weight decay on every parameter, He-normal weights and
zero biases; minibatches are drawn from a seeded random permutation per epoch
(remainder dropped).

Only the --steps updates after --warmup untimed ones are timed: batch gathering
from the in-memory tensor, forward, backward and the optimizer step (the same
span as asgd's /updates/wall_s). Prints one JSON line.
"""

import argparse
import gzip
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    """Read an IDX file (optionally gzipped) into a numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError(f"{path}: not an IDX file")
    dtype = {0x08: np.uint8}.get(data[2])
    if dtype is None:
        raise ValueError(f"{path}: unsupported IDX element type 0x{data[2]:02x}")
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    body = np.frombuffer(data, dtype=dtype, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise ValueError(f"{path}: expected {int(np.prod(dims))} elements, found {body.size}")
    return body.reshape(dims)


def find(data_dir, stem):
    for name in (stem + ".gz", stem):
        p = os.path.join(data_dir, name)
        if os.path.exists(p):
            return p
    raise FileNotFoundError(f"{stem}(.gz) not found in {data_dir}")


def load_train(data_dir):
    x = read_idx(find(data_dir, "train-images-idx3-ubyte")).astype(np.float64) / 255.0
    y = read_idx(find(data_dir, "train-labels-idx1-ubyte")).astype(np.int64)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"{data_dir}: {x.shape[0]} images but {y.shape[0]} labels")
    x -= x.mean(axis=0, keepdims=True)  # per-pixel training mean, in double like asgd
    x = torch.from_numpy(x.astype(np.float32)).unsqueeze(1).contiguous()  # N x 1 x 28 x 28
    return x, torch.from_numpy(y)


class LeNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(64 * 7 * 7, 1024)
        self.fc2 = nn.Linear(1024, classes)
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                # std = sqrt(2 / fan_in), fan_in = in_channels * k * k or in_features
                nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
                nn.init.zeros_(m.bias)

    def forward(self, x):
        # relu after the pool, as asgd does: max and relu commute exactly
        x = F.relu(F.max_pool2d(self.conv1(x), 2, 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2, 2))
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


class Sampler:
    """One seeded permutation per epoch, consecutive batches, remainder dropped."""

    def __init__(self, n, batch, seed):
        if batch < 1 or batch > n:
            raise ValueError(f"batch {batch} must be in [1, {n}]")
        self.n, self.batch = n, batch
        self.gen = torch.Generator().manual_seed(seed)
        self.per_epoch = n // batch
        self.pos = self.per_epoch

    def next(self):
        if self.pos == self.per_epoch:
            self.perm = torch.randperm(self.n, generator=self.gen)
            self.pos = 0
        idx = self.perm[self.pos * self.batch:(self.pos + 1) * self.batch]
        self.pos += 1
        return idx


def train_step(model, opt, sampler, x_all, y_all):
    """One SGD step on the next minibatch of `sampler`; returns its training loss."""
    idx = sampler.next()
    xb = x_all.index_select(0, idx)
    yb = y_all.index_select(0, idx)
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(xb), yb)
    loss.backward()
    opt.step()
    return loss.item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist",
                    help="folder with the Fashion-MNIST IDX files (default: %(default)s)")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default: 1)")
    ap.add_argument("--steps", type=int, default=300, help="timed updates (default: 300)")
    ap.add_argument("--warmup", type=int, default=20, help="untimed updates first (default: 20)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=0.0005)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--loss-window", type=int, default=20,
                    help="final_loss is the mean training loss of the last this many updates")
    a = ap.parse_args()
    if a.steps < 1 or a.warmup < 0 or a.threads < 1 or a.loss_window < 1:
        ap.error("--steps, --threads and --loss-window must be >= 1, --warmup >= 0")

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    try:
        x_all, y_all = load_train(a.data_dir)
    except (OSError, ValueError) as e:
        print(f"lenet_torch: {e}", file=sys.stderr)
        return 1

    model = LeNet()
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum,
                          weight_decay=a.weight_decay)
    sampler = Sampler(x_all.shape[0], a.batch, a.seed)
    losses = []

    def step():
        losses.append(train_step(model, opt, sampler, x_all, y_all))

    for _ in range(a.warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    elapsed = time.perf_counter() - t0

    tail = losses[-a.loss_window:]
    print(json.dumps({
        "framework": "pytorch",
        "version": torch.__version__,
        "samples_per_s": a.steps * a.batch / elapsed,
        "steps": a.steps,
        "warmup": a.warmup,
        "batch": a.batch,
        "threads": torch.get_num_threads(),
        "train_time_s": elapsed,
        "final_loss": sum(tail) / len(tail),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
