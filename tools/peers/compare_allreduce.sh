#!/usr/bin/env bash
# Two-learner training throughput of the lenet without servers: asgd
# --protocol allreduce vs. PyTorch DistributedDataParallel (gloo).
set -euo pipefail

usage() {
  cat <<'EOF2'
Usage: tools/peers/compare_allreduce.sh [-n REPEATS] [-s STEPS] [-w WARMUP] [-d DATA_DIR] [-h]

Trains the lenet on Fashion-MNIST (batch 64 per worker, lr 0.01, momentum 0.9,
weight decay 0.0005) with two worker processes of one thread each and no
parameter server, and compares:
  asgd   --protocol allreduce --learners 2 (mpiexec -n 2): each rank computes a
         gradient, the ranks sum them with MPI_Iallreduce, each applies the
         mean (hardsync's update)
  ddp    PyTorch DistributedDataParallel, gloo, 2 processes: each step
         all-reduces (averages) the gradients, then each applies the same SGD
         step (tools/peers/distributed_torch.py ddp)
Both are synchronous SGD with the same model (src/nn/zoo.cpp's lenet, layer for
layer: tools/peers/lenet_torch.py), data, batch and recipe. The runs alternate
(asgd, ddp, asgd, ddp, ...) REPEATS times, so drift of a shared machine hits
both alike; the table shows the median samples/s of each (summed over both
workers), every run's figure, the ratio asgd/DDP of the medians, the ratio of
each ABAB pair, the final training losses (mean of the last 20 updates/steps)
and whether the ratio meets GOAL (default 1.3).

Every side times the same work: STEPS minibatches per worker after WARMUP
untimed ones. allreduce applies 2 gradients per update (one per rank), so asgd
runs WARMUP+STEPS updates and its rate is taken from /updates/wall_s and
/updates/samples over the updates after the first WARMUP. DDP's window runs
from a barrier after the warm-up to the end of the last worker's last step.

  -n REPEATS   runs of each (default 3, or $REPEATS)
  -s STEPS     timed minibatches per worker (default 140, or $STEPS)
  -w WARMUP    untimed minibatches per worker before them (default 10, or $WARMUP)
  -d DATA_DIR  Fashion-MNIST IDX folder (default /usr/share/datasets/fashion-mnist)
  -h           this help

Environment: ASGD  asgd binary (default build/default/asgd in the repository root),
MPIEXEC (default mpiexec), GOAL (default 1.3). One thread per process on both
sides: OMP_NUM_THREADS=1, OPENBLAS_NUM_THREADS=1, MKL_NUM_THREADS=1, asgd
--threads 1, torch.set_num_threads(1). Needs /usr/bin/python3 with torch
(gloo) and h5py: tools/setup.sh --peers.
EOF2
}

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
repeats="${REPEATS:-3}"
steps="${STEPS:-140}"
warmup="${WARMUP:-10}"
data_dir="/usr/share/datasets/fashion-mnist"
# shellcheck source=tools/peers/common.sh
source "$here/common.sh"
parse_peer_options compare_allreduce "$@"
[[ "$warmup" =~ ^[0-9]+$ ]] ||
  { echo "compare_allreduce: WARMUP must be a non-negative integer" >&2; exit 2; }
goal="${GOAL:-1.3}"
[[ "$goal" =~ ^[0-9]+(\.[0-9]+)?$ ]] ||
  { echo "compare_allreduce: GOAL must be a number such as 1.3" >&2; exit 2; }

asgd="${ASGD:-$root/build/default/asgd}"
mpiexec="${MPIEXEC:-mpiexec}"
py=/usr/bin/python3
peer="$here/distributed_torch.py"
if [[ ! -x "$asgd" ]]; then
  echo "compare_allreduce: asgd binary not found at $asgd (build it, or set ASGD)" >&2
  exit 1
fi
if ! command -v "$mpiexec" >/dev/null; then
  echo "compare_allreduce: $mpiexec not found (tools/setup.sh installs mpich, or set MPIEXEC)" >&2
  exit 1
fi
if [[ ! -x "$py" ]] || ! "$py" -c 'import torch, torch.distributed, h5py, numpy' 2>/dev/null; then
  echo "compare_allreduce: $py lacks torch/h5py/numpy; install them with: tools/setup.sh --peers" >&2
  exit 1
fi
if ! "$py" -c 'import sys, torch.distributed as d; sys.exit(not d.is_gloo_available())' 2>/dev/null; then
  echo "compare_allreduce: this torch has no gloo backend (torch.distributed); tools/setup.sh --peers" >&2
  exit 1
fi

export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
batch=64
tmp="$(mktemp -d "${TMPDIR:-/tmp}/compare_allreduce.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

# One asgd allreduce run: $1 repeat -> JSON line (distributed_torch.py window)
asgd_run() {
  local id="allreduce-$1"
  "$mpiexec" -n 2 "$asgd" train --learners 2 --protocol allreduce \
    --model lenet --dataset fashion-mnist --data-dir "$data_dir" \
    --batch "$batch" --lr 0.01 --momentum 0.9 --weight-decay 0.0005 \
    --max-steps $((warmup + steps)) --eval-samples 1000 --checkpoint-every 0 --threads 1 \
    --results "$tmp" --run-id "$id" -q >"$tmp/$id.log" 2>&1 ||
    { echo "compare_allreduce: asgd allreduce failed:" >&2; cat "$tmp/$id.log" >&2; exit 1; }
  "$py" "$peer" window "$tmp/adhoc/runs/$id.h5" --skip "$warmup" --loss-window 20 ||
    { echo "compare_allreduce: cannot read $id.h5" >&2; exit 1; }
}

# One DDP run -> JSON line
ddp_run() {
  "$py" "$peer" ddp --data-dir "$data_dir" --workers 2 --threads 1 --batch "$batch" \
    --steps "$steps" --warmup "$warmup" --loss-window 20 2>"$tmp/ddp.err" ||
    { echo "compare_allreduce: distributed_torch.py ddp failed:" >&2; cat "$tmp/ddp.err" >&2; exit 1; }
}

for ((i = 1; i <= repeats; i++)); do
  echo "run $i/$repeats: asgd allreduce" >&2
  asgd_run "$i" >>"$tmp/asgd.jsonl"
  echo "run $i/$repeats: pytorch ddp" >&2
  ddp_run >>"$tmp/ddp.jsonl"
done

"$py" - "$tmp" "$steps" "$warmup" "$goal" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')" <<'EOF2'
import json, os, sys, statistics as st
tmp, steps, warmup, goal, cpu = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]

def load(name):
    with open(os.path.join(tmp, name + ".jsonl")) as f:
        return [json.loads(line) for line in f]

a, t = load("asgd"), load("ddp")
med = lambda runs, key: st.median(r[key] for r in runs)
ratio = med(a, "samples_per_s") / med(t, "samples_per_s")
pairs = [x["samples_per_s"] / y["samples_per_s"] for x, y in zip(a, t)]
print(f"lenet / fashion-mnist, 2 workers x 1 thread, no servers, batch 64 per worker, "
      f"{steps} timed minibatches per worker after {warmup} warm-up, median of {len(a)} "
      f"interleaved runs; CPU {cpu}")
print(f"{'framework':<30}{'samples/s':>11}{'final loss':>12}   runs (samples/s)")
for label, runs in (("asgd allreduce (MPI)", a), (f"pytorch {t[0]['version']} DDP gloo", t)):
    print(f"{label:<30}{med(runs, 'samples_per_s'):>11.1f}{med(runs, 'final_loss'):>12.4f}   "
          + " ".join(f"{x['samples_per_s']:.1f}" for x in runs))
print(f"ratio asgd/DDP {ratio:.3f} (per pair: {' '.join(f'{p:.3f}' for p in pairs)}); "
      f"goal {goal:g}x: {'met' if ratio >= goal else 'NOT met'}")
print(f"asgd /summary samples_per_s over all updates: {med(a, 'summary_samples_per_s'):.1f}")
EOF2
