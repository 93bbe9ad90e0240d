#!/usr/bin/env python3
"""The emulated multi-node cluster (tools/cluster.sh) and the MPI core across it.

    cluster_test.py --asgd PATH --cluster PATH/tools/cluster.sh

- bad inputs of cluster.sh: one line, exit 2, nothing made;
- 3 nodes, 1gbit links; every protocol (nsync with two merge rules) with 4 learners and
  2 shards spread over the 3 nodes, evaluations and checkpoints often, seeded random delays:
  each completes, its counts check as the stress test's do, and the machine record names
  every rank's node;
- asgd calibrate across two nodes: the link figures name them, and the network's CPU per
  byte is the exchanges' busy CPU less the quiet waits', as its note says; after it, both
  sides of node 1's link are shaped at the rate, acknowledgements counted in their own class;
- all ranks of one node killed (kill -9) mid-run: the job ends within 10 s, naming the node;
  the same command then resumes from the checkpoint and ends with the update and sample
  counts of an uninterrupted run;
- down leaves no namespace, process or file behind.
Every command runs under this script's watchdog, which kills its process group.
Exit 77 (skipped) when not root, without ip/tc/nsenter, or while another emulated cluster is up.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import h5py

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "mpi"))
from stress import CheckFailed, check, check_run  # noqa: E402

WATCHDOG_S = 120
DIR = "/run/asgd-cluster-test"


def sh(cmd, timeout=WATCHDOG_S, env=None):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        raise CheckFailed(f"watchdog: {' '.join(cmd[:4])}... ran past {timeout} s")
    return p.returncode, out, err


def bad_inputs(cl):
    for args, word in ((["up", "0"], "1..64"), (["up", "x"], "node count"),
                       (["up", "2", "--link", "fast"], "fast"), (["up", "2", "--link", "0bit"], "tc refused"),
                       (["up", "2", "--link", "1gbit", "--node-link", "3=1gbit"], "node 3"),
                       (["down"], "nothing is up"), (["status"], "nothing is up"),
                       (["frob"], "frob")):
        rc, out, err = sh([cl] + args)
        lines = err.strip().splitlines()
        check(rc == 2 and len(lines) == 1 and word in lines[0],
              f"cluster.sh {' '.join(args)}: rc {rc}, stderr {err!r}")
        check(not os.path.exists(DIR), f"cluster.sh {' '.join(args)} left {DIR}")


def protocols(mpiexec, asgd, tmp, env):
    shapes = [("hardsync", [], 4), ("softsync", ["--n", "2"], 2), ("nsync", ["--n-sync", "2"], 1),
              ("nsync", ["--n-sync", "2", "--merge", "adagrad"], 1), ("allreduce", [], 4),
              ("ssp", ["--staleness", "1"], 1), ("easgd", ["--tau", "2"], 1),
              ("dcasgd", ["--lambda-dc", "0.5"], 1)]
    for i, (proto, extra, c) in enumerate(shapes):
        servers = 0 if proto == "allreduce" else 2
        ranks = 4 + servers
        res = os.path.join(tmp, f"p{i}")
        e = dict(env, ASGD_INJECT_DELAY=f"{i + 1}:3:0.3")
        cmd = [mpiexec, "-n", str(ranks), asgd, "train", "--model", "mlp", "--learners", "4",
               "--protocol", proto, "--max-steps", "24", "--eval-every", "0.01",
               "--checkpoint-every", "5", "--stall-timeout", "60", "--results", res,
               "--quiet"] + extra
        if servers:
            cmd[cmd.index("--learners"):cmd.index("--learners")] = ["--servers", str(servers)]
        rc, out, err = sh(cmd, env=e)
        check(rc == 0, f"{proto} {extra}: rc {rc}: {err[-600:]}")
        path = [os.path.join(dp, f) for dp, _, fs in os.walk(res) for f in fs
                if f.endswith(".h5") and "/runs" in dp][0]
        check_run(path, 4, servers, c, 64, proto, weights="<none>")  # ranks on 3 nodes: no shared windows
        with h5py.File(path) as f:
            machine = json.loads(f.attrs["machine"])
        nodes = machine["rank_nodes"]
        want = [f"asgd-node{1 + r % 3}" for r in range(ranks)]  # one per node, wrapping round
        check(nodes == want and machine["nodes"] == sorted(set(want)),
              f"{proto}: machine record's nodes {machine['nodes']}, rank_nodes {nodes}")
        print(f"cluster_test: {proto} {' '.join(extra)}: completed, ranks on {nodes}")


def unbound(mpiexec, env):
    """The nodes share this machine's cores: a job's ranks on different nodes are bound to none
    of them (each node's daemon would put its first rank on core 0 where a job has 2 ranks),
    and --bind-to given is passed on."""
    mine = len(os.sched_getaffinity(0))
    for extra, want in (([], mine), (["--bind-to", "core"], 1)):
        rc, out, err = sh([mpiexec, "-n", "2", *extra, "python3", "-c",
                           "import os; print(len(os.sched_getaffinity(0)))"], env=env)
        got = [int(x) for x in out.split()] if rc == 0 else []
        check(got == [want, want], f"mpiexec -n 2 {' '.join(extra)}: CPUs allowed per rank {out!r} "
              f"(want {want} each; rc {rc}: {err[-300:]})")


def calibrate_across(mpiexec, asgd, tmp, env):
    """asgd calibrate with its probes across two nodes: the link figures name both nodes and
    the messages, and the network's CPU per byte is the exchanges' busy CPU less the quiet
    waits', as its note states (a figure with the waits left in pays them twice)."""
    out = os.path.join(tmp, "across.yaml")
    rc, _, err = sh([asgd, "calibrate", "--out", out, "--models", "mlp", "--batch", "16", "--steps", "4",
                     "--mpiexec", mpiexec], env=env)
    check(rc == 0, f"calibrate across nodes: rc {rc}: {err[-600:]}")
    text = open(out).read()
    check("on asgd-node1 and asgd-node2" in text and "exchange: {value: messages" in text,
          f"calibrate across nodes: the link figures name no two nodes: {text[:400]}")
    line = [ln for ln in text.splitlines() if ln.strip().startswith("cpu_s_per_byte:")]
    check(len(line) == 1, "calibrate across nodes: no cpu_s_per_byte")
    m = re.search(r"value: ([0-9.e+-]+),.*\(([0-9.]+) s in ([0-9.]+) s, ([0-9]+) MB moved\).*: ([0-9.]+) s\)", line[0])
    check(m is not None, f"calibrate across nodes: cpu_s_per_byte's note: {line[0]}")
    value, busy, span, mb, waits = (float(g) for g in m.groups())
    check(span > 0 and mb > 0, f"calibrate across nodes: {line[0]}")
    # figures printed to 0.01 s and 1 MB
    want = max(0.0, busy - waits)
    check(abs(value * mb * 1e6 - want) <= 0.011 + 0.01 * busy,
          f"calibrate across nodes: {value} s a byte x {mb} MB against {busy} s busy less {waits} s of waits")
    print(f"cluster_test: calibrate across nodes: {value * 1e9:.2f} ns a byte "
          f"({busy} s busy, {waits} s of it the waits')")


def ack_class(rate):
    """Both sides of node 1's link, after the calibration's exchanges with node 2: shaped at
    the cluster's rate, with TCP packets under 128 bytes (acknowledgements) counted in a class
    of their own (each under 128 bytes and an Ethernet header) and the data in the other."""
    for ns, dev in (("asgd-node1", "eth0"), ("asgd-switch", "v1")):
        out = subprocess.run(["ip", "netns", "exec", ns, "tc", "-s", "class", "show", "dev", dev],
                             capture_output=True, text=True, timeout=30).stdout
        sent = {c: (int(b), int(p), r) for c, r, b, p in
                re.findall(r"class htb (1:\d+) .*?rate (\S+) .*?\n\s*Sent (\d+) bytes (\d+) pkt", out)}
        check(set(sent) >= {"1:1", "1:10", "1:20"} and sent["1:1"][2] == rate,
              f"{ns} {dev}: want htb classes 1:1 at {rate}, 1:10 and 1:20: {out}")
        (ack_b, ack_p, _), (data_b, data_p, _) = sent["1:10"], sent["1:20"]
        check(ack_p > 100 and ack_b < 142 * ack_p, f"{ns} {dev}: acknowledgements' class {sent['1:10']}")
        check(data_b > 1e6 and data_b > 142 * data_p, f"{ns} {dev}: data class {sent['1:20']}")
        print(f"cluster_test: {ns} {dev}: {ack_p} packets in the acknowledgements' class, "
              f"{data_b / 1e6:.1f} MB in the data's")


def node_lost(mpiexec, asgd, tmp, env):
    def cmd(res, steps):
        return [mpiexec, "-n", "6", asgd, "train", "--model", "mlp", "--servers", "2",
                "--learners", "4", "--protocol", "softsync", "--n", "2", "--max-steps", str(steps),
                "--eval-every", "0.2", "--checkpoint-every", "20", "--results", res, "--quiet"]
    res = os.path.join(tmp, "lost")
    p = subprocess.Popen(cmd(res, 600), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env, start_new_session=True)
    ckpt = None
    t_end = time.time() + 60
    while time.time() < t_end and ckpt is None:   # until the first checkpoint is written
        for dp, _, fs in os.walk(res):
            ckpt = next((os.path.join(dp, f) for f in fs if dp.endswith("checkpoints") and f.endswith(".h5")), ckpt)
        time.sleep(0.2)
    check(ckpt is not None and p.poll() is None, "no checkpoint before the kill")
    time.sleep(1)
    pids = subprocess.run(["ip", "netns", "pids", "asgd-node3"], capture_output=True, text=True).stdout.split()
    victims = [q for q in pids if open(f"/proc/{q}/comm").read().strip() == "asgd"]
    check(victims, "no asgd rank on asgd-node3")
    t0 = time.time()
    for q in victims:
        os.kill(int(q), signal.SIGKILL)
    try:
        _, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        raise CheckFailed("the job went on 30 s after a node's ranks were killed")
    took = time.time() - t0
    check(p.returncode != 0 and took < 10, f"job ended after {took:.1f} s, rc {p.returncode}")
    named = [ln.strip() for ln in err.splitlines() if "asgd-node3" in ln and "rank" in ln]
    check(named, f"no line names the lost rank and its node: {err[-600:]}")
    print(f"cluster_test: node 3's ranks killed: the job ended in {took:.2f} s (rc {p.returncode}): {named[0]}")
    rc, _, err = sh(cmd(res, 600), timeout=240, env=env)
    check(rc == 0, f"resume: rc {rc}: {err[-600:]}")
    ref = os.path.join(tmp, "ref")
    rc, _, err = sh(cmd(ref, 600), timeout=240, env=env)
    check(rc == 0, f"uninterrupted: rc {rc}: {err[-600:]}")

    def counts(root):
        path = [os.path.join(dp, f) for dp, _, fs in os.walk(root) for f in fs
                if f.endswith(".h5") and dp.endswith("runs")][0]
        with h5py.File(path) as f:
            return len(f["updates/clock"]), int(f["updates/samples"][:].sum())
    check(counts(res) == counts(ref), f"resumed {counts(res)} != uninterrupted {counts(ref)}")
    print(f"cluster_test: resumed and uninterrupted runs agree: {counts(res)} (updates, samples)")


SUITE = """name: spread
mode: real
base:
  model: mlp
  dataset: {kind: synthetic, shape: [8, 8, 1], classes: 4, n_train: 512, n_test: 64}
  batch: 16
  epochs: 1
axes:
  learners: [2, 4]
seeds: [1]
resources: {servers: 2, time_limit: "00:05:00"}
"""


def slurm_suite(asgd, src, tmp, env):
    """A suite whose shapes span nodes (4 and 6 ranks, 2 CPUs a node) through the emulated Slurm."""
    suite = os.path.join(tmp, "spread.yaml")
    with open(suite, "w") as f:
        f.write(SUITE)
    res = os.path.join(tmp, "slurm-results")
    on1 = [os.path.join(DIR, "bin", "on-node"), "asgd-node1"]
    rc, out, err = sh(on1 + [asgd, "sweep", "submit", suite, "--results", res, "--site", "emulated-cluster",
                             "--sites-dir", os.path.join(src, "slurm", "sites")], env=env)
    check(rc == 0, f"sweep submit: rc {rc}: {out[-300:]} {err[-600:]}")
    t_end = time.time() + 240
    while time.time() < t_end:
        rc, q, _ = sh(on1 + ["squeue", "-h"], env=env)
        if rc == 0 and not q.strip():
            break
        time.sleep(0.5)
    check(time.time() < t_end, "the suite's jobs still queued after 240 s")
    runs = sorted(os.path.join(res, "spread", "runs", f) for f in os.listdir(os.path.join(res, "spread", "runs"))
                  if f.endswith(".h5")) if os.path.isdir(os.path.join(res, "spread", "runs")) else []
    if len(runs) != 2:
        logs = os.path.join(res, "spread", "logs")
        tail = "".join(open(os.path.join(logs, f)).read()[-400:] for f in sorted(os.listdir(logs))) if os.path.isdir(logs) else ""
        raise CheckFailed(f"{len(runs)} of 2 result files; logs: {tail}")
    spans = []
    for path in runs:
        with h5py.File(path) as f:
            machine = json.loads(f.attrs["machine"])
            st = f.attrs["status"]
            st = st.decode() if isinstance(st, bytes) else str(st)
            check(st == "completed", f"{path}: status {st}")
        spans.append(len(machine["nodes"]))
        check(len(machine["rank_nodes"]) == machine["ranks"], f"{path}: rank_nodes {machine['rank_nodes']}")
    check(sorted(spans) == [2, 3], f"the shapes of 4 and 6 ranks ran on {sorted(spans)} nodes, not 2 and 3")
    report = os.path.join(res, "spread", "report", "report.md")
    check(os.path.getsize(report) > 0 if os.path.exists(report) else False, "the report job wrote no report")
    print(f"cluster_test: a suite through the emulated Slurm: 2 runs on {sorted(spans)} nodes, report written")
    # a shape larger than the cluster (10 ranks, 6 CPUs): refused before anything is made
    big = os.path.join(tmp, "big.yaml")
    with open(big, "w") as f:
        f.write(SUITE.replace("name: spread", "name: big").replace("learners: [2, 4]", "learners: [8]"))
    res = os.path.join(tmp, "big-results")
    rc, out, err = sh(on1 + [asgd, "sweep", "submit", big, "--results", res, "--site", "emulated-cluster",
                             "--sites-dir", os.path.join(src, "slurm", "sites")], env=env)
    lines = err.strip().splitlines()
    check(rc == 2 and len(lines) == 1 and "does not fit" in lines[0] and "10 ranks" in lines[0],
          f"a suite larger than the cluster: rc {rc}, stderr {err!r}")
    check(not os.path.exists(res), f"a refused suite left {res}")
    print(f"cluster_test: a suite larger than the cluster refused: {lines[0]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--asgd", required=True)
    ap.add_argument("--cluster", required=True)
    a = ap.parse_args()
    if os.geteuid() != 0 or not all(shutil.which(t) for t in ("ip", "tc", "nsenter", "unshare", "mpirun.openmpi", "slurmctld")):
        print("cluster_test: skipped (needs root, ip, tc, nsenter, unshare, Open MPI and Slurm: "
              "tools/setup.sh --cluster --slurm)")
        return 77
    if not os.access(a.asgd, os.X_OK):
        print(f"cluster_test: skipped ({a.asgd} not built: cmake --preset ompi && cmake --build build/ompi)")
        return 77
    env = dict(os.environ, ASGD_CLUSTER_DIR=DIR, OPENBLAS_NUM_THREADS="1")
    # Open MPI under srun: what `tools/cluster.sh env` prints
    slurm_env = dict(env, SLURM_CONF=os.path.join(DIR, "slurm", "slurm.conf"), OMPI_MCA_pml="ob1",
                     OMPI_MCA_btl="tcp,vader,self", OMPI_MCA_btl_tcp_if_include="eth0",
                     OMPI_MCA_oob_tcp_if_include="eth0")
    os.environ.update(ASGD_CLUSTER_DIR=DIR)
    cl = os.path.abspath(a.cluster)
    asgd = os.path.abspath(a.asgd)
    if os.path.exists(DIR):
        sh([cl, "down"])
    if "asgd-" in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout:
        # node names are global: leave another emulated cluster alone
        print("cluster_test: skipped (another emulated cluster is up: tools/cluster.sh down)")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        try:
            bad_inputs(cl)
            rc, out, err = sh([cl, "up", "3", "--link", "1gbit", "--cpus", "2", "--slurm"])
            check(rc == 0, f"up: {err}")
            rc, _, err = sh([cl, "up", "3"])
            check(rc == 2 and "already up" in err, f"up twice: rc {rc} {err!r}")
            rc, out, _ = sh([cl, "status"])
            check(rc == 0 and out.count("1gbit") == 3, f"status: {out}")
            unbound(os.path.join(DIR, "bin", "mpiexec"), env)
            protocols(os.path.join(DIR, "bin", "mpiexec"), asgd, tmp, env)
            calibrate_across(os.path.join(DIR, "bin", "mpiexec"), asgd, tmp, env)
            ack_class("1Gbit")
            node_lost(os.path.join(DIR, "bin", "mpiexec"), asgd, tmp, env)
            slurm_suite(asgd, os.path.dirname(os.path.dirname(cl)), tmp, slurm_env)
        finally:
            rc, _, err = sh([cl, "down"])
        check(rc == 0, f"down: {err}")
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        check("asgd-" not in left and not os.path.exists(DIR), f"down left: {left!r}")
    print("cluster_test: passed")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except CheckFailed as e:
        print(f"cluster_test: FAILED: {e}", file=sys.stderr)
        sys.exit(1)
