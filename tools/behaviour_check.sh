#!/usr/bin/env bash
# Behaviour preserved across a change: runs a fixed set of trainings with an old
# build (a commit, built here once) and with the current one, and compares their
# results series bit for bit.
#
#   tools/behaviour_check.sh [--base COMMIT] [--new BIN] [--throughput] [--out DIR]
#
#   --base COMMIT  the commit to compare against (default cd3392b, the reference
#                  commit whose behaviour the current one must keep); built into build/behaviour/<commit>
#                  with the ci preset the first time, reused after
#   --new BIN      the asgd binary under test (default build/ci/asgd)
#   --throughput   also time lenet single-learner and 2-learner MPI runs, old and new
#                  interleaved (ABAB...), and print new/old samples per second
#   --out DIR      where the runs write (default build/behaviour/runs; emptied first)
#
# The runs (OPENBLAS_NUM_THREADS=1, one thread): one learner (mlp, Fashion-MNIST);
# MPI hardsync, 2 learners, 1 server (mpiexec -n 3); MPI allreduce, 3 learners; virtual 30-learner softsync
# with fixed timing; virtual nsync (8 learners, n_sync 4, lognormal timing);
# 4 virtual learners with each merge rule but the sum, with DC-ASGD, with EASGD and with
# SSP (staleness 1, a straggler, so that learners are held).
# Compared exactly: /updates, /evals, /staleness/histogram, the per-learner
# counts, status and the summary's counts and errors. Wall-clock columns of real
# runs (wall_s, eval_s, timing columns) are measured, so they are left out there;
# in virtual runs they are the virtual clock and compared too.
# Exit 0: every series identical; 1: a difference (printed); 2: bad usage.
set -euo pipefail

usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; }
root=$(cd "$(dirname "$0")/.." && pwd)
base=cd3392b new="$root/build/ci/asgd" throughput=0 out="$root/build/behaviour/runs"
while (($#)); do
  case "$1" in
    --base) base=${2:?--base needs a commit}; shift 2 ;;
    --new) new=${2:?--new needs a path}; shift 2 ;;
    --throughput) throughput=1; shift ;;
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "behaviour_check.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
[[ -x "$new" ]] || { echo "behaviour_check.sh: --new $new: no such executable (build first)" >&2; exit 2; }
sha=$(git -C "$root" rev-parse --verify --quiet "$base^{commit}") ||
  { echo "behaviour_check.sh: --base $base: no such commit in $root" >&2; exit 2; }
short=${sha:0:12}
py=/usr/bin/python3
export OPENBLAS_NUM_THREADS=1

old_src="$root/build/behaviour/$short/src"
old="$old_src/build/ci/asgd"
if [[ ! -x "$old" ]]; then
  echo "== building the base $short (once; reused after) in $old_src"
  rm -rf "$old_src" && mkdir -p "$old_src"
  git -C "$root" archive "$sha" | tar -x -C "$old_src"
  (cd "$old_src" && cmake --preset ci >/dev/null && cmake --build --preset ci -j 2 --target asgd >/dev/null)
fi

rm -rf "$out" && mkdir -p "$out"
FM=(--dataset fashion-mnist -q --threads 1 --seed 3)
SYN=(--dataset synthetic --synthetic-size 12 --synthetic-train 2048 --synthetic-test 256 -q --threads 1 --seed 5)
run_set() {  # $1 binary, $2 folder
  local bin=$1 dir=$2
  "$bin" train --model mlp "${FM[@]}" --epochs 0.25 --eval-every 0.05 --batch 32 \
    --results "$dir" --run-id single
  mpiexec -n 3 "$bin" train --model mlp "${FM[@]}" --epochs 0.25 --eval-every 0.05 --batch 32 \
    --learners 2 --servers 1 --protocol hardsync --results "$dir" --run-id mpi-hardsync
  mpiexec -n 3 "$bin" train --model mlp "${FM[@]}" --epochs 0.25 --eval-every 0.05 --batch 32 \
    --learners 3 --protocol allreduce --weight-decay 0.0005 --results "$dir" --run-id mpi-allreduce
  "$bin" train --model mlp "${SYN[@]}" --epochs 2 --eval-every 0.25 --batch 8 --virtual \
    --learners 30 --protocol softsync --n 3 --lr-policy staleness --timing fixed \
    --compute-s 0.01 --comm-s 0.002 --results "$dir" --run-id virtual-softsync
  "$bin" train --model mlp "${SYN[@]}" --epochs 2 --eval-every 0.25 --batch 8 --virtual \
    --learners 8 --protocol nsync --n-sync 4 --timing lognormal --compute-s 0.01 \
    --comm-s 0.002 --straggler 2 --straggler-factor 3 --results "$dir" --run-id virtual-nsync
  local V=(--model mlp "${SYN[@]}" --epochs 1 --eval-every 0.5 --batch 8 --virtual --learners 4
           --timing lognormal --compute-s 0.01 --comm-s 0.002 --results "$dir")
  "$bin" train "${V[@]}" --protocol nsync --n-sync 3 --merge mean --run-id virtual-merge-mean
  "$bin" train "${V[@]}" --protocol nsync --n-sync 3 --merge server-sgd --server-momentum 0.5 \
    --run-id virtual-merge-server-sgd
  "$bin" train "${V[@]}" --protocol nsync --n-sync 3 --merge adagrad --server-lr 0.01 \
    --run-id virtual-merge-adagrad
  "$bin" train "${V[@]}" --protocol dcasgd --run-id virtual-dcasgd
  "$bin" train "${V[@]}" --protocol easgd --tau 4 --run-id virtual-easgd
  "$bin" train "${V[@]}" --protocol ssp --staleness 1 --straggler 1 --straggler-factor 3 --run-id virtual-ssp
}
echo "== runs with the base $short"
run_set "$old" "$out/old"
echo "== runs with $new"
run_set "$new" "$out/new"

"$py" - "$out/old" "$out/new" <<'EOF'
import glob, os, sys
import h5py, numpy as np

old_dir, new_dir = sys.argv[1], sys.argv[2]
MEASURED = {"wall_s", "eval_s", "compute_s", "wait_s", "push_s", "pull_s", "stage_s"}
SUMMARY = ["updates", "epochs", "final_test_error", "best_test_error", "target_error"]
bad = 0

def table(f, group, virtual):
    out = {}
    if group not in f:
        return out
    g = f[group]
    for name in sorted(g.keys()):
        if name in MEASURED and not virtual:
            continue
        out[name] = np.asarray(g[name][()])
    return out

def same(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and (
        np.array_equal(a, b, equal_nan=True) if a.dtype.kind == "f" else np.array_equal(a, b))

for path in sorted(glob.glob(os.path.join(old_dir, "*", "runs", "*.h5"))):
    rel = os.path.relpath(path, old_dir)
    other = os.path.join(new_dir, rel)
    if not os.path.exists(other):
        print(f"DIFF {rel}: the new build wrote no such file"); bad += 1; continue
    with h5py.File(path) as a, h5py.File(other) as b:
        virtual = a.attrs["mode"] == "virtual" if "mode" in a.attrs else False
        diffs = []
        for key in ("status",):
            if a.attrs.get(key) != b.attrs.get(key):
                diffs.append(f"{key}: {a.attrs.get(key)} vs {b.attrs.get(key)}")
        for group in ("updates", "evals", "staleness", "learners"):
            ta, tb = table(a, group, virtual), table(b, group, virtual)
            for name in sorted(set(ta) | set(tb)):
                if name not in ta or name not in tb:
                    # a column only one of them writes (a new, optional column) is no change of series
                    continue
                if not same(ta[name], tb[name]):
                    diffs.append(f"/{group}/{name} differs")
        for key in SUMMARY:
            x, y = a["summary"].attrs.get(key), b["summary"].attrs.get(key)
            if not (x == y or (x is not None and y is not None and np.isnan(x) and np.isnan(y))):
                diffs.append(f"/summary {key}: {x} vs {y}")
        rows = len(a["updates"]["clock"]) if "updates" in a else 0
        if diffs:
            bad += 1
            print(f"DIFF {rel}: " + "; ".join(diffs))
        else:
            print(f"same {rel}: {rows} updates, {len(a['evals']['clock'])} evaluations, status "
                  f"{a.attrs.get('status')}")
n = len(glob.glob(os.path.join(old_dir, "*", "runs", "*.h5")))
if n != 11:
    print(f"expected 11 results files from the base, found {n}"); bad += 1
print("behaviour preserved: every series bit-identical" if not bad else f"{bad} file(s) differ")
sys.exit(1 if bad else 0)
EOF

if ((throughput)); then
  echo "== throughput, lenet on Fashion-MNIST, old and new interleaved (CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs))"
  tp() {  # binary, mode, tag -> samples per second
    local bin=$1 mode=$2 dir="$out/tp-$3"
    rm -rf "$dir"
    if [[ $mode == single ]]; then
      "$bin" train --model lenet "${FM[@]}" --epochs 0.12 --eval-every 100 --results "$dir" \
        --run-id tp >/dev/null
    else
      mpiexec -n 3 "$bin" train --model lenet "${FM[@]}" --epochs 0.12 --eval-every 100 \
        --learners 2 --protocol softsync --results "$dir" --run-id tp >/dev/null
    fi
    "$py" -c "import h5py,glob; print(h5py.File(glob.glob('$dir/*/runs/tp.h5')[0])['summary'].attrs['samples_per_s'])"
  }
  for mode in single mpi-L2; do
    ratios=()
    for i in 1 2 3; do
      a=$(tp "$old" "$mode" "old$i"); b=$(tp "$new" "$mode" "new$i")
      ratios+=("$("$py" -c "print(f'{$b/$a:.3f}')")")
      echo "  $mode pair $i: old $a, new $b samples/s"
    done
    echo "  $mode new/old: ${ratios[*]}"
  done
fi
