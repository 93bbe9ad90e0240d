#!/usr/bin/env bash
# The CI regression benchmark: suites/ci-micro.yaml (kernel micro-benchmarks)
# and suites/ci-train.yaml (a short lenet training, one learner and two MPI
# learners), repeated in rounds; gating with `asgd compare`; a history store
# for `asgd history`. docs/REGRESSION.md, "Regression benchmarking in CI", is the manual.
#
#   tools/ci/bench.sh run OUT [--asgd PATH] [--rounds N] [--mpiexec CMD]
#       Measure one build: N rounds of both suites. OUT/micro.json (Google
#       Benchmark JSON, one row per benchmark and round: the round's median
#       repetition, see merge_bench.py), OUT/runs/r<K>-<run>.h5, OUT/meta.json
#       (commit, machine, times), OUT/logs/ (also every repetition:
#       logs/micro-iterations.json).
#   tools/ci/bench.sh ab OUT --baseline-asgd A --candidate-asgd B [--rounds N]
#                     [--mpiexec CMD] [--gate-args "ARGS"]
#                     [--candidate-prefix "CMD"] [--candidate-env VAR=VALUE]...
#                     [--candidate-hog N:DUTY]
#       Two builds interleaved: in round K the baseline runs first when K is
#       odd and second when K is even, for each suite (A B B A A B ...), so a
#       drift of the machine's speed hits both sides alike. OUT/baseline and
#       OUT/candidate as with `run`, then `gate`; exits as the gate does.
#       The --candidate-* options plant a slowdown without a code change (for
#       measuring the gate): a command prefix (e.g. "taskset -c 0"), extra
#       environment, or N busy processes of duty DUTY (tools/ci/hog.py) that
#       run only while the candidate is measured.
#   tools/ci/bench.sh gate BASE CAND [--asgd PATH] [asgd compare options]
#       `asgd compare BASE/micro.json CAND/micro.json` and `asgd compare BASE
#       CAND` (the training runs); the tables go to stdout. Exit 0: no
#       regression; 1: a regression; 2: refused (different machines, bad input).
#   tools/ci/bench.sh store OUT STORE
#       Copy OUT (micro.json, runs/, meta.json) to STORE/<UTC time>-<commit>/,
#       the layout `asgd history STORE` reads.
#
# Environment: ASGD (default asgd build/ci/asgd), OPENBLAS_NUM_THREADS is set to 1.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py=/usr/bin/python3
[[ -x $py ]] || py=python3
export OPENBLAS_NUM_THREADS=1

die() { echo "bench.sh: $*" >&2; exit 2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }
help() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0; }

asgd=${ASGD:-$root/build/ci/asgd}
rounds=5
mpiexec=mpiexec
gate_args=()
cand_prefix=()
cand_env=()
cand_hog=""
base_asgd="" cand_asgd=""

abspath() { [[ $1 = /* ]] && echo "$1" || echo "$PWD/$1"; }

# measure OUT ASGD PART ROUND SIDE: one run of suites/ci-PART.yaml into OUT.
measure() {
  local out=$1 exe=$2 part=$3 round=$4 side=$5
  local work=$out/.work/r$round-$part
  rm -rf "$work"
  mkdir -p "$work" "$out/logs" "$out/runs"
  local -a pre=() envs=()
  local hog_pid=""
  if [[ $side == candidate ]]; then
    pre=("${cand_prefix[@]}")
    envs=("${cand_env[@]}")
    if [[ -n $cand_hog ]]; then
      "$py" "$here/hog.py" "${cand_hog%%:*}" "${cand_hog#*:}" &
      hog_pid=$!
      sleep 0.5
    fi
  fi
  local t0=$SECONDS rc=0
  env "${envs[@]}" "${pre[@]}" "$exe" sweep run "$root/suites/ci-$part.yaml" --results "$work" --no-report \
      --mpiexec "$mpiexec" > "$out/logs/r$round-$part.log" 2>&1 || rc=$?
  if [[ -n $hog_pid ]]; then kill "$hog_pid" 2>/dev/null || true; wait "$hog_pid" 2>/dev/null || true; fi
  for f in "$work"/ci-"$part"/logs/*.log; do
    [[ -e $f ]] && cp "$f" "$out/logs/r$round-$(basename "$f")"
  done
  if [[ $rc -ne 0 ]]; then
    echo "bench.sh: round $round, $part, $side: asgd sweep run failed (exit $rc); log: $out/logs/r$round-$part.log" >&2
    tail -5 "$out/logs/r$round-$part.log" >&2
    exit 1
  fi
  if [[ $part == micro ]]; then
    mv "$work/ci-micro/runs/ci-micro-micro.json" "$out/.work/micro-r$(printf %02d "$round").json"
  else
    for f in "$work"/ci-train/runs/*.h5; do mv "$f" "$out/runs/r$(printf %02d "$round")-$(basename "$f")"; done
  fi
  rm -rf "$work"
  printf '  round %d/%d %-5s %-9s %3d s\n' "$round" "$rounds" "$part" "$side" $((SECONDS - t0))
}

# begin OUT ASGD: a fresh side folder with the machine record.
begin() {
  local out=$1 exe=$2
  [[ -x $exe ]] || die "$exe: no such executable (build it: cmake --preset ci && cmake --build build/ci)"
  rm -rf "$out"
  mkdir -p "$out/.work"
  "$exe" info --json > "$out/machine.json"
  date -u +%Y-%m-%dT%H:%M:%SZ > "$out/.work/started"
  cut -d' ' -f1-3 /proc/loadavg > "$out/.work/load_start"
}

# finish OUT: merge the rounds' benchmark files, write meta.json.
finish() {
  local out=$1
  "$py" "$here/merge_bench.py" "$out/micro.json" "$out"/.work/micro-r*.json --all "$out/logs/micro-iterations.json"
  "$py" - "$out" "$rounds" <<'EOF'
import json, os, sys, time
out, rounds = sys.argv[1], int(sys.argv[2])
m = json.load(open(os.path.join(out, "machine.json")))
meta = {
    "commit": m.get("asgd_commit", "unknown"),
    "started": open(os.path.join(out, ".work", "started")).read().strip(),
    "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "rounds": rounds,
    "host": m.get("host"),
    "cpu_model": m.get("cpu_model"),
    "blas": m.get("blas"),
    "cpus_allowed": m.get("cpus_allowed"),
    "load_start": open(os.path.join(out, ".work", "load_start")).read().split(),
    "load_end": open("/proc/loadavg").read().split()[:3],
    "suites": ["suites/ci-micro.yaml", "suites/ci-train.yaml"],
}
tmp = os.path.join(out, "meta.json.tmp")
json.dump(meta, open(tmp, "w"), indent=1)
os.replace(tmp, os.path.join(out, "meta.json"))
EOF
  rm -rf "$out/.work"
}

# gate BASE CAND ARGS...: both comparisons; exit 2 > 1 > 0.
gate() {
  local base=$1 cand=$2
  shift 2
  [[ -x $asgd ]] || die "$asgd: no such executable (--asgd PATH or ASGD=...)"
  local rc=0 r
  for f in "$base/micro.json" "$cand/micro.json"; do [[ -f $f ]] || die "$f: missing (not a bench.sh output?)"; done
  local name dir
  for name in baseline candidate; do
    if [[ $name == baseline ]]; then dir=$base; else dir=$cand; fi
    [[ -f $dir/meta.json ]] || continue
    "$py" - "$name" "$dir/meta.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[2]))
print(f"{sys.argv[1]}: commit {m.get('commit')}, measured {m.get('started')} .. {m.get('finished')} "
      f"({m.get('rounds')} rounds) on {m.get('host')} ({m.get('cpu_model')}), "
      f"load at start {' '.join(m.get('load_start', []))}")
EOF
  done
  echo "== kernels: asgd compare $base/micro.json $cand/micro.json $*"
  r=0; "$asgd" compare "$base/micro.json" "$cand/micro.json" "$@" || r=$?
  (( r > rc )) && rc=$r
  echo
  echo "== training: asgd compare $base $cand $*"
  r=0; "$asgd" compare "$base" "$cand" "$@" || r=$?
  (( r > rc )) && rc=$r
  echo
  case $rc in
    0) echo "gate: no regression" ;;
    1) echo "gate: REGRESSION (see the tables above)" ;;
    *) echo "gate: refused or failed (exit $rc)" ;;
  esac
  return $rc
}

cmd=${1:-}
[[ -n $cmd ]] || usage
shift
case $cmd in
  run|ab)
    [[ $# -ge 1 && $1 != -* ]] || usage
    out=$(abspath "$1")
    shift
    while [[ $# -gt 0 ]]; do
      case $1 in
        --asgd) asgd=$(abspath "$2"); shift 2 ;;
        --baseline-asgd) base_asgd=$(abspath "$2"); shift 2 ;;
        --candidate-asgd) cand_asgd=$(abspath "$2"); shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --mpiexec) mpiexec=$2; shift 2 ;;
        --gate-args) read -r -a gate_args <<< "$2"; shift 2 ;;
        --candidate-prefix) read -r -a cand_prefix <<< "$2"; shift 2 ;;
        --candidate-env) cand_env+=("$2"); shift 2 ;;
        --candidate-hog) cand_hog=$2; shift 2 ;;
        *) die "unknown option $1" ;;
      esac
    done
    [[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a whole number >= 1"
    [[ -z $cand_hog || $cand_hog =~ ^[1-9][0-9]*:(0?\.[0-9]+|1(\.0*)?)$ ]] || die "--candidate-hog N:DUTY, e.g. 2:0.3"
    t0=$SECONDS
    if [[ $cmd == run ]]; then
      begin "$out" "$asgd"
      for ((k = 1; k <= rounds; ++k)); do
        measure "$out" "$asgd" micro "$k" run
        measure "$out" "$asgd" train "$k" run
      done
      finish "$out"
      echo "bench.sh: $out ($(( SECONDS - t0 )) s): micro.json, runs/, meta.json"
      exit 0
    fi
    [[ -n $base_asgd && -n $cand_asgd ]] || die "ab needs --baseline-asgd and --candidate-asgd"
    mkdir -p "$out"
    begin "$out/baseline" "$base_asgd"
    begin "$out/candidate" "$cand_asgd"
    for ((k = 1; k <= rounds; ++k)); do
      for part in micro train; do
        if (( k % 2 == 1 )); then order=(baseline candidate); else order=(candidate baseline); fi
        for side in "${order[@]}"; do
          if [[ $side == baseline ]]; then exe=$base_asgd; else exe=$cand_asgd; fi
          measure "$out/$side" "$exe" "$part" "$k" "$side"
        done
      done
    done
    finish "$out/baseline"
    finish "$out/candidate"
    echo "bench.sh: measured in $(( SECONDS - t0 )) s"
    asgd=$cand_asgd
    set +e
    gate "$out/baseline" "$out/candidate" "${gate_args[@]}" | tee "$out/gate.txt"
    rc=${PIPESTATUS[0]}
    exit "$rc"
    ;;
  gate)
    [[ $# -ge 2 ]] || usage
    base=$1 cand=$2
    shift 2
    if [[ ${1:-} == --asgd ]]; then asgd=$(abspath "$2"); shift 2; fi
    gate "$base" "$cand" "$@"
    ;;
  store)
    [[ $# -eq 2 ]] || usage
    src=$1 store=$2
    [[ -f $src/meta.json && -f $src/micro.json ]] || die "$src: not a bench.sh output (meta.json, micro.json)"
    commit=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["commit"])' "$src/meta.json")
    dest=$store/$(date -u +%Y%m%dT%H%M%SZ)-$commit
    mkdir -p "$dest"
    cp -r "$src/micro.json" "$src/runs" "$src/meta.json" "$src/machine.json" "$dest/"
    echo "$dest"
    ;;
  -h|--help|help) help ;;
  *) die "unknown command $cmd (run, ab, gate, store)" ;;
esac
