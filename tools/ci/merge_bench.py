#!/usr/bin/python3
"""Merge Google Benchmark JSON files (one per round of tools/ci/bench.sh) into one.

usage: merge_bench.py OUT.json IN.json [IN.json ...]

Keeps every iteration row of every input (aggregate rows are dropped: `asgd
compare` and `asgd history` use the iterations, and per-file aggregates of
several files would be wrong for the whole), the context of the first input
(its date: when the measurement started) plus asgd_rounds = the number of
inputs. Refuses inputs whose asgd_commit, asgd_cpu_model or asgd_blas_kernel
differ (exit 2): those are not repetitions of one measurement.
"""
import json
import os
import sys


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out, inputs = sys.argv[1], sys.argv[2:]
    merged = None
    rows = []
    for path in inputs:
        with open(path) as f:
            doc = json.load(f)
        if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
            print(f"merge_bench.py: {path}: not a Google Benchmark JSON file", file=sys.stderr)
            return 2
        ctx = doc.get("context", {})
        if merged is None:
            merged = {"context": dict(ctx)}
        else:
            for key in ("asgd_commit", "asgd_cpu_model", "asgd_blas_kernel"):
                if ctx.get(key) != merged["context"].get(key):
                    print(f"merge_bench.py: {path}: {key} {ctx.get(key)!r} differs from "
                          f"{merged['context'].get(key)!r} of {inputs[0]}", file=sys.stderr)
                    return 2
        rows += [b for b in doc["benchmarks"] if b.get("run_type", "iteration") != "aggregate"]
    merged["context"]["asgd_rounds"] = len(inputs)
    merged["benchmarks"] = rows
    tmp = f"{out}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(merged, f, indent=1)
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
