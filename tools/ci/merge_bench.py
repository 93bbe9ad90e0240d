#!/usr/bin/python3
"""Merge Google Benchmark JSON files (one per round of tools/ci/bench.sh) into one.

usage: merge_bench.py OUT.json IN.json [IN.json ...] [--all ALL.json]

OUT.json holds, per input file (round) and benchmark, ONE row: the median
repetition of that round (the iteration row with the median GFLOP/s, or the
median real_time for benchmarks without GFLOP/s; the lower middle one for an
even count), marked with asgd_round (1, 2, ...) and asgd_repetitions. The
repetitions of one round ran back to back, within seconds, and a disturbance
of the machine (another job) hits them together: they are not independent
samples, and `asgd compare`'s rank test would take them as such (on this
project's 2-core VM a same-commit comparison with every repetition as a sample
flagged three kernels at p = 0.02-0.03). One sample per round is what the
interleaving makes independent. --all ALL.json also writes every iteration
row (for looking at the spread; not for compare or history).

The context is the first input's (its date: when the measurement started) plus
asgd_rounds. Inputs whose asgd_commit, asgd_cpu_model or asgd_blas_kernel
differ are refused (exit 2): they are not rounds of one measurement.
"""
import json
import os
import sys


def value(row):
    for key in row:
        if key.lower() in ("gflop/s", "gflops") and isinstance(row[key], (int, float)):
            return row[key]
    return row.get("real_time", 0.0)


def write(path, doc):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)


def main():
    args = sys.argv[1:]
    all_path = None
    if "--all" in args:
        i = args.index("--all")
        if i + 1 >= len(args):
            print(__doc__, file=sys.stderr)
            return 2
        all_path = args[i + 1]
        del args[i:i + 2]
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out, inputs = args[0], args[1:]
    context = None
    medians, every = [], []
    for rnd, path in enumerate(inputs, 1):
        with open(path) as f:
            doc = json.load(f)
        if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
            print(f"merge_bench.py: {path}: not a Google Benchmark JSON file", file=sys.stderr)
            return 2
        ctx = doc.get("context", {})
        if context is None:
            context = dict(ctx)
        else:
            for key in ("asgd_commit", "asgd_cpu_model", "asgd_blas_kernel"):
                if ctx.get(key) != context.get(key):
                    print(f"merge_bench.py: {path}: {key} {ctx.get(key)!r} differs from "
                          f"{context.get(key)!r} of {inputs[0]}", file=sys.stderr)
                    return 2
        by_name = {}
        for b in doc["benchmarks"]:
            if b.get("run_type", "iteration") == "aggregate":
                continue
            b = dict(b, asgd_round=rnd)
            every.append(b)
            if b.get("error_occurred"):
                medians.append(b)  # kept: compare reports a benchmark that failed
                continue
            by_name.setdefault(b.get("run_name", b.get("name")), []).append(b)
        for name, rows in by_name.items():
            rows.sort(key=value)
            row = dict(rows[(len(rows) - 1) // 2], asgd_repetitions=len(rows))
            medians.append(row)
    context["asgd_rounds"] = len(inputs)
    write(out, {"context": dict(context, asgd_samples="median repetition of each round"), "benchmarks": medians})
    if all_path:
        write(all_path, {"context": dict(context, asgd_samples="every repetition"), "benchmarks": every})
    return 0


if __name__ == "__main__":
    sys.exit(main())
