#!/usr/bin/env python3
"""MPI tests of the async-SGD core: each case launches real `mpiexec -n N asgd
train` runs on synthetic data and checks the HDF5 results with h5py.

    check_mpi.py CASE --asgd PATH --mpiexec PATH      (ctest runs one case each)
    check_mpi.py --list
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

ARGS = None
SYN = ["--dataset", "synthetic", "--synthetic-size", "12", "--synthetic-train", "512",
       "--synthetic-test", "64", "--epochs", "1", "-q", "--threads", "1"]


def run(n, *extra, results, check=True):
    cmd = [ARGS.mpiexec, "-n", str(n), ARGS.asgd, "train", *SYN, "--results", results, *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def single(*extra, results):
    cmd = [ARGS.asgd, "train", *SYN, "--results", results, *extra]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)


def weights(results, run_id, shards=1):
    parts = []
    for k in range(shards):
        name = f"{run_id}.h5" if k == 0 else f"{run_id}.shard{k}.h5"
        with h5py.File(os.path.join(results, "adhoc", "checkpoints", name)) as f:
            parts.append(f["weights"][:])
    return np.concatenate(parts)


def result(results, run_id):
    f = h5py.File(os.path.join(results, "adhoc", "runs", f"{run_id}.h5"))
    return {
        "status": f.attrs["status"],
        "gradients": f["updates/gradients"][:],
        "mean_tau": f["updates/mean_tau"][:],
        "samples": f["updates/samples"][:],
        "clock": f["updates/clock"][:],
        "hist": f["staleness/histogram"][:],
        "l_grads": f["learners/gradients"][:],
        "l_samples": f["learners/samples"][:],
        "evals": f["evals/test_error"][:],
    }


def check_invariants(r, c, learners, mu):
    updates = len(r["clock"])
    assert r["status"] == "completed", r["status"]
    assert updates > 0
    assert (r["clock"] == np.arange(1, updates + 1)).all(), "clock must count updates"
    assert (r["gradients"] == c).all(), f"every update uses c={c} gradients: {set(r['gradients'])}"
    assert r["hist"].sum() == updates * c, f"histogram holds {r['hist'].sum()} != {updates}*{c}"
    assert r["l_grads"].sum() == updates * c, "gradients received == updates * c"
    assert r["l_samples"].sum() == r["samples"].sum(), "learner samples == server samples"
    assert len(r["l_grads"]) == learners
    assert (r["mean_tau"] >= 0).all(), "tau >= 0"
    assert (r["samples"] == c * mu).all() or r["samples"].sum() > 0


def case_hardsync_equivalence(tmp):
    """hardsync with L=2 (S=1 and S=2) equals one learner with batch 2*mu."""
    single("--model", "lenet", "--batch", "32", "--run-id", "one", results=tmp)
    run(3, "--model", "lenet", "--batch", "16", "--learners", "2", "--protocol", "hardsync",
        "--run-id", "hs", results=tmp)
    run(4, "--model", "lenet", "--batch", "16", "--learners", "2", "--servers", "2",
        "--protocol", "hardsync", "--run-id", "hs2", results=tmp)
    a = weights(tmp, "one")
    for run_id, shards in (("hs", 1), ("hs2", 2)):
        b = weights(tmp, run_id, shards)
        diff = np.abs(a - b).max()
        assert diff < 1e-5, f"{run_id}: max weight difference {diff}"
        print(f"{run_id}: {len(b)} weights, max |difference| to single learner {diff:.2e}")


def case_hardsync_invariants(tmp):
    run(3, "--model", "mlp", "--batch", "16", "--learners", "2", "--protocol", "hardsync",
        "--run-id", "h", results=tmp)
    r = result(tmp, "h")
    check_invariants(r, 2, 2, 16)
    assert len(r["hist"]) == 1, f"hardsync tau must be 0: histogram {r['hist']}"
    assert (r["l_grads"] == len(r["clock"])).all(), "one gradient per learner per update"


def case_softsync_invariants(tmp):
    for n, servers in ((1, 1), (2, 1), (2, 2)):
        run_id = f"s{n}_{servers}"
        run(2 + servers, "--model", "mlp", "--batch", "16", "--learners", "2", "--servers",
            str(servers), "--protocol", "softsync", "--n", str(n), "--run-id", run_id, results=tmp)
        r = result(tmp, run_id)
        c = 2 // n
        check_invariants(r, c, 2, 16)
        if n == 1:
            assert len(r["hist"]) <= 3, f"1-softsync tau in {{0,1,2}}: {r['hist']}"
        print(f"softsync n={n} S={servers}: {len(r['clock'])} updates, histogram {list(r['hist'])}")


def case_nsync(tmp):
    run(3, "--model", "mlp", "--batch", "16", "--learners", "2", "--protocol", "nsync",
        "--n-sync", "4", "--run-id", "ns", results=tmp)
    r = result(tmp, "ns")
    check_invariants(r, 1, 2, 16)
    assert (r["samples"] == 4 * 16).all(), "each push carries n_sync*mu samples"
    assert r["evals"][-1] < 0.5, f"nsync must learn: final error {r['evals'][-1]}"


def case_rate_policies(tmp):
    for policy in ("staleness", "mean-staleness"):
        run(3, "--model", "mlp", "--batch", "16", "--learners", "2", "--protocol", "softsync",
            "--n", "2", "--lr-policy", policy, "--run-id", policy, results=tmp)
        r = result(tmp, policy)
        check_invariants(r, 1, 2, 16)
        assert r["evals"][-1] < 0.5, f"{policy} must learn: final error {r['evals'][-1]}"


def case_refusals(tmp):
    """Refused before any rank starts work: one line, non-zero exit."""
    bad = [
        (3, ["--learners", "2", "--protocol", "softsync", "--n", "3"], "softsync n 3"),
        (3, ["--learners", "2", "--protocol", "nsync", "--n-sync", "0"], "n_sync 0"),
        (3, ["--learners", "2", "--servers", "0"], "servers 0"),
        (3, ["--learners", "0"], "learners 0"),
        (3, ["--learners", "1"], "started with 3 MPI ranks"),
    ]
    for n, extra, want in bad:
        p = run(n, "--model", "mlp", *extra, results=tmp, check=False)
        lines = p.stderr.strip().splitlines()
        assert p.returncode != 0, f"{extra}: exit 0"
        assert len(lines) == 1 and want in lines[0], f"{extra}: stderr {p.stderr!r}"
        print(f"refused {extra}: {lines[0]}")
    assert not os.path.exists(os.path.join(tmp, "adhoc", "runs")) or \
        not os.listdir(os.path.join(tmp, "adhoc", "runs")), "a refused run wrote a result"


def case_corrupt_checkpoint(tmp):
    os.makedirs(os.path.join(tmp, "adhoc", "checkpoints"))
    path = os.path.join(tmp, "adhoc", "checkpoints", "cc.shard1.h5")
    with open(path, "w") as f:
        f.write("garbage")
    p = run(4, "--model", "mlp", "--learners", "2", "--servers", "2", "--run-id", "cc",
            results=tmp, check=False)
    lines = p.stderr.strip().splitlines()
    assert p.returncode != 0 and len(lines) == 1 and "cc.shard1.h5" in lines[0], p.stderr
    assert open(path).read() == "garbage"
    print(f"refused: {lines[0]}")


def case_kill_resume(tmp):
    """kill -9 of every rank mid-run, same command again: resumes and completes."""
    extra = ["--model", "lenet", "--batch", "16", "--learners", "2", "--protocol", "softsync",
             "--n", "2", "--epochs", "6", "--synthetic-size", "28", "--synthetic-train", "1024",
             "--checkpoint-every", "20", "--run-id", "kr"]
    cmd = [ARGS.mpiexec, "-n", "3", ARGS.asgd, "train", *SYN, "--results", tmp, *extra]
    ckpt = os.path.join(tmp, "adhoc", "checkpoints", "kr.h5")
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    deadline = time.time() + 120
    while not os.path.exists(ckpt) and p.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert os.path.exists(ckpt), "no checkpoint before the kill"
    assert not os.path.exists(os.path.join(tmp, "adhoc", "runs", "kr.h5")), "finished too early"
    with h5py.File(ckpt) as f:
        at = int(f.attrs["clock"])
    again = subprocess.run([c for c in cmd if c != "-q"], capture_output=True,
                           text=True, timeout=300, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    assert again.returncode == 0, again.stderr
    assert "resuming kr from its checkpoints" in again.stdout + again.stderr, again.stderr
    r = result(tmp, "kr")
    check_invariants(r, 1, 2, 16)
    assert r["clock"][-1] > at
    print(f"killed with a checkpoint at update {at}; resumed to update {r['clock'][-1]}")


def case_message_transport(tmp):
    """The message-only path (ASGD_SHM=0, what ranks on different nodes use): the
    equivalence and invariant checks again."""
    os.environ["ASGD_SHM"] = "0"
    for name, case in (("eq", case_hardsync_equivalence), ("soft", case_softsync_invariants),
                       ("nsync", case_nsync)):
        sub = os.path.join(tmp, name)
        os.makedirs(sub)
        case(sub)


def virtual(*extra, results):
    cmd = [ARGS.asgd, "train", *SYN, "--results", results, "--virtual", *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")


def datasets(results, run_id):
    with h5py.File(os.path.join(results, "adhoc", "runs", f"{run_id}.h5")) as f:
        out = {}
        f.visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
        return out


def case_virtual_repeatable(tmp):
    """Same seed and config: bit-identical result datasets (timing given, not measured)."""
    extra = ["--model", "mlp", "--batch", "8", "--learners", "6", "--protocol", "softsync",
             "--n", "3", "--timing", "lognormal", "--compute-s", "0.02", "--comm-s", "0.001",
             "--lr-policy", "staleness"]
    virtual(*extra, "--run-id", "a", results=tmp)
    virtual(*extra, "--run-id", "b", results=tmp)
    a, b = datasets(tmp, "a"), datasets(tmp, "b")
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(a[k], b[k], equal_nan=True), f"{k} differs between repeats"
    print(f"{len(a)} datasets bit-identical over two runs")


def case_virtual_equals_mpi_hardsync(tmp):
    extra = ["--model", "lenet", "--batch", "16", "--learners", "2", "--protocol", "hardsync"]
    virtual(*extra, "--timing", "fixed", "--compute-s", "0.01", "--comm-s", "0.001",
            "--run-id", "v", results=tmp)
    run(3, *extra, "--run-id", "m", results=tmp)
    diff = np.abs(weights(tmp, "v") - weights(tmp, "m")).max()
    assert diff < 1e-6, f"virtual vs MPI hardsync differ by {diff}"
    print(f"virtual hardsync vs MPI hardsync: max weight difference {diff:.1e}")


def case_virtual_staleness(tmp):
    """Identical learners: n-softsync mean tau within 20% of n, P(tau > 2n) < 1%;
    1-softsync tau in {0, 1, 2}."""
    for n in (1, 2, 4, 10, 30):
        virtual("--model", "mlp", "--synthetic-size", "8", "--synthetic-train", "4096",
                "--epochs", "2", "--batch", "4", "--learners", "30", "--protocol", "softsync",
                "--n", str(n), "--timing", "normal", "--compute-cv", "0.1", "--compute-s", "0.01",
                "--comm-s", "0.0005", "--run-id", f"n{n}", results=tmp)
        r = result(tmp, f"n{n}")
        check_invariants(r, 30 // n, 30, 4)
        h = r["hist"]
        tau = np.arange(len(h))
        mean = (h * tau).sum() / h.sum()
        tail = h[tau > 2 * n].sum() / h.sum()
        print(f"n={n}: mean tau {mean:.2f}, P(tau > 2n) {tail:.4f}, histogram {list(h)}")
        assert abs(mean - n) <= 0.2 * n, f"n={n}: mean tau {mean}"
        assert tail < 0.01, f"n={n}: P(tau > 2n) = {tail}"
        if n == 1:
            assert len(h) <= 3, f"1-softsync tau beyond 2: {list(h)}"


def case_virtual_straggler(tmp):
    """A learner 4x slower pushes fewer gradients and its gradients are staler."""
    virtual("--model", "mlp", "--synthetic-size", "8", "--synthetic-train", "2048", "--batch", "4",
            "--learners", "8", "--protocol", "softsync", "--n", "8", "--timing", "fixed",
            "--compute-s", "0.01", "--comm-s", "0.0005", "--straggler", "3",
            "--straggler-factor", "4", "--run-id", "st", results=tmp)
    r = result(tmp, "st")
    g = r["l_grads"]
    others = np.delete(g, 3)
    assert g[3] < 0.35 * others.mean(), f"straggler counts {list(g)}"
    h = r["hist"]
    assert len(h) - 1 >= 4 * 8 * 0.75, f"no stale tail in histogram {list(h)}"
    print(f"gradients per learner {list(g)}; histogram tail up to tau={len(h) - 1}")


def summary(results, run_id):
    with h5py.File(os.path.join(results, "adhoc", "runs", f"{run_id}.h5")) as f:
        return {k: v for k, v in f["summary"].attrs.items()}, f["updates/wall_s"][:], f["evals/wall_s"][:]


def case_virtual_clock(tmp):
    """Fixed timing: every protocol and n_sync trains at L x batch / compute_s
    samples/s (each local step of nsync costs its own compute time; it once
    cost one per cycle, n_sync times too fast). Warm-up steps are on the
    clock: warm_up_s = steps x compute_s, before the first update."""
    L, mu, compute = 4, 8, 0.01
    base = ["--model", "mlp", "--synthetic-size", "8", "--synthetic-train", "3200", "--batch", str(mu),
            "--learners", str(L), "--timing", "fixed", "--compute-s", str(compute),
            "--comm-s", "0.000001"]
    want = L * mu / compute
    for name, extra in (("ns1", ["--protocol", "nsync", "--n-sync", "1"]),
                        ("ns10", ["--protocol", "nsync", "--n-sync", "10"]),
                        ("ns4", ["--protocol", "nsync", "--n-sync", "4"]),
                        ("soft", ["--protocol", "softsync", "--n", "4"]),
                        ("hard", ["--protocol", "hardsync"])):
        virtual(*base, *extra, "--run-id", name, results=tmp)
        s, _, _ = summary(tmp, name)
        rate = s["samples_per_s"]
        print(f"{name}: {rate:.0f} samples/s (want {want:.0f})")
        assert abs(rate - want) <= 0.01 * want, f"{name}: {rate} samples/s, want {want}"
    virtual(*base, "--protocol", "softsync", "--n", "4", "--warm-steps", "50", "--run-id", "warm",
            results=tmp)
    s, upd, ev = summary(tmp, "warm")
    assert abs(s["warm_up_s"] - 50 * compute) < 1e-9, s["warm_up_s"]
    assert upd[0] >= 50 * compute, f"first update at {upd[0]} s, before the warm-up ended"
    assert s["train_time_s"] >= s["warm_up_s"]
    print(f"warm start: warm_up_s {s['warm_up_s']}, first update at {upd[0]:.3f}s")


CASES = {k[len("case_"):]: v for k, v in globals().items() if k.startswith("case_")}


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("case", nargs="?", choices=sorted(CASES))
    ap.add_argument("--asgd")
    ap.add_argument("--mpiexec", default="mpiexec")
    ap.add_argument("--list", action="store_true")
    ARGS = ap.parse_args()
    if ARGS.list or not ARGS.case:
        print("\n".join(sorted(CASES)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        CASES[ARGS.case](tmp)
    print(f"{ARGS.case}: 1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
