#!/usr/bin/env bash
# Training throughput of the lenet, one learner: asgd vs. PyTorch (peer baseline),
# on one thread each (THREADS=T: T threads each).
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: tools/peers/compare_lenet.sh [-n REPEATS] [-s STEPS] [-w WARMUP] [-d DATA_DIR] [-h]

Trains the lenet on Fashion-MNIST (batch 64, lr 0.01, momentum 0.9, weight decay
0.0005) on one thread with asgd and with PyTorch (tools/peers/lenet_torch.py),
alternating REPEATS times, and prints the median samples/s of each, their ratio
and both final training losses (mean of the last 20 updates).

Both frameworks time the same window: the STEPS updates after WARMUP untimed
ones. asgd runs WARMUP+STEPS updates; its rate over that window comes from
/updates/wall_s. Its /summary samples_per_s (all updates) is shown for reference.

  -n REPEATS   runs of each framework (default 3, or $REPEATS)
  -s STEPS     timed updates (default 300, or $STEPS)
  -w WARMUP    untimed updates before them (default 20, or $WARMUP)
  -d DATA_DIR  Fashion-MNIST IDX folder (default /usr/share/datasets/fashion-mnist)
  -h           this help

Environment: ASGD     asgd binary (default build/default/asgd in the repository root).
             THREADS  threads of each framework (default 1): asgd --threads, torch
                      set_num_threads; OMP_NUM_THREADS is set to it too (an asgd of the
                      openmp preset uses Kokkos threads; a Serial one, BLAS threads)
Needs /usr/bin/python3 with torch and h5py: tools/setup.sh --peers
EOF
}

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
repeats="${REPEATS:-3}"
steps="${STEPS:-300}"
warmup="${WARMUP:-20}"
data_dir="/usr/share/datasets/fashion-mnist"
# shellcheck source=tools/peers/common.sh
source "$here/common.sh"
parse_peer_options compare_lenet "$@"
[[ "$warmup" =~ ^[0-9]+$ ]] || { echo "compare_lenet: WARMUP must be a non-negative integer" >&2; exit 2; }

asgd="${ASGD:-$root/build/default/asgd}"
py=/usr/bin/python3
if [[ ! -x "$asgd" ]]; then
  echo "compare_lenet: asgd binary not found at $asgd (build it, or set ASGD)" >&2
  exit 1
fi
if [[ ! -x "$py" ]] || ! "$py" -c 'import torch, h5py, numpy' 2>/dev/null; then
  echo "compare_lenet: $py lacks torch/h5py/numpy; install them with: tools/setup.sh --peers" >&2
  exit 1
fi

threads="${THREADS:-1}"
[[ "$threads" =~ ^[1-9][0-9]*$ ]] || { echo "compare_lenet: THREADS must be a positive integer" >&2; exit 2; }
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads"
batch=64
tmp="$(mktemp -d "${TMPDIR:-/tmp}/compare_lenet.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

# One asgd run -> "<window samples/s> <summary samples/s> <final loss>"
asgd_run() {
  local id="lenet-$1"
  "$asgd" train --model lenet --dataset fashion-mnist --data-dir "$data_dir" \
    --batch "$batch" --lr 0.01 --momentum 0.9 --weight-decay 0.0005 \
    --max-steps $((warmup + steps)) --eval-samples 1000 --threads "$threads" \
    --results "$tmp" --run-id "$id" -q >"$tmp/$id.log" 2>&1 ||
    { echo "compare_lenet: asgd failed:" >&2; cat "$tmp/$id.log" >&2; exit 1; }
  "$py" - "$tmp/adhoc/runs/$id.h5" "$warmup" "$steps" <<'EOF'
import sys, h5py
path, warmup, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with h5py.File(path, "r") as f:
    wall = f["updates/wall_s"][:]
    samples = f["updates/samples"][:]
    loss = f["updates/train_loss"][:]
    summary = float(f["summary"].attrs["samples_per_s"])
if len(wall) != warmup + steps:
    sys.exit(f"compare_lenet: {path} has {len(wall)} updates, expected {warmup + steps}")
t0 = wall[warmup - 1] if warmup > 0 else 0.0
print(samples[warmup:].sum() / (wall[-1] - t0), summary, loss[-20:].mean())
EOF
}

# One PyTorch run -> "<samples/s> <final loss> <version>"
torch_run() {
  "$py" "$here/lenet_torch.py" --data-dir "$data_dir" --threads "$threads" --batch "$batch" \
    --steps "$steps" --warmup "$warmup" --loss-window 20 >"$tmp/torch-$1.json" ||
    { echo "compare_lenet: lenet_torch.py failed" >&2; exit 1; }
  "$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["samples_per_s"], d["final_loss"], d["version"])' \
    "$tmp/torch-$1.json"
}

for ((i = 1; i <= repeats; i++)); do
  echo "run $i/$repeats: asgd" >&2
  asgd_run "$i" >>"$tmp/asgd.txt"
  echo "run $i/$repeats: pytorch" >&2
  torch_run "$i" >>"$tmp/torch.txt"
done

"$py" - "$tmp/asgd.txt" "$tmp/torch.txt" "$steps" "$warmup" "$threads" <<'EOF'
import sys, statistics as st
a = [l.split() for l in open(sys.argv[1])]
t = [l.split() for l in open(sys.argv[2])]
steps, warmup, threads = sys.argv[3], sys.argv[4], sys.argv[5]
a_sps = st.median(float(r[0]) for r in a)
a_sum = st.median(float(r[1]) for r in a)
a_loss = st.median(float(r[2]) for r in a)
t_sps = st.median(float(r[0]) for r in t)
t_loss = st.median(float(r[1]) for r in t)
print(f"lenet / fashion-mnist, batch 64, {threads} thread(s), {steps} timed updates after {warmup} warm-up, "
      f"median of {len(a)} runs")
print(f"{'framework':<20}{'samples/s':>12}{'final loss':>12}   runs (samples/s)")
print(f"{'asgd':<20}{a_sps:>12.1f}{a_loss:>12.4f}   " + " ".join(f"{float(r[0]):.1f}" for r in a))
print(f"{'pytorch ' + t[0][2]:<20}{t_sps:>12.1f}{t_loss:>12.4f}   " + " ".join(f"{float(r[0]):.1f}" for r in t))
print(f"{'ratio asgd/pytorch':<20}{a_sps / t_sps:>12.3f}")
print(f"(asgd /summary samples_per_s over all {int(steps) + int(warmup)} updates: {a_sum:.1f})")
EOF
