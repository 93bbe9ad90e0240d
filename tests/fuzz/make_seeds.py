#!/usr/bin/env python3
"""Seed corpora of the fuzz targets (tests/fuzz; tools/fuzz.sh calls this).

  make_seeds.py --asgd BUILD/asgd --source REPO --out DIR

Writes DIR/<target>/ for each target from the project's own files and
bad-input cases (suites/*.yaml, tests/data/bad_suites, slurm/sites/*.yaml,
the hostile site of tests/slurm/injection.sh), the configurations `asgd train
--dry-run` prints, small IDX and CIFAR-10 files made here (valid ones and the
classic faults: cut short, bad magic, label out of range, counts that
disagree), and results and checkpoint files of short real `asgd train` runs
(single learner and virtual learners), with a checkpoint cut down to 6
weights by h5py so that its HDF5 structure, not its weights, is what the
fuzzer mutates. Multi-file inputs are encoded as fuzz_util.hpp's Pieces.
"""
import argparse
import gzip
import json
import random
import shutil
import struct
import subprocess
import sys
from pathlib import Path


def piece(b: bytes) -> bytes:
    """One piece of a multi-file input: backslashes doubled, then '\\ ' ends it."""
    return b.replace(b"\\", b"\\\\") + b"\\ "


def idx_images(n, h, w, pixels=None, magic=0x803):
    rnd = random.Random(n * 1000 + h * 10 + w)
    data = pixels if pixels is not None else bytes(rnd.randrange(256) for _ in range(n * h * w))
    return struct.pack(">IIII", magic, n, h, w) + data


def idx_labels(labels, n=None, magic=0x801):
    return struct.pack(">II", magic, len(labels) if n is None else n) + bytes(labels)


def cifar_batch(labels, seed=1):
    rnd = random.Random(seed)
    return b"".join(bytes([l]) + bytes(rnd.randrange(256) for _ in range(3072)) for l in labels)


class Seeds:
    def __init__(self, out: Path):
        self.out = out
        self.count = {}

    def add(self, target: str, name: str, data: bytes):
        d = self.out / target
        d.mkdir(parents=True, exist_ok=True)
        (d / name).write_bytes(data)
        self.count[target] = self.count.get(target, 0) + 1


def text_seeds(s: Seeds, src: Path):
    for f in sorted((src / "profiles").glob("*.yaml")):
        s.add("fuzz_profile", f.name, f.read_bytes())
    s.add("fuzz_profile", "calibrated.yaml", b"""name: "vm"
cores: {value: 2, measured: "affinity"}
waiting_rank_load: {value: 0.08, measured: "probe"}
compute:
  - model: lenet
    batch: 64
    device: cpu
    threads: 1
    seconds: {value: 0.0771, measured: "timed"}
    cv: {value: 0.004, measured: "timed"}
link:
  learner:
    latency_s: {value: 1.5e-07, measured: "probe"}
    bandwidth_Bps: {value: 1.8e+10, measured: "probe"}
  server:
    latency_s: {value: 1.5e-07, measured: "probe"}
    bandwidth_Bps: {value: 1.8e+10, measured: "probe"}
server:
  accumulate_s_per_param: {value: 2.1e-10, measured: "core"}
  update_s_per_param: {value: 4.1e-10, measured: "core"}
inject:
  update_s: {value: 0.1, assumed: "ASGD_INJECT_SERVER"}
  byte_s: {value: 0, assumed: "ASGD_INJECT_SERVER"}
""")
    for f in sorted((src / "suites").glob("*.yaml")) + sorted((src / "tests/data").glob("*.yaml")) + \
            sorted((src / "tests/data/bad_suites").glob("*.yaml")):
        s.add("fuzz_suite", f.parent.name + "_" + f.name, f.read_bytes())
    s.add("fuzz_suite", "virtual.yaml", b"""name: v
mode: virtual
base: {model: mlp, dataset: {kind: synthetic, shape: [8, 8, 1], classes: 4, n_train: 64, n_test: 16},
       batch: 16, epochs: 1, timing: fixed, compute_s: 0.01, comm_s: 0.001}
axes:
  learners: [1, 2, 4]
  protocol: [hardsync, softsync, nsync]
zip:
  - lr: [0.01, 0.02]
    n_sync: [1, 2]
exclude:
  - {learners: 1, protocol: softsync}
seeds: [1, 2]
target_error: 0.5
resources: {servers: 1, time_limit: "1-00:00:00", cpus_per_rank: 2, exclusive: true, max_parallel_tasks: 0}
""")
    s.add("fuzz_suite", "anchors.yaml", b"""name: &n anchors
base: &b {model: mlp, dataset: synthetic, epochs: 1}
axes: {learners: [1, 2], lr: [0.1, 1e-3, .5]}
seeds: [1]
description: *n
""")
    for f in sorted((src / "slurm/sites").glob("*.yaml")):
        s.add("fuzz_site", f.name, f.read_bytes())
    s.add("fuzz_site", "evil.yaml", b"""description: hostile values in every key
partition: 'gpu $(touch PWNED_p1) ; touch PWNED_p2'
account: 'acct''; touch PWNED_a1; echo '' # x \\ y'
mpi: 'pmi2 $(touch PWNED_m1); touch PWNED_m2 `touch PWNED_m3` && touch PWNED_m4 '' "'
modules: ['gcc/12 $(touch PWNED_mod1)', 'x''y; touch PWNED_mod2 #z']
sbatch: ['--comment=a b # c $(touch PWNED_s1) '' " \\ end', '--exclusive']
gpus_per_node: 0
exclusive: true
max_parallel_tasks: 2
""")
    s.add("fuzz_site", "control.yaml", b'partition: debug\nmpi: "pmi2\\ntouch x"\nmodules: ["gcc\\x7f"]\n')
    s.add("fuzz_site", "types.yaml", b"partition: [a]\ngpus_per_node: many\nexclusive: maybe\nmax_parallel_tasks: -1\nlerners: 2\n")


def bench_seeds(s: Seeds):
    """Google Benchmark JSON as compare and history read it."""
    ctx = {"date": "2026-01-01T00:00:00+00:00", "num_cpus": 2, "asgd_commit": "abc123", "asgd_cpu_model": "cpu",
           "asgd_blas_kernel": "Haswell"}
    rows = [{"name": "BM_Gemm/64", "run_name": "BM_Gemm/64", "run_type": "iteration", "iterations": 10,
             "real_time": 12.5, "cpu_time": 12.4, "time_unit": "us", "GFLOP/s": 41.9},
            {"name": "BM_Conv", "run_type": "iteration", "real_time": 3.0, "time_unit": "ms"}]
    aggs = [{"name": "BM_Pool_median", "run_name": "BM_Pool", "run_type": "aggregate", "aggregate_name": "median",
             "real_time": 5, "time_unit": "ns"},
            {"name": "BM_Pool_mean", "run_name": "BM_Pool", "run_type": "aggregate", "aggregate_name": "mean",
             "real_time": 6, "time_unit": "ns"}]
    s.add("fuzz_bench", "iterations.json", json.dumps({"context": ctx, "benchmarks": rows}).encode())
    s.add("fuzz_bench", "aggregates.json", json.dumps({"context": ctx, "benchmarks": aggs}).encode())
    s.add("fuzz_bench", "error.json", json.dumps({"benchmarks": [
        {"name": "BM_X", "error_occurred": True, "error_message": "out of memory"}]}).encode())
    s.add("fuzz_bench", "huge.json", b'{"benchmarks": [{"name": "BM_F", "GFLOP/s": 1.7e308}]}')
    s.add("fuzz_bench", "deep.json", b'{"benchmarks": [{"name": "BM_D", "real_time": ' + b"[" * 80 + b"]" * 80 + b"}]}")


def config_seeds(s: Seeds, asgd: str):
    option_sets = [
        [],
        ["--model", "mlp", "--dataset", "synthetic", "--synthetic-size", "8", "--synthetic-classes", "4"],
        ["--learners", "4", "--protocol", "softsync", "--n", "2", "--lr-policy", "staleness", "--lr-steps", "1", "2"],
        ["--learners", "3", "--protocol", "nsync", "--n-sync", "4", "--virtual", "--timing", "lognormal",
         "--compute-s", "0.01", "--comm-s", "0.002", "--straggler", "1", "--straggler-factor", "3"],
        ["--model", "cifar10-18pct", "--dataset", "cifar10", "--max-steps", "10", "--run-id", "r-1",
         "--suite", "s", "--warm-steps", "5", "--eval-samples", "100"],
    ]
    for i, opts in enumerate(option_sets):
        out = subprocess.run([asgd, "train", "--dry-run", *opts], capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"make_seeds.py: asgd train --dry-run {' '.join(opts)}: {out.stderr.strip()}")
        text = out.stdout.split("\nrun id:")[0]
        json.loads(text)
        s.add("fuzz_config", f"dry_run_{i}.json", text.encode())
    s.add("fuzz_config", "bad_types.json", b'{"model": 1, "batch": 1.5, "lr": "x", "dataset": {"kind": "mnist", '
          b'"shape": [1, 2]}, "lerners": 2, "seed": -1, "epochs": 1e400}')
    s.add("fuzz_config", "not_object.json", b"[1, 2, 3]")
    s.add("fuzz_config", "dataset_string.json", b'{"dataset": "synthetic", "virtual": true, "learners": 2}')


def data_seeds(s: Seeds):
    img, lab = idx_images(3, 4, 4), idx_labels([0, 9, 3])
    # fuzz_idx: flag, images, labels [, test images, test labels]
    for flag in (0, 1, 2, 3, 4, 7):
        s.add("fuzz_idx", f"pair_flag{flag}", bytes([flag]) + piece(img) + piece(lab))
    s.add("fuzz_idx", "train_test", b"\x04" + piece(img) + piece(lab) + piece(idx_images(2, 4, 4)) + idx_labels([1, 2]))
    s.add("fuzz_idx", "shape_mismatch", b"\x00" + piece(img) + piece(lab) + piece(idx_images(1, 2, 8)) + idx_labels([1]))
    s.add("fuzz_idx", "truncated_images", b"\x00" + piece(img[:-5]) + piece(lab))
    s.add("fuzz_idx", "trailing_bytes", b"\x00" + piece(img + b"xx") + piece(lab))
    s.add("fuzz_idx", "bad_magic", b"\x00" + piece(idx_images(3, 4, 4, magic=0x801)) + piece(lab))
    s.add("fuzz_idx", "label_range", b"\x00" + piece(img) + piece(idx_labels([0, 10, 255])))
    s.add("fuzz_idx", "count_mismatch", b"\x00" + piece(img) + piece(idx_labels([1, 2])))
    s.add("fuzz_idx", "zero_images", b"\x00" + piece(idx_images(0, 4, 4)) + piece(idx_labels([])))
    s.add("fuzz_idx", "zero_size", b"\x04" + piece(idx_images(2, 0, 5)) + piece(idx_labels([1, 2])))
    s.add("fuzz_idx", "huge_dims", b"\x00" + piece(struct.pack(">IIII", 0x803, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF)) +
          piece(idx_labels([1], n=0xFFFFFFFF)))
    s.add("fuzz_idx", "short_header", b"\x00" + piece(img[:10]) + piece(lab[:3]))
    # fuzz_idx_gz: flag, images.gz, labels.gz
    gi, gl = gzip.compress(img, mtime=0), gzip.compress(lab, mtime=0)
    s.add("fuzz_idx_gz", "pair", b"\x00" + piece(gi) + gl)
    s.add("fuzz_idx_gz", "pair_mean", b"\x04" + piece(gi) + gl)
    s.add("fuzz_idx_gz", "cut_stream", b"\x00" + piece(gi[: len(gi) // 2]) + gl)
    s.add("fuzz_idx_gz", "bad_crc", b"\x00" + piece(gi[:-8] + b"\0\0\0\0" + gi[-4:]) + gl)
    s.add("fuzz_idx_gz", "two_members", b"\x00" + piece(gzip.compress(img[:7], mtime=0) + gzip.compress(img[7:], mtime=0)) + gl)
    s.add("fuzz_idx_gz", "not_gzip", b"\x00" + piece(img) + lab)
    s.add("fuzz_idx_gz", "empty", b"\x00" + piece(b"") + b"")
    # fuzz_cifar: flag bit 0: one file for all six; else six pieces
    one = cifar_batch([3])
    s.add("fuzz_cifar", "one_record", b"\x01" + one)
    s.add("fuzz_cifar", "one_record_mean", b"\x03" + one)
    s.add("fuzz_cifar", "six_files", b"\x00" + b"".join(piece(cifar_batch([i], i)) for i in range(5)) + cifar_batch([9, 0], 7))
    s.add("fuzz_cifar", "truncated", b"\x01" + one[:-1])
    s.add("fuzz_cifar", "label_range", b"\x01" + bytes([10]) + one[1:])
    s.add("fuzz_cifar", "empty_file", b"\x00" + piece(one) + piece(b"") + piece(one) + piece(one) + piece(one) + one)


def h5_seeds(s: Seeds, asgd: str, work: Path):
    runs = {
        "single": ["--checkpoint-every", "1"],
        "virtual": ["--virtual", "--learners", "2", "--protocol", "softsync", "--timing", "fixed",
                    "--compute-s", "0.01", "--comm-s", "0.001", "--checkpoint-every", "1"],
    }
    base = ["train", "--model", "mlp", "--dataset", "synthetic", "--synthetic-size", "4", "--synthetic-classes", "3",
            "--synthetic-train", "32", "--synthetic-test", "8", "--batch", "8", "--epochs", "1", "--eval-every", "0.5",
            "-q"]
    try:
        import h5py
        import numpy as np
    except ImportError:
        sys.exit(f"make_seeds.py: needs h5py and numpy (python3-h5py) in {sys.executable}")
    for name, opts in runs.items():
        res = work / name
        shutil.rmtree(res, ignore_errors=True)
        out = subprocess.run([asgd, *base, *opts, "--results", str(res), "--run-id", name], capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"make_seeds.py: asgd train ({name}): {out.stderr.strip()}")
        result = res / "adhoc/runs" / f"{name}.h5"
        data = result.read_bytes()
        s.add("fuzz_results", f"{name}.h5", data)
        s.add("fuzz_results", f"{name}_cut.h5", data[: len(data) // 2])
        ck = res / "adhoc/checkpoints" / f"{name}.h5"
        if not ck.exists():
            sys.exit(f"make_seeds.py: asgd train ({name}) left no checkpoint at {ck}")
        small = work / f"{name}_small.h5"
        with h5py.File(ck, "r") as src, h5py.File(small, "w") as dst:
            for k, v in src.attrs.items():
                dst.attrs[k] = v
            dst.attrs["n_params"] = np.int64(6)
            for key in src:
                if key in ("weights", "momentum"):
                    dst.create_dataset(key, data=src[key][:6])
                else:
                    src.copy(src[key], dst, name=key)
        data = small.read_bytes()
        s.add("fuzz_checkpoint", f"{name}_small.h5", data)
        s.add("fuzz_checkpoint", f"{name}_small_cut.h5", data[: len(data) * 2 // 3])
        # a checkpoint is a foreign file for read_results
        s.add("fuzz_results", f"{name}_checkpoint_small.h5", data)
        # results files as foreign input for the checkpoint reader
        s.add("fuzz_checkpoint", f"{name}_results.h5", result.read_bytes())


def sbatch_seeds(s: Seeds):
    """Inputs of fuzz_sbatch: FuzzedDataProvider takes strings from the front
    (ConsumeRandomLengthString: '\\ ' ends one) and integers from the back."""
    def enc(mode=0, gpus=0, cpus=1, suite_limit=-1, site_limit=0, sx=False, ex=False, two=False, name=None,
            time=None, results="", self_="/opt/asgd/bin/asgd", partition="", account="", mpi="pmi2",
            filt="", desc="", modules=(), sbatch=()):
        front, back = [], []
        back += [mode, gpus, cpus - 1, suite_limit + 1, site_limit, int(sx), int(ex), int(two)]
        back.append(1 if name is not None else 0)
        if name is not None:
            front.append(name)
        back.append(1 if time is not None else 0)
        if time is not None:
            front.append(time)
        front += [results, self_, partition, account, mpi, filt, desc]
        out_front = b"".join(piece(x.encode()) for x in front)
        mods = b"".join(piece(x.encode()) for x in modules)
        sbs = b"".join(piece(x.encode()) for x in sbatch)
        # each sbatch entry: a bool first (0: the entry as given, no "--comment=" put before it)
        back_bytes = bytes(back) + bytes([len(modules)]) + bytes([len(sbatch)]) + bytes(len(sbatch))
        # integers are read from the end: the first one read is the last byte
        return out_front + mods + sbs + bytes(reversed(back_bytes))

    hostile = "res dir $(touch PWNED_r1) `touch PWNED_r2` ; touch PWNED_r3 && touch PWNED_r4 'q' \"dq\" #c %j"
    s.add("fuzz_sbatch", "plain", enc())
    s.add("fuzz_sbatch", "injection_site", enc(
        results=hostile, partition="gpu $(touch PWNED_p1) ; touch PWNED_p2",
        account="acct'; touch PWNED_a1; echo ' # x \\ y",
        mpi="pmi2 $(touch PWNED_m1); touch PWNED_m2 `touch PWNED_m3` && touch PWNED_m4 ' \"",
        modules=["gcc/12 $(touch PWNED_mod1)", "x'y; touch PWNED_mod2 #z"],
        sbatch=["--comment=a b # c $(touch PWNED_s1) ' \" \\ end", "--exclusive"], two=True, site_limit=1))
    s.add("fuzz_sbatch", "micro_filter", enc(mode=2, filt="BM_$(touch PWNED_f1)`touch PWNED_f2`;touch PWNED_f3 'q' %j",
                                           self_="/a b/$(x)/asgd", name="micro"))
    s.add("fuzz_sbatch", "virtual", enc(mode=1, cpus=4, sx=True, ex=True, time="1-00:00:00", desc="a 'b' \"c\""))
    s.add("fuzz_sbatch", "gpus", enc(mode=0, gpus=2, suite_limit=2, two=True, partition="a%jb", account="\\\\"))
    s.add("fuzz_sbatch", "control", enc(results="a\nb", mpi="x\ty"))
    s.add("fuzz_sbatch", "backslash", enc(results="back\\slash"))
    s.add("fuzz_sbatch", "name", enc(name="odd.name-1_x", time="00:00:01"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--asgd", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    out = Path(a.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    s = Seeds(out)
    work = out / ".work"
    work.mkdir()
    text_seeds(s, Path(a.source))
    config_seeds(s, a.asgd)
    data_seeds(s)
    h5_seeds(s, a.asgd, work)
    sbatch_seeds(s)
    bench_seeds(s)
    shutil.rmtree(work)
    print("make_seeds.py: " + ", ".join(f"{t} {n}" for t, n in sorted(s.count.items())))


if __name__ == "__main__":
    main()
