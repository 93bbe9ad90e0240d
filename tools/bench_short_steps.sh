#!/usr/bin/env bash
# Short steps with more ranks than cores: mlp (Fashion-MNIST, 1 BLAS thread per rank), one
# server and two learners (softsync n = 1: every update takes both learners' gradients),
# launched as mpiexec places them and bound to cores, and one server and one learner that
# spin on their own cores, against one process alone.
#   tools/bench_short_steps.sh [-r ROUNDS] [-b "BATCHES"] [-h]
#   -r ROUNDS   interleaved rounds (default 5)
#   -b BATCHES  minibatch sizes, each 1..4096 (default "8 64")
# Each round runs, for each batch size: one process alone, then 1 server + 2 learners
# unbound (`mpiexec -n 3`) and bound (`mpiexec -bind-to core -n 3`: ranks 0 and 2, the
# server and the second learner, share core 0), then 1 server + 1 learner with
# ASGD_WAIT=spin (`mpiexec -n 2`: no rank shares a core or sleeps). Prints, for each batch
# and launch, the median, lowest and highest steady samples/s over the rounds (the updates
# after the first tenth), the median over rounds of each run's slowest twentieth, the median
# ratio against the same round's single process (2.00 would be both cores computing all the
# time), and the learners' median compute time per gradient.
set -euo pipefail
cd "$(dirname "$0")/.."
asgd=${ASGD:-build/default/asgd}
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
rounds=5 batches="8 64"
while getopts ":r:b:h" opt; do
  case $opt in
    r) rounds=$OPTARG ;;
    b) batches=$OPTARG ;;
    h) usage; exit 0 ;;
    :) echo "bench_short_steps.sh: -$OPTARG needs a value (see -h)" >&2; exit 2 ;;
    *) echo "bench_short_steps.sh: unknown option -$OPTARG (see -h)" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
(( $# == 0 )) || { echo "bench_short_steps.sh: unexpected argument '$1' (see -h)" >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]?$ ]] || { echo "bench_short_steps.sh: -r '$rounds': a count 1..99" >&2; exit 2; }
[[ -n ${batches// /} ]] || { echo "bench_short_steps.sh: -b: no batch size given" >&2; exit 2; }
for b in $batches; do
  [[ $b =~ ^[1-9][0-9]{0,3}$ ]] && (( b <= 4096 )) \
    || { echo "bench_short_steps.sh: -b '$b': a batch size 1..4096" >&2; exit 2; }
done
[[ -x $asgd ]] || { echo "bench_short_steps.sh: $asgd not built (cmake --preset default && cmake --build --preset default)" >&2; exit 1; }
py=/usr/bin/python3
[[ -x $py ]] || py=python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1
common=(--model mlp --dataset fashion-mnist --threads 1 --eval-every 1000 --checkpoint-every 0 -q
        --results "$work")
start=$(date +%s)
for ((r = 1; r <= rounds; r++)); do
  echo "round $r of $rounds ($(( $(date +%s) - start )) s so far)" >&2
  for b in $batches; do
    # about 2 s a run at this machine's speed: 32,000 samples alone, 64,000 for the pair
    steps=$(( 32000 / b > 20 ? 32000 / b : 20 ))
    "$asgd" train "${common[@]}" --batch "$b" --max-steps "$steps" --run-id "alone-b$b-r$r" >/dev/null
    mpi=(--batch "$b" --learners 2 --protocol softsync --n 1 --max-steps "$steps")
    mpiexec -n 3 "$asgd" train "${common[@]}" "${mpi[@]}" --run-id "unbound-b$b-r$r" >/dev/null
    mpiexec -bind-to core -n 3 "$asgd" train "${common[@]}" "${mpi[@]}" --run-id "bound-b$b-r$r" >/dev/null
    ASGD_WAIT=spin mpiexec -n 2 "$asgd" train "${common[@]}" --batch "$b" --learners 1 --max-steps "$steps" \
      --run-id "pair-b$b-r$r" >/dev/null
  done
done
"$py" - "$work" "$rounds" $batches <<'EOF'
import os, statistics, sys
import h5py

work, rounds, batches = sys.argv[1], int(sys.argv[2]), sys.argv[3:]


def figures(run):
    """Steady samples/s (after the first tenth of the updates), the slowest
    twentieth's, and the learners' mean compute seconds per gradient."""
    with h5py.File(os.path.join(work, "adhoc", "runs", run + ".h5"), "r") as h:
        u = h["updates"]
        s, w = u["samples"][()], u["wall_s"][()]
        n = len(w)
        k0, step = max(1, n // 10), max(1, n // 20)
        rate = s[k0 + 1:].sum() / (w[-1] - w[k0])
        parts = [s[k + 1:k + step + 1].sum() / (w[k + step] - w[k]) for k in range(k0, n - step, step)]
        ln = h["learners"]
        compute = ln["compute_s"][()].sum() / ln["gradients"][()].sum()
    return rate, min(parts) if parts else rate, compute


print(f"mlp, {rounds} rounds; samples/s after the first tenth; unbound, bound: 1 server + 2 learners, softsync n = 1; "
      "1+1 spin: 1 server + 1 learner, ASGD_WAIT=spin")
print("| batch | launch | median | lowest | highest | slowest twentieth (median) | of one process (median) "
      "| compute ms per gradient |")
print("|---|---|---|---|---|---|---|---|")
for b in batches:
    alone = [figures(f"alone-b{b}-r{r}") for r in range(1, rounds + 1)]
    print(f"| {b} | one process | {statistics.median(a[0] for a in alone):.0f} | {min(a[0] for a in alone):.0f} "
          f"| {max(a[0] for a in alone):.0f} | {statistics.median(a[1] for a in alone):.0f} | 1.00 "
          f"| {1e3 * statistics.median(a[2] for a in alone):.3f} |")
    for launch, name in (("unbound", "unbound"), ("bound", "bound"), ("pair", "1+1 spin")):
        runs = [figures(f"{launch}-b{b}-r{r}") for r in range(1, rounds + 1)]
        rates = [x[0] for x in runs]
        ratio = statistics.median(x[0] / a[0] for x, a in zip(runs, alone))
        print(f"| {b} | {name} | {statistics.median(rates):.0f} | {min(rates):.0f} | {max(rates):.0f} "
              f"| {statistics.median(x[1] for x in runs):.0f} | {ratio:.2f} "
              f"| {1e3 * statistics.median(x[2] for x in runs):.3f} |")
EOF
