#!/usr/bin/python3
"""Peer baselines: the asgd-bench lenet trained by several PyTorch processes.

  ddp      DistributedDataParallel over gloo, one process per worker: every step
           all-reduces (averages) the workers' gradients, then each applies the
           same SGD step (synchronous, like asgd --protocol hardsync).
  hogwild  the model in shared memory (model.share_memory()); each worker runs
           its own SGD optimizer (own momentum buffers) on it without locks, as
           in the PyTorch mnist_hogwild example (asynchronous, like softsync).
  window   samples/s of an asgd results file over the updates after a warm-up.

Model, data, sampling and recipe come from lenet_torch.py; worker r samples
with seed + r. The data are loaded once and shared with the workers. Each worker
runs --warmup untimed steps, waits at a barrier, then runs --steps timed ones;
the window runs from the barrier to the end of the last worker's last step, and
samples_per_s = workers * steps * batch / window. Prints one JSON line.
"""

import argparse
import json
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lenet_torch import LeNet, Sampler, load_train, train_step  # noqa: E402


def train_steps(model, opt, sampler, x_all, y_all, count, losses):
    for _ in range(count):
        losses.append(train_step(model, opt, sampler, x_all, y_all))


def run_worker(rank, a, x_all, y_all, model, barrier, out):
    """One worker: warm-up, barrier, timed steps; writes (t0, t1, loss) to out[rank]."""
    torch.set_num_threads(a.threads)
    if a.mode == "ddp":
        torch.manual_seed(a.seed)
        dist.init_process_group("gloo", init_method=a.init_method, rank=rank,
                                world_size=a.workers)
        model = torch.nn.parallel.DistributedDataParallel(LeNet())  # broadcasts rank 0's
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum,
                          weight_decay=a.weight_decay)
    sampler = Sampler(x_all.shape[0], a.batch, a.seed + rank)
    losses = []
    train_steps(model, opt, sampler, x_all, y_all, a.warmup, losses)
    barrier.wait()
    t0 = time.perf_counter()  # CLOCK_MONOTONIC: comparable across processes
    train_steps(model, opt, sampler, x_all, y_all, a.steps, losses)
    t1 = time.perf_counter()
    tail = losses[-a.loss_window:]
    out[rank] = torch.tensor([t0, t1, sum(tail) / len(tail)], dtype=torch.float64)
    if a.mode == "ddp":
        dist.destroy_process_group()


def run_peer(a):
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    x_all, y_all = load_train(a.data_dir)
    x_all.share_memory_()
    y_all.share_memory_()
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(a.workers)
    out = torch.zeros(a.workers, 3, dtype=torch.float64).share_memory_()
    model = None
    if a.mode == "hogwild":
        model = LeNet()
        model.share_memory()
    with tempfile.TemporaryDirectory(prefix="distributed_torch.") as tmp:
        a.init_method = "file://" + os.path.join(tmp, "rendezvous")
        procs = [ctx.Process(target=run_worker, args=(r, a, x_all, y_all, model, barrier, out))
                 for r in range(a.workers)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        failed = [r for r, p in enumerate(procs) if p.exitcode != 0]
    if failed:
        raise RuntimeError(f"{a.mode} worker(s) {failed} failed (exit codes "
                           f"{[procs[r].exitcode for r in failed]})")
    window = float(out[:, 1].max() - out[:, 0].min())
    return {
        "framework": "pytorch",
        "version": torch.__version__,
        "mode": a.mode,
        "workers": a.workers,
        "samples_per_s": a.workers * a.steps * a.batch / window,
        "steps": a.steps,
        "warmup": a.warmup,
        "batch": a.batch,
        "threads": a.threads,
        "train_time_s": window,
        "final_loss": float(out[:, 2].mean()),
    }


def asgd_window(path, skip, loss_window):
    """samples/s over the updates after the first `skip` of an asgd results file."""
    import h5py
    with h5py.File(path, "r") as f:
        wall = f["updates/wall_s"][:]
        samples = f["updates/samples"][:]
        loss = f["updates/train_loss"][:]
        summary = float(f["summary"].attrs["samples_per_s"])
    if len(wall) <= skip:
        raise ValueError(f"{path} has {len(wall)} updates, need more than {skip}")
    t0 = wall[skip - 1] if skip > 0 else 0.0
    return {
        "framework": "asgd",
        "samples_per_s": float(samples[skip:].sum() / (wall[-1] - t0)),
        "summary_samples_per_s": summary,
        "updates": int(len(wall)),
        "train_time_s": float(wall[-1] - t0),
        "final_loss": float(loss[-loss_window:].mean()),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=("ddp", "hogwild", "window"))
    ap.add_argument("results", nargs="?", help="window: the asgd results .h5 file")
    ap.add_argument("--skip", type=int, default=0, help="window: untimed first updates")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist",
                    help="folder with the Fashion-MNIST IDX files (default: %(default)s)")
    ap.add_argument("--workers", type=int, default=2, help="processes (default: 2)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch intra-op threads per process (default: 1)")
    ap.add_argument("--steps", type=int, default=150, help="timed steps per worker (default: 150)")
    ap.add_argument("--warmup", type=int, default=10,
                    help="untimed steps per worker first (default: 10)")
    ap.add_argument("--batch", type=int, default=64, help="samples per worker step (default: 64)")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=0.0005)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--loss-window", type=int, default=20,
                    help="final_loss: mean training loss of the last this many steps (per "
                         "worker, averaged) or updates (window)")
    a = ap.parse_args()
    if a.loss_window < 1:
        ap.error("--loss-window must be >= 1")
    try:
        if a.mode == "window":
            if a.results is None or a.skip < 0:
                ap.error("window needs a results file and --skip >= 0")
            res = asgd_window(a.results, a.skip, a.loss_window)
        else:
            if a.results is not None:
                ap.error(f"{a.mode} takes no positional file")
            if min(a.workers, a.steps, a.threads) < 1 or a.warmup < 0:
                ap.error("--workers, --steps and --threads must be >= 1, --warmup >= 0")
            res = run_peer(a)
    except (OSError, ValueError, RuntimeError, KeyError) as e:
        print(f"distributed_torch: {e}", file=sys.stderr)
        return 1
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
