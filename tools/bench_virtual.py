#!/usr/bin/env python3
"""Cost of virtual learners against a plain loop, and their memory.

    tools/bench_virtual.py [--gradients G] [--asgd PATH]

1. Overhead: `asgd train --virtual --learners L` (softsync n=L, so every
   gradient is one update) against `asgd train` with one learner (a plain
   loop: sample, forward, backward, update), the same model (cifar10-18pct on
   synthetic 32x32x3 data), batch and number of gradients, evaluation off.
   Wall time of each whole process, median of 3, and their ratio.
2. Peak resident memory of virtual runs with L = 30 and L = 256 learners.
3. Cost of the performance model (--profile): the virtual run of 1. on a
   machine profile (2 shards, links, 2 cores with a waiting-rank load)
   against the same run on the ideal clock, interleaved, median of 3.
   `--only model` runs this part alone.
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd):
    """Wall seconds and peak RSS (MiB) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True,
                       env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"bench_virtual.py: {' '.join(cmd)} failed:\n{p.stderr}")
    # ru_maxrss of children is the max over all children so far: run the
    # memory cases in increasing size so each reading is its own.
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, max(peak, before) / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--gradients", type=int, default=600)
    ap.add_argument("--asgd", default=os.path.join(ROOT, "build/default/asgd"))
    ap.add_argument("--only", choices=["model"], help="run one part alone")
    args = ap.parse_args()
    if not os.access(args.asgd, os.X_OK):
        sys.exit(f"bench_virtual.py: {args.asgd} not built (cmake --build --preset default)")
    with tempfile.TemporaryDirectory() as tmp:
        base = [args.asgd, "train", "--model", "cifar10-18pct", "--dataset", "synthetic",
                "--synthetic-size", "32", "--synthetic-channels", "3", "--synthetic-train", "8192",
                "--synthetic-test", "64", "--batch", "16", "--eval-every", "1000", "--epochs", "100",
                "--max-steps", str(args.gradients), "--checkpoint-every", "0", "-q",
                "--results", tmp]
        virt_args = ["--virtual", "--learners", "30", "--protocol", "softsync", "--n", "30"]
        if args.only == "model":
            return model_cost(base, virt_args, tmp, args.gradients)
        plain, virt = [], []
        for i in range(3):
            plain.append(run(base + ["--run-id", f"plain{i}"])[0])
            virt.append(run(base + ["--virtual", "--learners", "30", "--protocol", "softsync",
                                    "--n", "30", "--timing", "fixed", "--compute-s", "0.01",
                                    "--comm-s", "0.001", "--run-id", f"virt{i}"])[0])
        p, v = statistics.median(plain), statistics.median(virt)
        print(f"{args.gradients} gradients of cifar10-18pct, batch 16 (whole process, median of 3):")
        print(f"  plain loop, 1 learner        {p:7.2f} s")
        print(f"  virtual, 30 learners         {v:7.2f} s")
        print(f"  ratio virtual / plain        {v / p:7.3f}")
        print("peak resident memory, virtual cifar10-18pct (89,578 parameters):")
        for learners in (30, 256):
            _, rss = run(base[:-2] + ["--results", tmp, "--max-steps", "300", "--virtual",
                                      "--learners", str(learners), "--batch", "4", "--protocol",
                                      "softsync", "--n", str(learners), "--timing", "fixed",
                                      "--compute-s", "0.01", "--comm-s", "0.001",
                                      "--run-id", f"mem{learners}"])
            print(f"  L = {learners:3d}: {rss:8.1f} MiB")
        model_cost(base, virt_args, tmp, args.gradients)
    return 0


PROFILE = """name: bench
cores: {value: 2, assumed: "bench"}
waiting_rank_load: {value: 0.08, assumed: "bench"}
compute:
  - model: cifar10-18pct
    batch: 16
    seconds: {value: 0.01, assumed: "bench"}
    cv: {value: 0.1, assumed: "bench"}
link:
  learner: {latency_s: {value: 1e-6, assumed: "bench"}, bandwidth_Bps: {value: 1e+10, assumed: "bench"}}
  server: {latency_s: {value: 1e-6, assumed: "bench"}, bandwidth_Bps: {value: 2e+10, assumed: "bench"}}
server:
  accumulate_s_per_param: {value: 2e-10, assumed: "bench"}
  update_s_per_param: {value: 4e-10, assumed: "bench"}
"""


def model_cost(base, virt_args, tmp, gradients):
    """Part 3: wall time with the performance model against without."""
    profile = os.path.join(tmp, "bench.yaml")
    with open(profile, "w") as f:
        f.write(PROFILE)
    ideal, model = [], []
    for i in range(3):
        ideal.append(run(base + virt_args + ["--servers", "2", "--timing", "normal", "--compute-s", "0.01",
                                             "--comm-s", "0.001", "--run-id", f"ideal{i}"])[0])
        model.append(run(base + virt_args + ["--servers", "2", "--timing", "normal", "--profile", profile,
                                             "--run-id", f"model{i}"])[0])
    a, b = statistics.median(ideal), statistics.median(model)
    print(f"performance model, {gradients} gradients, 30 virtual learners, 2 shards (median of 3):")
    print(f"  ideal clock                  {a:7.2f} s")
    print(f"  on a profile                 {b:7.2f} s")
    print(f"  ratio profile / ideal        {b / a:7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
