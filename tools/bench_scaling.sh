#!/usr/bin/env bash
# Throughput of 1 vs 2 learners on lenet (Fashion-MNIST, batch 64 per learner,
# 1 BLAS thread per rank), through the MPI core: 1 server + L learners.
#   tools/bench_scaling.sh [GRADIENTS]   gradients per run (default 300)
# Prints samples/s of each run (from /summary/samples_per_s) and the speedup
# against L=1. Runs one after the other on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
asgd=${ASGD:-build/default/asgd}
grads=${1:-300}
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
base=$(rate l1)
printf "%-34s %12s %9s\n" "run (lenet, mu=64, 1 thread/rank)" "samples/s" "speedup"
for r in l1:"1 learner (1 server + 1 learner)" hard2:"2 learners, hardsync" soft2:"2 learners, softsync n=2"; do
  id=${r%%:*} label=${r#*:}
  v=$(rate "$id")
  printf "%-34s %12s %8.2fx\n" "$label" "$v" "$(echo "$v / $base" | bc -l)"
done
