#!/usr/bin/env bash
# Two-learner training throughput of the lenet: asgd vs. PyTorch (peer baselines).
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: tools/peers/compare_distributed.sh [-n REPEATS] [-s STEPS] [-w WARMUP] [-d DATA_DIR] [-h]

Trains the lenet on Fashion-MNIST (batch 64 per worker, lr 0.01, momentum 0.9,
weight decay 0.0005) with two workers of one thread each, and compares:
  sync   asgd --protocol hardsync, 2 learners + 1 server (mpiexec -n 3)
         vs. PyTorch DistributedDataParallel, gloo, 2 processes
  async  asgd --protocol softsync --n 2, 2 learners + 1 server (mpiexec -n 3)
         vs. PyTorch Hogwild (shared model, 2 processes, own SGD each)
(tools/peers/distributed_torch.py). The four runs alternate REPEATS times; the
table shows the median samples/s of each (summed over both workers), the ratio
asgd/PyTorch and the final training losses (mean of the last 20 updates/steps).

Every side times the same work: STEPS minibatches per worker after WARMUP
untimed ones. hardsync applies 2 gradients per update, so asgd runs WARMUP+STEPS
updates and skips WARMUP; softsync n=2 applies 1 (floor(2/2)), so asgd runs
2*(WARMUP+STEPS) updates and skips 2*WARMUP. asgd's rate over that window comes
from /updates/wall_s and /updates/samples.

  -n REPEATS   runs of each (default 2, or $REPEATS)
  -s STEPS     timed minibatches per worker (default 140, or $STEPS)
  -w WARMUP    untimed minibatches per worker before them (default 10, or $WARMUP)
  -d DATA_DIR  Fashion-MNIST IDX folder (default /usr/share/datasets/fashion-mnist)
  -h           this help

Environment: ASGD  asgd binary (default build/default/asgd in the repository root),
MPIEXEC (default mpiexec). Needs /usr/bin/python3 with torch and h5py:
tools/setup.sh --peers. asgd's softsync server rank shares the 2 cores with the
learners (it sleeps while waiting); PyTorch runs 2 worker processes.
EOF
}

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
repeats="${REPEATS:-2}"
steps="${STEPS:-140}"
warmup="${WARMUP:-10}"
data_dir="/usr/share/datasets/fashion-mnist"
# shellcheck source=tools/peers/common.sh
source "$here/common.sh"
parse_peer_options compare_distributed "$@"
[[ "$warmup" =~ ^[0-9]+$ ]] ||
  { echo "compare_distributed: WARMUP must be a non-negative integer" >&2; exit 2; }

asgd="${ASGD:-$root/build/default/asgd}"
mpiexec="${MPIEXEC:-mpiexec}"
py=/usr/bin/python3
peer="$here/distributed_torch.py"
if [[ ! -x "$asgd" ]]; then
  echo "compare_distributed: asgd binary not found at $asgd (build it, or set ASGD)" >&2
  exit 1
fi
if ! command -v "$mpiexec" >/dev/null; then
  echo "compare_distributed: $mpiexec not found (tools/setup.sh installs mpich, or set MPIEXEC)" >&2
  exit 1
fi
if [[ ! -x "$py" ]] || ! "$py" -c 'import torch, torch.distributed, h5py, numpy' 2>/dev/null; then
  echo "compare_distributed: $py lacks torch/h5py/numpy; install them with: tools/setup.sh --peers" >&2
  exit 1
fi
if ! "$py" -c 'import sys, torch.distributed as d; sys.exit(not d.is_gloo_available())' 2>/dev/null; then
  echo "compare_distributed: this torch has no gloo backend (torch.distributed); tools/setup.sh --peers" >&2
  exit 1
fi

export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
batch=64
tmp="$(mktemp -d "${TMPDIR:-/tmp}/compare_distributed.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

# One asgd run: $1 protocol, $2 repeat -> JSON line (distributed_torch.py window)
asgd_run() {
  local protocol="$1" id="$1-$2" per_step=1
  [[ "$protocol" == hardsync ]] && per_step=2  # minibatches per worker step per update
  local updates=$(((warmup + steps) * 2 / per_step)) skip=$((warmup * 2 / per_step))
  "$mpiexec" -n 3 "$asgd" train --learners 2 --servers 1 --protocol "$protocol" --n 2 \
    --model lenet --dataset fashion-mnist --data-dir "$data_dir" \
    --batch "$batch" --lr 0.01 --momentum 0.9 --weight-decay 0.0005 \
    --max-steps "$updates" --eval-samples 1000 --threads 1 \
    --results "$tmp" --run-id "$id" -q >"$tmp/$id.log" 2>&1 ||
    { echo "compare_distributed: asgd $protocol failed:" >&2; cat "$tmp/$id.log" >&2; exit 1; }
  "$py" "$peer" window "$tmp/adhoc/runs/$id.h5" --skip "$skip" --loss-window 20 ||
    { echo "compare_distributed: cannot read $id.h5" >&2; exit 1; }
}

# One PyTorch run: $1 ddp|hogwild -> JSON line
torch_run() {
  "$py" "$peer" "$1" --data-dir "$data_dir" --workers 2 --threads 1 --batch "$batch" \
    --steps "$steps" --warmup "$warmup" --loss-window 20 2>"$tmp/$1.err" ||
    { echo "compare_distributed: distributed_torch.py $1 failed:" >&2; cat "$tmp/$1.err" >&2; exit 1; }
}

for ((i = 1; i <= repeats; i++)); do
  for pair in "hardsync ddp" "softsync hogwild"; do
    read -r ours theirs <<<"$pair"
    echo "run $i/$repeats: asgd $ours" >&2
    asgd_run "$ours" "$i" >>"$tmp/$ours.jsonl"
    echo "run $i/$repeats: pytorch $theirs" >&2
    torch_run "$theirs" >>"$tmp/$theirs.jsonl"
  done
done

"$py" - "$tmp" "$steps" "$warmup" <<'EOF'
import json, os, sys, statistics as st
tmp, steps, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def load(name):
    with open(os.path.join(tmp, name + ".jsonl")) as f:
        return [json.loads(line) for line in f]

def med(runs, key):
    return st.median(r[key] for r in runs)

version = load("ddp")[0]["version"]
print(f"lenet / fashion-mnist, 2 workers x 1 thread, batch 64 per worker, {steps} timed "
      f"minibatches per worker after {warmup} warm-up, median of {len(load('ddp'))} runs")
print(f"{'':<8}{'framework':<28}{'samples/s':>11}{'final loss':>12}{'ratio':>8}   runs (samples/s)")
for mode, ours, theirs in (("sync", "hardsync", "ddp"), ("async", "softsync", "hogwild")):
    a, t = load(ours), load(theirs)
    label_t = {"ddp": "DDP gloo", "hogwild": "Hogwild"}[theirs]
    ratio = med(a, "samples_per_s") / med(t, "samples_per_s")
    for label, runs, r in ((f"asgd {ours}", a, f"{ratio:>8.3f}"),
                           (f"pytorch {version} {label_t}", t, f"{'':>8}")):
        print(f"{mode:<8}{label:<28}{med(runs, 'samples_per_s'):>11.1f}"
              f"{med(runs, 'final_loss'):>12.4f}{r}   "
              + " ".join(f"{x['samples_per_s']:.1f}" for x in runs))
        mode = ""
print("ratio = asgd / pytorch samples/s (median). asgd /summary samples_per_s over all updates: "
      f"hardsync {med(load('hardsync'), 'summary_samples_per_s'):.1f}, "
      f"softsync {med(load('softsync'), 'summary_samples_per_s'):.1f}")
EOF
