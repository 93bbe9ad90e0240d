#!/usr/bin/env bash
# The OpenMP backend's figures, same-run ratios from asgd_micro:
#   tools/bench_openmp.sh [-r ROUNDS] [-l]
# - lenet's whole training step (forward, loss, backward, update; batch 64) at 1
#   and 2 threads, alternated ROUNDS times (default 5): the median of each, the
#   median of the per-round ratios 2 threads / 1 thread, and the step's GFLOP/s
#   against the sgemm timed around it in the same process (asgd_micro's paired
#   sgemm: the median of 10 1024^3 sgemms, 2 threads where the step has 2);
# - with -l also each lenet layer's forward and backward pass, Serial (the ci or
#   default build) and OpenMP at 1 and 2 threads, median of ROUNDS.
# Needs build/openmp (tools/setup.sh --kokkos-openmp; cmake --preset openmp).
# The machine's noise is large (a round at 2 threads was seen at 1.7x its
# neighbours' time on a 2-vCPU VM): read the medians, not one round.
# Environment: OMP_WAIT_POLICY is taken as it is (unset: libgomp's default; CI
# sets passive, which is slower here, see docs/INSTALL.md); OPENBLAS_CORETYPE too.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=5 layers=0
while getopts ":r:lh" o; do
  case $o in
    r) rounds=$OPTARG ;;
    l) layers=1 ;;
    h) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_openmp.sh: bad option -$OPTARG (usage: tools/bench_openmp.sh [-r ROUNDS] [-l])" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
(( $# == 0 )) || { echo "bench_openmp.sh: unexpected argument '$1' (rounds: -r ROUNDS; see -h)" >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]?$ ]] || { echo "bench_openmp.sh: -r '$rounds': a count 1..99" >&2; exit 2; }
micro=build/openmp/asgd_micro
[[ -x $micro ]] || { echo "bench_openmp.sh: $micro not built (tools/setup.sh --kokkos-openmp; cmake --preset openmp && cmake --build build/openmp)" >&2; exit 1; }
serial=""
for b in build/ci/asgd_micro build/default/asgd_micro; do [[ -x $b ]] && { serial=$b; break; }; done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1
run() {  # run TAG BINARY THREADS FILTER
  OMP_NUM_THREADS=$3 "$2" --threads "$3" --benchmark_filter="$4" --benchmark_min_time=0.5 \
    --benchmark_out="$work/$1.json" --benchmark_out_format=json >/dev/null 2>&1
}
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(getconf _NPROCESSORS_ONLN) cores; BLAS core ${OPENBLAS_CORETYPE:-chosen by OpenBLAS}; OMP_WAIT_POLICY ${OMP_WAIT_POLICY:-unset}"
for r in $(seq "$rounds"); do
  for t in 1 2; do run "step-$t-$r" "$micro" "$t" '^lenet/step/'; done
  if ((layers)); then
    for t in 1 2; do run "layers-$t-$r" "$micro" "$t" '^lenet/[a-z0-9]+/(forward|backward)/'; done
    [[ -n $serial ]] && run "layers-s-$r" "$serial" 1 '^lenet/[a-z0-9]+/(forward|backward)/'
  fi
  echo "round $r of $rounds done" >&2
done
/usr/bin/python3 - "$work" "$rounds" "$layers" <<'PY'
import json, statistics as st, sys, os
work, rounds, layers = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
def bench(tag):
    p = os.path.join(work, tag + ".json")
    if not os.path.exists(p): return {}
    return {b["name"].split("/min_time")[0]: b for b in json.load(open(p))["benchmarks"]}
step = {t: [bench(f"step-{t}-{r}")["lenet/step"] for r in range(1, rounds + 1)] for t in (1, 2)}
ms = {t: [b["real_time"] for b in step[t]] for t in (1, 2)}
ratio = [a / b for a, b in zip(ms[1], ms[2])]
print(f"lenet step, batch 64, median of {rounds} rounds")
print("| threads | step (ms) | rounds (ms) | step GFLOP/s against the paired sgemm |")
print("|---|---|---|---|")
for t in (1, 2):
    of = [100 * b["of_sgemm"] for b in step[t]]
    print(f"| {t} | {st.median(ms[t]):.1f} | {' / '.join(f'{x:.1f}' for x in ms[t])} | "
          f"{st.median(of):.0f}% (rounds {' / '.join(f'{x:.0f}' for x in of)}) |")
print(f"2 threads against 1: {st.median(ratio):.2f}x (median of the rounds' ratios; "
      f"rounds {' / '.join(f'{x:.2f}' for x in ratio)})")
if layers:
    def med(tag):
        runs = [bench(f"layers-{tag}-{r}") for r in range(1, rounds + 1)]
        return {k: st.median(run[k]["real_time"] for run in runs if k in run) for k in runs[0]}
    o1, o2, s = med(1), med(2), med("s") if os.path.exists(os.path.join(work, "layers-s-1.json")) else {}
    print(f"\neach layer, batch 64, ms, median of {rounds}")
    print("| layer | Serial | OpenMP 1 thread | OpenMP 2 threads | 2 threads / 1 | Serial / OpenMP 2 threads |")
    print("|---|---|---|---|---|---|")
    for k in o1:
        sv = s.get(k)
        print(f"| {k[6:]} | {sv:.3f} | " if sv else f"| {k[6:]} | | ", end="")
        print(f"{o1[k]:.3f} | {o2[k]:.3f} | {o1[k] / o2[k]:.2f}x | " + (f"{sv / o2[k]:.2f}x |" if sv else "|"))
PY
