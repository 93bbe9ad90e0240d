#!/usr/bin/env bash
# Throughput of 1 vs 2 learners on lenet (Fashion-MNIST, batch 64 per learner,
# 1 BLAS thread per rank), through the MPI core: 1 server + L learners.
#   tools/bench_scaling.sh [GRADIENTS]   gradients per run (default 300)
# Prints samples/s of each run (from /summary/samples_per_s) and the speedup
# against L=1. Runs one after the other on this machine. Also measures what
# this machine allows at best: two independent single-process trainings at
# once against one alone (on a VM whose vCPUs share a host core, or under
# steal, that ceiling is below 2).
set -euo pipefail
cd "$(dirname "$0")/.."
asgd=${ASGD:-build/default/asgd}
case ${1:-} in
  -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
(( $# <= 1 )) || { echo "bench_scaling.sh: one argument at most, GRADIENTS (see -h)" >&2; exit 2; }
grads=${1:-300}
[[ $grads =~ ^[1-9][0-9]{0,6}$ ]] || { echo "bench_scaling.sh: GRADIENTS '$grads': a count 1..9999999" >&2; exit 2; }
[[ -x $asgd ]] || { echo "bench_scaling.sh: $asgd not built (cmake --preset default && cmake --build --preset default)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1
common=(--model lenet --dataset fashion-mnist --batch 64 --threads 1 --eval-every 100
        --eval-samples 500 --checkpoint-every 0 -q --results "$work")
rate() { /usr/bin/python3 -c "import h5py,sys; print('%.1f' % h5py.File(sys.argv[1])['summary'].attrs['samples_per_s'])" "$work/adhoc/runs/$1.h5"; }
mpiexec -n 2 "$asgd" train "${common[@]}" --learners 1 --max-steps "$grads" --run-id l1 >/dev/null
mpiexec -n 3 "$asgd" train "${common[@]}" --learners 2 --protocol hardsync --max-steps $((grads / 2)) --run-id hard2 >/dev/null
mpiexec -n 3 "$asgd" train "${common[@]}" --learners 2 --protocol softsync --n 2 --max-steps "$grads" --run-id soft2 >/dev/null
single=(--model lenet --dataset fashion-mnist --batch 64 --threads 1 --eval-every 100
        --eval-samples 500 --checkpoint-every 0 -q --results "$work" --max-steps "$grads")
"$asgd" train "${single[@]}" --run-id alone >/dev/null
"$asgd" train "${single[@]}" --run-id pair1 --seed 2 >/dev/null &
"$asgd" train "${single[@]}" --run-id pair2 --seed 3 >/dev/null
wait
base=$(rate l1) alone=$(rate alone)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }
printf "%-36s %10s %14s %14s\n" "run (lenet, mu=64, 1 thread/rank)" "samples/s" "vs 1 learner" "vs 1 process"
for r in alone:"1 learner, single process" l1:"1 learner (1 server + 1 learner)" \
         hard2:"2 learners, hardsync" soft2:"2 learners, softsync n=2"; do
  id=${r%%:*} label=${r#*:}
  v=$(rate "$id")
  printf "%-36s %10s %14s %14s\n" "$label" "$v" "$(ratio "$v" "$base")" "$(ratio "$v" "$alone")"
done
p1=$(rate pair1) p2=$(rate pair2)
printf "\nmachine ceiling: two single-process trainings at once: %s + %s samples/s = %s of one alone\n" \
  "$p1" "$p2" "$(ratio "$(awk -v a="$p1" -v b="$p2" 'BEGIN { print a + b }')" "$alone")"
