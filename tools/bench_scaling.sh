#!/usr/bin/env bash
# The MPI core's own cost on one node: lenet (Fashion-MNIST, batch 64 per learner, 1 BLAS
# thread per rank) through 1 server + L learners against single-process training.
#   tools/bench_scaling.sh [-r ROUNDS] [-w "POLICIES"] [GRADIENTS]
#   -r ROUNDS    interleaved rounds (default 5)
#   -w POLICIES  ASGD_WAIT policies to compare, each run in every round (default "yield spin");
#                POLICY-nobell runs POLICY with the doorbells off (ASGD_DOORBELL=0), POLICY-copy
#                with learners that copy the weights out of the servers' windows (ASGD_IN_PLACE=0),
#                POLICY-nobell-copy both
#   GRADIENTS    gradients per run (default 200)
# Each round runs, one after the other: one single process, two single processes at once
# (what the machine allows at best), and for each policy 1 server + 1 learner, 2 learners
# hardsync, softsync n = 2 and nsync n_sync = 4. Prints each run's median samples/s and
# median ratio against the same round's single process, and each learner's time per
# gradient (compute, waiting for a reply, pushing, copying the weights) from the results.
set -euo pipefail
cd "$(dirname "$0")/.."
asgd=${ASGD:-build/default/asgd}
usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; }
rounds=5 policies="yield spin"
while getopts ":r:w:h" opt; do
  case $opt in
    r) rounds=$OPTARG ;;
    w) policies=$OPTARG ;;
    h) usage; exit 0 ;;
    :) echo "bench_scaling.sh: -$OPTARG needs a value (see -h)" >&2; exit 2 ;;
    *) echo "bench_scaling.sh: unknown option -$OPTARG (see -h)" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
(( $# <= 1 )) || { echo "bench_scaling.sh: one argument at most, GRADIENTS (see -h)" >&2; exit 2; }
grads=${1:-200}
[[ $grads =~ ^[1-9][0-9]{0,6}$ ]] || { echo "bench_scaling.sh: GRADIENTS '$grads': a count 1..9999999" >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]?$ ]] || { echo "bench_scaling.sh: -r '$rounds': a count 1..99" >&2; exit 2; }
for p in $policies; do
  [[ $p =~ ^(yield|spin|sleep)(-nobell)?(-copy)?$ ]] ||
    { echo "bench_scaling.sh: -w '$p': want yield, spin or sleep, each with -nobell, -copy, -nobell-copy or neither" >&2; exit 2; }
done
[[ -n ${policies// /} ]] || { echo "bench_scaling.sh: -w: no policy given" >&2; exit 2; }
[[ -x $asgd ]] || { echo "bench_scaling.sh: $asgd not built (cmake --preset default && cmake --build --preset default)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1
common=(--model lenet --dataset fashion-mnist --batch 64 --threads 1 --eval-every 100
        --eval-samples 500 --checkpoint-every 0 -q --results "$work")
mpi() {  # ID POLICY RANKS ARGS...
  local id=$1 policy=$2 n=$3
  shift 3
  local bell=1 in_place=1
  [[ $policy == *-copy ]] && { in_place=0; policy=${policy%-copy}; }
  [[ $policy == *-nobell ]] && { bell=0; policy=${policy%-nobell}; }
  ASGD_WAIT=$policy ASGD_DOORBELL=$bell ASGD_IN_PLACE=$in_place mpiexec -n "$n" "$asgd" train "${common[@]}" "$@" --run-id "$id" >/dev/null
}
start=$(date +%s)
for ((r = 1; r <= rounds; r++)); do
  echo "round $r of $rounds ($(( $(date +%s) - start )) s so far)" >&2
  "$asgd" train "${common[@]}" --max-steps "$grads" --run-id "alone-r$r" >/dev/null
  "$asgd" train "${common[@]}" --max-steps "$grads" --run-id "pairA-r$r" --seed 2 >/dev/null &
  "$asgd" train "${common[@]}" --max-steps "$grads" --run-id "pairB-r$r" --seed 3 >/dev/null
  wait
  for p in $policies; do
    mpi "l1-$p-r$r" "$p" 2 --learners 1 --max-steps "$grads"
    mpi "hard2-$p-r$r" "$p" 3 --learners 2 --protocol hardsync --max-steps $(( grads >= 2 ? grads / 2 : 1 ))
    mpi "soft2-$p-r$r" "$p" 3 --learners 2 --protocol softsync --n 2 --max-steps "$grads"
    mpi "nsync2-$p-r$r" "$p" 3 --learners 2 --protocol nsync --n-sync 4 --max-steps $(( grads >= 8 ? grads / 8 : 1 ))
  done
done
/usr/bin/python3 - "$work/adhoc/runs" "$rounds" "$policies" <<'PY'
import glob, os, statistics as st, sys
import h5py
runs, rounds, policies = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
def h5(rid):
    return h5py.File(os.path.join(runs, rid + ".h5"), "r")
def rate(rid):
    return float(h5(rid)["summary"].attrs["samples_per_s"])
def ratios(prefix):
    out = []
    for r in range(1, rounds + 1):
        base = rate(f"alone-r{r}")
        v = rate(f"pairA-r{r}") + rate(f"pairB-r{r}") if prefix == "pair" else rate(f"{prefix}-r{r}")
        out.append((v, v / base))
    return out
rows = [("single process", "alone"), ("two single processes at once (the ceiling)", "pair")]
for p in policies:
    rows += [(f"1 server + 1 learner, {p}", f"l1-{p}"), (f"2 learners hardsync, {p}", f"hard2-{p}"),
             (f"2 learners softsync n = 2, {p}", f"soft2-{p}"), (f"2 learners nsync 4, {p}", f"nsync2-{p}")]
print(f"lenet, batch 64, 1 thread per rank; medians of {rounds} interleaved rounds")
print("| run | samples/s | of one process (same round) | per gradient, learner 0: compute / wait / push / copy (ms) |")
print("|---|---|---|---|")
for label, prefix in rows:
    rs = ratios(prefix)
    split = ""
    if prefix not in ("alone", "pair"):
        parts = []
        for key in ("compute_s", "wait_s", "push_s", "pull_s"):
            per = []
            for r in range(1, rounds + 1):
                ln = h5(f"{prefix}-r{r}")["learners"]
                per.append(1e3 * float(ln[key][0]) / max(1, int(ln["gradients"][0])))
            parts.append(f"{st.median(per):.2f}")
        split = " / ".join(parts)
    print(f"| {label} | {st.median(v for v, _ in rs):.0f} | {st.median(q for _, q in rs):.3f}x | {split} |")
PY
echo "took $(( $(date +%s) - start )) s" >&2
