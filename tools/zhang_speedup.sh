#!/usr/bin/env bash
# Zhang et al.'s throughput speedup against learners (docs/PAPERS.md: "Reproducing
# the papers"): calibrates this machine into profiles/local.yaml, runs the
# virtual speedup suite on the Zhang profile and on that one, then the real
# L = 1, 2 suite, and writes both reports.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: tools/zhang_speedup.sh [-q] [-k] [-o RESULTS] [-h]
       sudo tools/zhang_speedup.sh -c [-l RATE] [-u N] [-o OUT]

  -q          quick: suites/zhang2015-speedup-quick.yaml (L = 1, 2, 8) instead of
              suites/zhang2015-speedup.yaml (L = 1, 2, 4, 8, 16, 30)
  -k          keep an existing profiles/local.yaml (default: calibrate again)
  -o RESULTS  results folder (default results); reports go to
              RESULTS/<suite>/report/report.md
  -c          on the emulated cluster instead (as root, tools/cluster.sh): the speedup
              suite's shape (cifar10-18pct, mu = 4, n-softsync n = L, staleness rate, lr 0.02,
              4 shards) at L = 1, 2, 4, 8, each rank on a node of its own, measured for real
              across the nodes and modelled on a profile calibrated there
              (tools/validate_cluster.sh); prints measured and modelled throughput and speedup
  -l RATE     -c: every node's link (default 1gbit)
  -u N        -c: n-softsync pushes per learner (default 600)
  -h          this help

Steps: asgd calibrate --models cifar10-18pct --batch 4 -o profiles/local.yaml
(about 10 s; it runs two short MPI probes), asgd sweep run of the virtual
suite (--jobs 2), asgd sweep run of suites/zhang2015-speedup-real.yaml
(--jobs 1: each run is 2 or 3 ranks on this machine's cores).
Environment: ASGD (default build/ci/asgd, else build/default/asgd), MPIEXEC (mpiexec).
USAGE
}

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
results=results
quick=0
keep=0
cluster=0 rate=1gbit pushes=600
while getopts "qkcl:u:o:h" opt; do
  case "$opt" in
    q) quick=1 ;;
    k) keep=1 ;;
    c) cluster=1 ;;
    l) rate="$OPTARG" ;;
    u) pushes="$OPTARG" ;;
    o) results="$OPTARG" ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[[ $# -eq 0 ]] || { echo "zhang_speedup.sh: unexpected argument '$1'" >&2; usage >&2; exit 2; }
if (( cluster )); then
  [[ $results == results ]] && results=/tmp/asgd-zhang-cluster
  # n = L softsync: tools/validate_cluster.sh gives each learner -u pushes, --n L
  exec "$root/tools/validate_cluster.sh" -m cifar10-18pct -b 4 -L "1 2 4 8" -S 4 -p softsync -l "$rate" \
    -u "$pushes" -x "--lr-policy staleness --lr 0.02 --momentum 0.9 --weight-decay 0.0005" -o "$results"
fi
asgd="${ASGD:-}"
if [[ -z "$asgd" ]]; then
  for b in "$root/build/ci/asgd" "$root/build/default/asgd"; do [[ -x "$b" ]] && { asgd="$b"; break; }; done
fi
[[ -x "$asgd" ]] || { echo "zhang_speedup.sh: no asgd binary (build first, or set ASGD)" >&2; exit 2; }
mpiexec="${MPIEXEC:-mpiexec}"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
cd "$root"

if [[ $keep -eq 0 || ! -f profiles/local.yaml ]]; then
  echo "== calibrating this machine -> profiles/local.yaml"
  "$asgd" calibrate --models cifar10-18pct --batch 4 --mpiexec "$mpiexec" --out profiles/local.yaml
fi
suite=suites/zhang2015-speedup.yaml
[[ $quick -eq 1 ]] && suite=suites/zhang2015-speedup-quick.yaml
echo "== $suite (virtual learners, modelled time)"
"$asgd" sweep run "$suite" --results "$results" --jobs 2
echo "== suites/zhang2015-speedup-real.yaml (real ranks, measured time)"
"$asgd" sweep run suites/zhang2015-speedup-real.yaml --results "$results" --jobs 1 --mpiexec "$mpiexec"
