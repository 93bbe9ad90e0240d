#!/usr/bin/env python3
"""MPI tests of the async-SGD core: each case launches real `mpiexec -n N asgd
train` runs on synthetic data and checks the HDF5 results with h5py.

    check_mpi.py CASE --asgd PATH --mpiexec PATH [--budget SECONDS]   (ctest runs one case each)
    check_mpi.py --list

Every check raises CheckFailed (never a bare `assert`, which `python -O`
removes). Every process a case starts runs in its own session (process
group); a run that outlives its time is killed with its whole group, mpiexec
gets MPIEXEC_TIMEOUT, and a case gives up before --budget seconds (keep it
below the ctest TIMEOUT), so no hung rank survives into a later test.
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
EXIT_BAD_INPUT = 2          # docs/TRAIN.md: 2 for bad input, 1 for other failures
RUN_LIMIT_S = 240           # one run (mpiexec or a single process) at most
DEADLINE = None             # time.monotonic() by which the case must be done
LIVE_GROUPS = set()         # process groups of runs still going


class CheckFailed(Exception):
    """A check of this test failed."""


def check(cond, msg):
    """Fails the case with msg (a string, or a callable making one) unless cond."""
    if not cond:
        raise CheckFailed(msg() if callable(msg) else msg)


# ------------------------------------------------------------------ processes

def kill_group(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    LIVE_GROUPS.discard(pgid)


def kill_all_groups(*_):
    for g in list(LIVE_GROUPS):
        kill_group(g)


def time_left():
    return DEADLINE - time.monotonic()


def run_env(timeout, extra_env=None):
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", **(extra_env or {})}
    # hydra's own limit: it ends every rank of the job itself (a little before ours)
    env["MPIEXEC_TIMEOUT"] = str(max(1, int(timeout) - 5))
    return env


def start(cmd, extra_env=None, stdout=subprocess.PIPE, stderr=subprocess.PIPE):
    """Starts cmd in a session of its own (its ranks share its process group)."""
    timeout = min(RUN_LIMIT_S, time_left() - 5)
    check(timeout > 10, f"the case's budget of {ARGS.budget}s is spent; not starting {' '.join(cmd)}")
    p = subprocess.Popen(cmd, stdout=stdout, stderr=stderr, text=True,
                         env=run_env(timeout, extra_env), start_new_session=True)
    LIVE_GROUPS.add(p.pid)
    return p, timeout


def launch(cmd, extra_env=None):
    """Runs cmd to its end; returns (exit code, stdout, stderr). A run past its
    time is killed with its whole process group and fails the case."""
    p, timeout = start(cmd, extra_env)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(p.pid)
        out, err = p.communicate()
        raise CheckFailed(f"{' '.join(cmd)}: still running after {timeout:.0f}s; killed its "
                          f"process group\n{out[-2000:]}\n{err[-2000:]}")
    finally:
        kill_group(p.pid)  # any rank that outlived mpiexec goes too
    return p.returncode, out, err


def run(n, *extra, results, check_rc=True, extra_env=None):
    cmd = [ARGS.mpiexec, "-n", str(n), ARGS.asgd, "train", *SYN, "--results", results, *extra]
    rc, out, err = launch(cmd, extra_env)
    check(not check_rc or rc == 0, lambda: f"{' '.join(cmd)} failed ({rc}):\n{out}\n{err}")
    return rc, out, err


def single(*extra, results):
    cmd = [ARGS.asgd, "train", *SYN, "--results", results, *extra]
    rc, out, err = launch(cmd)
    check(rc == 0, lambda: f"{' '.join(cmd)} failed ({rc}):\n{out}\n{err}")


def virtual(*extra, results):
    cmd = [ARGS.asgd, "train", *SYN, "--results", results, "--virtual", *extra]
    rc, out, err = launch(cmd)
    check(rc == 0, lambda: f"{' '.join(cmd)} failed ({rc}):\n{err}")


# ------------------------------------------------------------------ results

def weights(results, run_id, shards=1):
    parts = []
    for k in range(shards):
        name = f"{run_id}.h5" if k == 0 else f"{run_id}.shard{k}.h5"
        with h5py.File(os.path.join(results, "adhoc", "checkpoints", name)) as f:
            parts.append(f["weights"][:])
    return np.concatenate(parts)


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def result(results, run_id):
    with h5py.File(os.path.join(results, "adhoc", "runs", f"{run_id}.h5")) as f:
        ln = f["learners"]
        return {
            "status": text(f.attrs["status"]),
            "mode": text(f.attrs["mode"]),
            # "shared-memory" / "messages" (MPI) or "none" (single, virtual); None: not recorded
            "transport": text(f.attrs["transport"]) if "transport" in f.attrs else None,
            "config": text(f.attrs["config"]),
            "gradients": f["updates/gradients"][:],
            "mean_tau": f["updates/mean_tau"][:],
            "rate": f["updates/rate"][:],
            "samples": f["updates/samples"][:],
            "clock": f["updates/clock"][:],
            "wall_s": f["updates/wall_s"][:],
            "hist": f["staleness/histogram"][:],
            "learner": ln["learner"][:],
            "l_grads": ln["gradients"][:],
            "l_samples": ln["samples"][:],
            # what each learner says it pushed (its own count, from its bye); MPI runs only
            "pushed": ln["pushed"][:] if "pushed" in ln else None,
            "evals": f["evals/test_error"][:],
            "eval_clock": f["evals/clock"][:],
        }


def check_invariants(r, c, learners, per_gradient, protocol):
    """Exact invariants of one finished run with L = learners, c gradients per
    update, per_gradient samples in each gradient (mu, or n_sync x mu).

    The histogram, /updates and the per-learner gradient and sample counts all
    come from server 0's loop; the learners' own push counts (/learners/pushed,
    from their bye messages) are the independent side. A push that reaches the
    server after it stopped is answered "stop" and not applied, and a learner
    stops at its first "stop": so each learner pushed what was applied plus at
    most one, and the learner whose push made the last update none more.

    Staleness bound (every protocol): a learner's k-th gradient carries the
    clock of the reply to its (k-1)-th push, which is the clock at which that
    push arrived plus one if it completed an update. So the staleness of its
    gradients telescopes: sum over its gradients of tau <= U - (updates its
    pushes completed), and over all learners sum(tau) <= L*U - U = (L-1)*U.
    Mean tau <= (L-1)/c: n-softsync (c = L/n) at most n - n/L, nsync (c = 1)
    at most L-1; hardsync: every tau is 0."""
    L = learners
    U = len(r["clock"])
    check(r["status"] == "completed", f"status {r['status']}")
    check(U > 0, "no updates")
    check((r["clock"] == np.arange(1, U + 1)).all(), "update clocks must be 1, 2, ..., U in order")
    check((np.diff(r["wall_s"]) >= 0).all(), "update times must not go backwards")
    check((r["gradients"] == c).all(), lambda: f"every update uses c={c} gradients: {sorted(set(r['gradients']))}")
    check((r["samples"] == c * per_gradient).all(),
          lambda: f"every update has c x mu = {c * per_gradient} samples: {sorted(set(r['samples']))}")
    # per learner (server side)
    check(len(r["l_grads"]) == L and (r["learner"] == np.arange(L)).all(),
          lambda: f"want one /learners row per learner 0..{L - 1}: {list(r['learner'])}")
    check(r["l_grads"].sum() == U * c, lambda: f"gradients applied {r['l_grads'].sum()} != {U} updates x c={c}")
    check((r["l_samples"] == r["l_grads"] * per_gradient).all(),
          lambda: f"each learner's samples = its gradients x {per_gradient}: {list(r['l_samples'])} vs {list(r['l_grads'])}")
    # staleness
    h = r["hist"]
    tau = np.arange(len(h))
    check((h >= 0).all() and h.sum() == U * c, lambda: f"histogram holds {h.sum()} gradients != {U} x {c}")
    check((r["mean_tau"] >= 0).all(), "tau >= 0")
    tau_sum = int((h * tau).sum())
    check(abs(tau_sum - c * r["mean_tau"].sum()) <= 1e-9 * max(1, tau_sum),
          lambda: f"histogram's tau sum {tau_sum} != c x sum of per-update mean tau {c * r['mean_tau'].sum()}")
    check(tau_sum <= (L - 1) * U,
          lambda: f"sum of tau {tau_sum} > (L-1) x U = {(L - 1) * U} (mean {tau_sum / (U * c):.3f} > "
                  f"(L-1)/c = {(L - 1) / c:.3f}): staler than the protocol allows; histogram {list(h)}")
    if protocol == "hardsync":
        check(len(h) == 1 and (r["mean_tau"] == 0).all(), lambda: f"hardsync tau must be 0: histogram {list(h)}")
        check((r["l_grads"] == U).all(), lambda: f"hardsync: one gradient per learner per update: {list(r['l_grads'])}")
    # learner side
    if r["mode"] == "real":
        check(r["pushed"] is not None, "no /learners/pushed column (the learners' own push counts)")
        extra = r["pushed"] - r["l_grads"]
        check(((extra >= 0) & (extra <= 1)).all(),
              lambda: f"each learner pushed what was applied or one more (answered stop): pushed "
                      f"{list(r['pushed'])}, applied {list(r['l_grads'])}")
        check(extra.sum() <= L - 1, lambda: f"{extra.sum()} pushes after the stop from {L} learners: "
                                            "the push that made the last update was applied")
        if protocol == "hardsync":
            check((extra == 0).all(), lambda: f"hardsync: every push applied: pushed {list(r['pushed'])}, "
                                              f"applied {list(r['l_grads'])}")
    # evaluations in clock order, the last of the final weights
    ec = r["eval_clock"]
    check(len(ec) >= 1 and (np.diff(ec) >= 0).all() and ec[-1] == U,
          lambda: f"evaluation clocks {list(ec)} must be in order and end at update {U}")
    return tau_sum


def max_ulps(a, b):
    """Largest |a - b| in units of the float32 spacing at the largest |weight|."""
    return float(np.abs(a - b).max() / np.spacing(np.float32(np.abs(a).max())))


# Hardsync with L learners of batch mu against one learner of batch L*mu: the
# same samples, the same rule; only the order of float32 summation differs
# (each learner's mean over mu samples, then the server's sum of c = L of them
# scaled by 1/c, against one GEMM reduction over L*mu). That changes a gradient
# by a few float32 roundings (relative 2^-24), which moves a weight by far
# less than its own spacing, so the weights end within a rounding or two of
# each other: measured at most 1 ulp of the largest weight (3e-8 to 6e-8 at
# |w| ~ 0.85) over seeds 1-5, S = 1 and 2, shared memory and messages. Allow
# 4 ulps. The old bound, 1e-5 (170 ulps), let a server rate 1e-5 too large
# through: its weights ended 4.5e-7 (7.6 ulps) away, which this bound fails.
EQUIVALENCE_ULPS = 4


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
        check(len(a) == len(b), f"{run_id}: {len(b)} weights, single learner {len(a)}")
        ulps = max_ulps(a, b)
        print(f"{run_id}: {len(b)} weights, max |difference| to single learner "
              f"{np.abs(a - b).max():.2e} = {ulps:g} ulp of max |w|")
        check(ulps <= EQUIVALENCE_ULPS, f"{run_id}: max weight difference {np.abs(a - b).max():.3e} = "
                                        f"{ulps:g} ulps of max |w| > {EQUIVALENCE_ULPS}")


def case_one_learner_rule(tmp):
    """One MPI learner against the single-learner trainer with the same batch:
    softsync (c = 1, tau = 0) under every rate policy is the same update, bit
    for bit; nsync (4 local steps, the server adds local minus fetched) within
    EQUIVALENCE_ULPS (w_fetched + (w_local - w_fetched) rounds once a push) on
    at least 2 of 3 seeds. lenet's max-pooling picks one of two equal inputs,
    so a rounding difference can flip which one and the two runs part by a
    whole step from there (seen once: 130 ulps on one seed of the OpenMP build
    on an AMD EPYC, the other seeds 1 ulp or less); a fault in the server's
    arithmetic moves every seed (adding 1 + 1e-5 times the change: 9,785 to
    51,515 ulps on the three)."""
    single("--model", "lenet", "--batch", "16", "--run-id", "one", results=tmp)
    a = weights(tmp, "one")
    for policy in ("constant", "staleness", "mean-staleness"):
        run(2, "--model", "lenet", "--batch", "16", "--learners", "1", "--protocol", "softsync",
            "--n", "1", "--lr-policy", policy, "--run-id", f"ss-{policy}", results=tmp)
        b = weights(tmp, f"ss-{policy}")
        check(np.array_equal(a, b), lambda: f"softsync L=1 {policy}: differs from one learner by "
                                            f"{np.abs(a - b).max():.3e} (want bit-identical)")
        r = result(tmp, f"ss-{policy}")
        check_invariants(r, 1, 1, 16, "softsync")
        check((r["hist"] == [len(r["clock"])]).all(), f"one learner: tau always 0: {list(r['hist'])}")
        print(f"softsync L=1 {policy}: bit-identical to one learner ({len(b)} weights)")
    seeds = []
    for seed in (1, 2, 3):
        if seed > 1:
            single("--model", "lenet", "--batch", "16", "--seed", str(seed), "--run-id", f"one-s{seed}", results=tmp)
        run(2, "--model", "lenet", "--batch", "16", "--seed", str(seed), "--learners", "1", "--protocol", "nsync",
            "--n-sync", "4", "--run-id", f"ns-s{seed}", results=tmp)
        ulps = max_ulps(weights(tmp, "one" if seed == 1 else f"one-s{seed}"), weights(tmp, f"ns-s{seed}"))
        seeds.append(ulps)
        check_invariants(result(tmp, f"ns-s{seed}"), 1, 1, 4 * 16, "nsync")
    print(f"nsync L=1 n_sync=4: max |difference| to one learner, seeds 1-3: "
          f"{', '.join(f'{u:g}' for u in seeds)} ulp of max |w|")
    check(sum(u <= EQUIVALENCE_ULPS for u in seeds) >= 2,
          f"nsync L=1: {', '.join(f'{u:g}' for u in seeds)} ulps of max |w| from one learner "
          f"(seeds 1-3; want at least 2 within {EQUIVALENCE_ULPS})")


def case_hardsync_invariants(tmp):
    run(3, "--model", "mlp", "--batch", "16", "--learners", "2", "--protocol", "hardsync",
        "--run-id", "h", results=tmp)
    r = result(tmp, "h")
    check_invariants(r, 2, 2, 16, "hardsync")
    expect_transport(r, "h")
    print(f"hardsync: {len(r['clock'])} updates, pushed {list(r['pushed'])}, transport {r['transport']}")


def expect_transport(r, what):
    want = "messages" if os.environ.get("ASGD_SHM") == "0" else "shared-memory"
    check(r["transport"] == want, f"{what}: transport {r['transport']!r}, want {want!r} "
                                  f"(ASGD_SHM={os.environ.get('ASGD_SHM', 'unset')})")


def case_softsync_invariants(tmp):
    for n, servers in ((1, 1), (2, 1), (2, 2)):
        run_id = f"s{n}_{servers}"
        run(2 + servers, "--model", "mlp", "--batch", "16", "--learners", "2", "--servers",
            str(servers), "--protocol", "softsync", "--n", str(n), "--run-id", run_id, results=tmp)
        r = result(tmp, run_id)
        c = 2 // n
        tau_sum = check_invariants(r, c, 2, 16, "softsync")
        expect_transport(r, run_id)
        print(f"softsync n={n} S={servers}: {len(r['clock'])} updates, histogram {list(r['hist'])}, "
              f"sum tau {tau_sum} <= (L-1)U = {len(r['clock'])}, pushed {list(r['pushed'])} "
              f"applied {list(r['l_grads'])}")


def case_nsync(tmp):
    run(3, "--model", "mlp", "--batch", "16", "--learners", "2", "--protocol", "nsync",
        "--n-sync", "4", "--run-id", "ns", results=tmp)
    r = result(tmp, "ns")
    tau_sum = check_invariants(r, 1, 2, 4 * 16, "nsync")  # each push carries n_sync x mu samples
    expect_transport(r, "ns")
    print(f"nsync L=2: {len(r['clock'])} updates, sum tau {tau_sum}, pushed {list(r['pushed'])}")


def case_rate_policies(tmp):
    """The rate each update applied, exactly: 2-softsync with L = 2 (c = 1) at
    lr * f(tau), f = 1/tau for tau > 0 (staleness), 1/max(1, tau)
    (mean-staleness), 1 (constant); 1-softsync (c = 2) with mean-staleness at
    lr / max(1, mean tau). At least one stale update, or nothing was tested."""
    lr = 0.01
    for policy, n in (("constant", 2), ("staleness", 2), ("mean-staleness", 2), ("mean-staleness", 1)):
        run_id = f"{policy}-n{n}"
        run(3, "--model", "mlp", "--batch", "16", "--learners", "2", "--protocol", "softsync",
            "--n", str(n), "--lr", str(lr), "--lr-policy", policy, "--run-id", run_id, results=tmp)
        r = result(tmp, run_id)
        c = 2 // n
        check_invariants(r, c, 2, 16, "softsync")
        tau = r["mean_tau"]
        if policy == "constant":
            want = np.full_like(tau, lr)
        elif policy == "staleness":
            want = lr * np.where(tau > 0, 1 / np.maximum(tau, 1), 1.0)
        else:
            want = lr / np.maximum(1.0, tau)
        bad = np.flatnonzero(np.abs(r["rate"] - want) > 1e-12 * lr)
        check(len(bad) == 0, lambda: f"{run_id}: update {bad[0] + 1} at mean tau {tau[bad[0]]} applied rate "
                                     f"{r['rate'][bad[0]]!r}, want {want[bad[0]]!r}")
        check(policy == "constant" or (tau > 0).any(), f"{run_id}: no stale update; the policy was not exercised")
        print(f"{run_id}: {len(tau)} updates, {int((tau > 0).sum())} stale, every rate as the rule says")


def case_refusals(tmp):
    """Refused before any rank starts work: one line, exit 2 (bad input)."""
    bad = [
        (3, ["--learners", "2", "--protocol", "softsync", "--n", "3"], "softsync n 3"),
        (3, ["--learners", "2", "--protocol", "nsync", "--n-sync", "0"], "n_sync 0"),
        (3, ["--learners", "2", "--servers", "0"], "servers 0"),
        (3, ["--learners", "0"], "learners 0"),
        (3, ["--learners", "1"], "started with 3 MPI ranks"),
    ]
    for n, extra, want in bad:
        rc, _, err = run(n, "--model", "mlp", *extra, results=tmp, check_rc=False)
        lines = err.strip().splitlines()
        check(rc == EXIT_BAD_INPUT, f"{extra}: exit {rc}, want {EXIT_BAD_INPUT} (bad input)")
        check(len(lines) == 1 and want in lines[0], f"{extra}: stderr {err!r}")
        print(f"refused {extra} (exit {rc}): {lines[0]}")
    runs = os.path.join(tmp, "adhoc", "runs")
    check(not os.path.exists(runs) or not os.listdir(runs), "a refused run wrote a result")


def case_corrupt_checkpoint(tmp):
    os.makedirs(os.path.join(tmp, "adhoc", "checkpoints"))
    path = os.path.join(tmp, "adhoc", "checkpoints", "cc.shard1.h5")
    with open(path, "w") as f:
        f.write("garbage")
    rc, _, err = run(4, "--model", "mlp", "--learners", "2", "--servers", "2", "--run-id", "cc",
                     results=tmp, check_rc=False)
    lines = err.strip().splitlines()
    check(rc == EXIT_BAD_INPUT, f"exit {rc}, want {EXIT_BAD_INPUT} (bad input): {err}")
    check(len(lines) == 1 and "cc.shard1.h5" in lines[0], f"stderr {err!r}")
    with open(path) as f:
        check(f.read() == "garbage", "the corrupt checkpoint was changed")
    check(not os.path.exists(os.path.join(tmp, "adhoc", "runs", "cc.h5")), "a result was written")
    print(f"refused (exit {rc}): {lines[0]}")


def case_kill_resume(tmp):
    """kill -9 of every rank mid-run, same command again: resumes and completes."""
    extra = ["--model", "lenet", "--batch", "16", "--learners", "2", "--protocol", "softsync",
             "--n", "2", "--epochs", "6", "--synthetic-size", "28", "--synthetic-train", "1024",
             "--checkpoint-every", "20", "--run-id", "kr"]
    cmd = [ARGS.mpiexec, "-n", "3", ARGS.asgd, "train", *SYN, "--results", tmp, *extra]
    ckpt = os.path.join(tmp, "adhoc", "checkpoints", "kr.h5")
    p, _ = start(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not os.path.exists(ckpt) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    kill_group(p.pid)
    p.wait()
    check(os.path.exists(ckpt), "no checkpoint before the kill")
    check(not os.path.exists(os.path.join(tmp, "adhoc", "runs", "kr.h5")), "finished too early")
    with h5py.File(ckpt) as f:
        at = int(f.attrs["clock"])
    rc, out, err = launch([c for c in cmd if c != "-q"])
    check(rc == 0, f"re-run failed ({rc}): {err}")
    check("resuming kr from its checkpoints" in out + err, f"did not resume: {err}")
    r = result(tmp, "kr")
    check_invariants(r, 1, 2, 16, "softsync")
    check(r["clock"][-1] > at, f"ended at update {r['clock'][-1]}, checkpoint at {at}")
    print(f"killed with a checkpoint at update {at}; resumed to update {r['clock'][-1]}; "
          f"pushed {list(r['pushed'])} applied {list(r['l_grads'])}")


def case_message_transport(tmp):
    """The message-only path (ASGD_SHM=0, what ranks on different nodes use): the
    equivalence and invariant checks again, and every result says it used
    messages."""
    os.environ["ASGD_SHM"] = "0"
    for name, case in (("eq", case_hardsync_equivalence), ("one", case_one_learner_rule),
                       ("soft", case_softsync_invariants), ("nsync", case_nsync)):
        sub = os.path.join(tmp, name)
        os.makedirs(sub)
        case(sub)
        runs = os.path.join(sub, "adhoc", "runs")
        for f in sorted(os.listdir(runs)):
            with h5py.File(os.path.join(runs, f)) as h:
                mode, transport = text(h.attrs["mode"]), text(h.attrs.get("transport", "<none>"))
                protocol = text(h.attrs["protocol"])
            want = "none" if protocol == "single" else "messages"
            check(transport == want, f"{name}/{f}: transport {transport!r} ({mode}, {protocol}), want {want!r}")
        print(f"{name}: every result says transport messages (single-learner runs: none)")


def case_weights_in_place(tmp):
    """Where no shard changes its weights while a learner computes (one learner,
    hardsync), learners read them in the servers' windows: the result says
    weights in-place, and the weights end bit-identical to the same run with
    ASGD_IN_PLACE=0 (copied at each reply). Where a shard may update while a
    learner computes (softsync with two learners, nsync's local steps), they
    are copied whatever ASGD_IN_PLACE says."""
    def attr(run_id):
        with h5py.File(os.path.join(tmp, "adhoc", "runs", f"{run_id}.h5")) as f:
            return text(f.attrs.get("weights", "<none>")), text(f.attrs["transport"])

    shapes = (("hs", 4, ["--learners", "2", "--servers", "2", "--protocol", "hardsync"], 2, "in-place"),
              ("one", 3, ["--learners", "1", "--servers", "2", "--protocol", "softsync", "--n", "1"], 2, "in-place"),
              ("dc", 2, ["--learners", "1", "--protocol", "dcasgd"], 1, "in-place"),
              ("soft", 3, ["--learners", "2", "--protocol", "softsync", "--n", "1"], 1, "copied"),
              ("ns", 2, ["--learners", "1", "--protocol", "nsync", "--n-sync", "2"], 1, "copied"))
    for name, n, args, shards, want in shapes:
        for switch in ("1", "0"):
            run_id = f"{name}-{switch}"
            run(n, "--model", "mlp", "--batch", "16", *args, "--run-id", run_id, results=tmp,
                extra_env={"ASGD_IN_PLACE": switch})
            got = attr(run_id)
            expect = want if switch == "1" else "copied"
            check(got == (expect, "shared-memory"), f"{run_id}: weights/transport {got}, want ({expect!r}, 'shared-memory')")
        if want == "in-place":
            a, b = weights(tmp, f"{name}-1", shards), weights(tmp, f"{name}-0", shards)
            check(np.array_equal(a, b), lambda: f"{name}: in place and copied differ by {np.abs(a - b).max():.3e}")
        print(f"{name}: weights {want} (copied with ASGD_IN_PLACE=0)"
              + (", the same weights bit for bit" if want == "in-place" else ""))


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
    check(a.keys() == b.keys(), f"datasets differ: {sorted(a)} vs {sorted(b)}")
    for k in a:
        check(np.array_equal(a[k], b[k], equal_nan=True), f"{k} differs between repeats")
    r = result(tmp, "a")
    check(r["transport"] == "none", f"virtual run: transport {r['transport']!r}, want 'none'")
    print(f"{len(a)} datasets bit-identical over two runs")


def case_virtual_equals_mpi_hardsync(tmp):
    extra = ["--model", "lenet", "--batch", "16", "--learners", "2", "--protocol", "hardsync"]
    virtual(*extra, "--timing", "fixed", "--compute-s", "0.01", "--comm-s", "0.001",
            "--run-id", "v", results=tmp)
    run(3, *extra, "--run-id", "m", results=tmp)
    a, b = weights(tmp, "v"), weights(tmp, "m")
    # the same ShardCore and the same order of summation: bit for bit
    check(np.array_equal(a, b), lambda: f"virtual vs MPI hardsync differ by {np.abs(a - b).max():.3e}")
    print("virtual hardsync vs MPI hardsync: bit-identical weights")


def case_virtual_staleness(tmp):
    """Identical learners: n-softsync mean tau within 20% of n, P(tau > 2n) < 1%;
    1-softsync tau in {0, 1, 2}; the invariants and the (L-1)/c bound."""
    for n in (1, 2, 4, 10, 30):
        virtual("--model", "mlp", "--synthetic-size", "8", "--synthetic-train", "4096",
                "--epochs", "2", "--batch", "4", "--learners", "30", "--protocol", "softsync",
                "--n", str(n), "--timing", "normal", "--compute-cv", "0.1", "--compute-s", "0.01",
                "--comm-s", "0.0005", "--run-id", f"n{n}", results=tmp)
        r = result(tmp, f"n{n}")
        check_invariants(r, 30 // n, 30, 4, "softsync")
        h = r["hist"]
        tau = np.arange(len(h))
        mean = (h * tau).sum() / h.sum()
        tail = h[tau > 2 * n].sum() / h.sum()
        print(f"n={n}: mean tau {mean:.2f} (bound (L-1)/c = {29 / (30 // n):.2f}), P(tau > 2n) {tail:.4f}, "
              f"histogram {list(h)}")
        check(abs(mean - n) <= 0.2 * n, f"n={n}: mean tau {mean}")
        check(tail < 0.01, f"n={n}: P(tau > 2n) = {tail}")
        if n == 1:
            check(len(h) <= 3, f"1-softsync tau beyond 2: {list(h)}")


def case_virtual_straggler(tmp):
    """A learner 4x slower pushes fewer gradients and its gradients are staler."""
    virtual("--model", "mlp", "--synthetic-size", "8", "--synthetic-train", "2048", "--batch", "4",
            "--learners", "8", "--protocol", "softsync", "--n", "8", "--timing", "fixed",
            "--compute-s", "0.01", "--comm-s", "0.0005", "--straggler", "3",
            "--straggler-factor", "4", "--run-id", "st", results=tmp)
    r = result(tmp, "st")
    check_invariants(r, 1, 8, 4, "softsync")
    g = r["l_grads"]
    others = np.delete(g, 3)
    check(g[3] < 0.35 * others.mean(), f"straggler counts {list(g)}")
    h = r["hist"]
    check(len(h) - 1 >= 4 * 8 * 0.75, f"no stale tail in histogram {list(h)}")
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
        check(abs(rate - want) <= 0.01 * want, f"{name}: {rate} samples/s, want {want}")
    virtual(*base, "--protocol", "softsync", "--n", "4", "--warm-steps", "50", "--run-id", "warm",
            results=tmp)
    s, upd, ev = summary(tmp, "warm")
    check(abs(s["warm_up_s"] - 50 * compute) < 1e-9, f"warm_up_s {s['warm_up_s']}")
    check(upd[0] >= 50 * compute, f"first update at {upd[0]} s, before the warm-up ended")
    check(s["train_time_s"] >= s["warm_up_s"], f"train_time_s {s['train_time_s']} < warm_up_s")
    print(f"warm start: warm_up_s {s['warm_up_s']}, first update at {upd[0]:.3f}s")


def case_allreduce(tmp):
    """allreduce (no servers): L = 2 bit-identical to hardsync's weights and
    series, equal to one learner with batch 2*mu within float rounding; L = 3
    equal to hardsync within float rounding; --servers and a wrong rank count
    refused with one line."""
    common = ["--model", "lenet", "--batch", "16", "--checkpoint-every", "5"]
    run(2, *common, "--learners", "2", "--protocol", "allreduce", "--run-id", "ar", results=tmp)
    run(3, *common, "--learners", "2", "--protocol", "hardsync", "--run-id", "hs", results=tmp)
    single("--model", "lenet", "--batch", "32", "--run-id", "one", results=tmp)
    a, h = result(tmp, "ar"), result(tmp, "hs")
    check(a["transport"] == "allreduce", f"transport {a['transport']}")
    for k in ("clock", "gradients", "mean_tau", "rate", "samples", "evals"):
        check(np.array_equal(a[k], h[k]), f"allreduce {k} differs from hardsync")
    check(np.array_equal(weights(tmp, "ar"), weights(tmp, "hs")), "allreduce weights differ from hardsync")
    ulps = max_ulps(weights(tmp, "one"), weights(tmp, "ar"))
    check(ulps <= EQUIVALENCE_ULPS, f"allreduce vs one learner: {ulps:g} ulps > {EQUIVALENCE_ULPS}")
    print(f"allreduce L=2: bit-identical to hardsync; {ulps:g} ulps from one learner with batch 32")
    run(3, "--model", "mlp", "--learners", "3", "--protocol", "allreduce", "--run-id", "ar3", results=tmp)
    run(4, "--model", "mlp", "--learners", "3", "--protocol", "hardsync", "--run-id", "hs3", results=tmp)
    ulps = max_ulps(weights(tmp, "hs3"), weights(tmp, "ar3"))
    check(ulps <= EQUIVALENCE_ULPS, f"allreduce L=3 vs hardsync: {ulps:g} ulps")
    print(f"allreduce L=3: {ulps:g} ulps from hardsync")
    for n, extra, want in ((2, ["--servers", "2"], "allreduce has no server ranks"),
                           (3, [], "need exactly 2")):
        rc, _, err = run(n, "--model", "mlp", "--learners", "2", "--protocol", "allreduce", *extra,
                         "--run-id", "bad", results=tmp, check_rc=False)
        lines = err.strip().splitlines()
        check(rc == EXIT_BAD_INPUT and len(lines) == 1 and want in lines[0], f"{extra}: exit {rc}, {err!r}")
        print(f"refused {extra}: {lines[0]}")


def case_protocols_beyond(tmp):
    """ssp, easgd and dcasgd with 3 learners and 2 shards, shared memory and
    messages, seeded random delays: complete; ssp's clock spread never above
    s; per-learner counts add up; their options refused under another protocol."""
    for shm in ("1", "0"):
        for proto, extra in (("ssp", ["--staleness", "1"]), ("easgd", ["--tau", "3"]),
                             ("dcasgd", ["--lambda-dc", "0.3"])):
            rid = f"{proto}-{shm}"
            run(5, "--model", "mlp", "--batch", "16", "--learners", "3", "--servers", "2", "--protocol", proto, *extra,
                "--eval-every", "0.25", "--checkpoint-every", "4", "--run-id", rid, results=tmp,
                extra_env={"ASGD_SHM": shm, "ASGD_INJECT_DELAY": "7:3:0.3"})
            r = result(tmp, rid)
            check(r["status"] == "completed", f"{rid}: {r['status']}")
            check(r["l_grads"].sum() == len(r["clock"]), f"{rid}: learner counts != updates")
            with h5py.File(os.path.join(tmp, "adhoc", "runs", rid + ".h5")) as f:
                spread = f["updates/clock_spread"][:]
            if proto == "ssp":
                check(spread.max() <= 1, f"{rid}: clock spread {spread.max()} > 1")
            print(f"{rid}: {len(r['clock'])} updates, max clock spread {spread.max()}, "
                  f"final error {r['evals'][-1]:.3f}")
    rc, _, err = run(3, "--model", "mlp", "--learners", "2", "--tau", "3", "--run-id", "bad",
                     results=tmp, check_rc=False)
    check(rc == EXIT_BAD_INPUT and "--tau is an option of protocol easgd" in err, f"exit {rc}: {err!r}")


CASES = {k[len("case_"):]: v for k, v in globals().items() if k.startswith("case_")}


def main():
    global ARGS, DEADLINE
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("case", nargs="?", choices=sorted(CASES))
    ap.add_argument("--asgd")
    ap.add_argument("--mpiexec", default="mpiexec")
    ap.add_argument("--budget", type=float, default=540,
                    help="seconds the case may take in all (below its ctest TIMEOUT)")
    ap.add_argument("--list", action="store_true")
    ARGS = ap.parse_args()
    if ARGS.list or not ARGS.case:
        print("\n".join(sorted(CASES)))
        return 0
    DEADLINE = time.monotonic() + ARGS.budget
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: (kill_all_groups(), sys.exit(128 + s)))
    t0 = time.monotonic()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            CASES[ARGS.case](tmp)
    except CheckFailed as e:
        print(f"FAIL {ARGS.case}: {e}")
        print(f"{ARGS.case}: 0 passed, 1 failed ({time.monotonic() - t0:.0f}s)")
        return 1
    finally:
        kill_all_groups()
    print(f"{ARGS.case}: 1 passed, 0 failed ({time.monotonic() - t0:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
