#!/usr/bin/env bash
# How often the CI gate cries wolf, and whether it sees a slowdown that is not
# in the code: the figures of docs/REGRESSION.md, "Regression benchmarking in CI".
#
#   tools/ci/measure.sh OUT [--asgd PATH] [--pairs N] [--rounds R] [--plant "BENCH_AB_OPTIONS"]...
#
# 1. N same-commit pairs: `bench.sh ab OUT/pair-K` with the same build as
#    baseline and candidate (interleaved, R rounds each).
# 2. Each --plant: one more pair whose candidate side gets the given
#    bench.sh ab options (e.g. "--candidate-hog 2:0.3", "--candidate-prefix
#    'taskset -c 0'", "--candidate-asgd PATH" for another build such as an
#    -O1 one, "--candidate-env OPENBLAS_CORETYPE=Haswell --gate-args
#    --across-machines"; a plant's --gate-args also go to its verdicts below).
#    A plant given K times is K tries of it (how often the gate catches it).
# 3. Tally, from the stored outputs (asgd compare is re-run; no measuring):
#    per gate setting (--threshold 0.05 / 0.10 / 0.15, --alpha 0.05), how many
#    same-commit pairs were flagged (interleaved: pair K's baseline against its
#    candidate; stored baseline: pair K's candidate against pair K-1's
#    baseline, measured minutes earlier and not interleaved), and the planted
#    pairs' verdicts (each training row's change where none is flagged), and
#    per repeated plant the tries flagged; then `asgd history --by-input` over every same-commit
#    side in time order (steps found: goal none). Writes OUT/summary.txt.
#
# Existing OUT/pair-K and OUT/plant-K folders with a gate.txt are kept (a
# re-run only measures what is missing), so the tally can be redone at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
asgd=${ASGD:-$root/build/ci/asgd}
pairs=10
rounds=5
plants=()
case ${1:-} in
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
[[ $# -ge 1 && $1 != -* ]] || { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }
out=$1
shift
while [[ $# -gt 0 ]]; do
  case $1 in
    --asgd) asgd=$2; shift 2 ;;
    --pairs) pairs=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --plant) plants+=("$2"); shift 2 ;;
    *) echo "measure.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ $asgd = /* ]] || asgd=$PWD/$asgd
mkdir -p "$out"
sum=$out/summary.txt

for ((k = 1; k <= pairs; ++k)); do
  d=$out/pair-$(printf %02d "$k")
  [[ -f $d/gate.txt ]] && continue
  echo "== same-commit pair $k/$pairs ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))"
  "$here/bench.sh" ab "$d" --baseline-asgd "$asgd" --candidate-asgd "$asgd" --rounds "$rounds" > "$d.log" 2>&1 || true
  tail -1 "$d.log"
done
for ((k = 1; k <= ${#plants[@]}; ++k)); do
  d=$out/plant-$k
  [[ -f $d/gate.txt ]] && continue
  echo "== planted: ${plants[k-1]} ($(date -u +%H:%M:%S))"
  eval "opts=(${plants[k-1]})"
  # shellcheck disable=SC2154  # opts is set by eval
  "$here/bench.sh" ab "$d" --baseline-asgd "$asgd" --candidate-asgd "$asgd" --rounds "$rounds" "${opts[@]}" \
      > "$d.log" 2>&1 || true
  echo "${plants[k-1]}" > "$d/plant.txt"
  tail -1 "$d.log"
done

# Rows of asgd compare tables (columns by the header's offsets). Argument
# "flagged": the flagged rows, "figure change; ..."; "training": every
# training row, flagged or not, "learners=1 -0.9%, learners=2 -10.3%".
rows_py='
import sys
flagged = sys.argv[1] == "flagged"
out, cols = [], None
for line in sys.stdin:
    line = line.rstrip("\n")
    if line.startswith("figure "):
        cols = [line.index(h) for h in ("baseline", "change %", "p-value")]
    elif cols and flagged and line.endswith("REGRESSION"):
        out.append(line[:cols[0]].strip() + " " + line[cols[1]:cols[2]].strip())
    elif cols and not flagged and ": samples/s" in line[:cols[0]]:
        out.append(line[:cols[0]].split(":")[0].strip() + " " + line[cols[1]:cols[2]].strip())
print(("; " if flagged else ", ").join(out))
'
verdict() {  # BASE CAND ARGS...: "no regression" / "REGRESSION: figures" / "refused"
  local rc=0 txt
  txt=$("$here/bench.sh" gate "$1" "$2" --asgd "$asgd" "${@:3}" 2>&1) || rc=$?
  case $rc in
    0) echo "ok (training: $("${PY:-/usr/bin/python3}" -c "$rows_py" training <<< "$txt"))" ;;
    1) echo "REGRESSION: $("${PY:-/usr/bin/python3}" -c "$rows_py" flagged <<< "$txt")" ;;
    *) echo "refused/failed (exit $rc): $(grep -m1 'asgd: error' <<< "$txt" || true)" ;;
  esac
}

{
  echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) cores allowed"
  echo "asgd: $asgd ($("$asgd" info --json | "${PY:-/usr/bin/python3}" -c 'import json,sys; m=json.load(sys.stdin); print(m["asgd_commit"], "BLAS", m["blas"])'))"
  echo "rounds per side: $rounds"
  mapfile -t pairdirs < <(ls -d "$out"/pair-?? 2>/dev/null)
  for args in "--threshold 0.05" "--threshold 0.10" "--threshold 0.15"; do
    read -r -a a <<< "$args --alpha 0.05"
    flagged=0 stored_flagged=0 stored_n=0
    echo
    echo "== gate $args --alpha 0.05"
    prev=""
    for d in "${pairdirs[@]}"; do
      v=$(verdict "$d/baseline" "$d/candidate" "${a[@]}")
      [[ $v == ok* ]] || flagged=$((flagged + 1))
      echo "  $(basename "$d") interleaved: $v"
      if [[ -n $prev ]]; then
        s=$(verdict "$prev/baseline" "$d/candidate" "${a[@]}")
        stored_n=$((stored_n + 1))
        [[ $s == ok* ]] || stored_flagged=$((stored_flagged + 1))
        echo "  $(basename "$d") vs stored $(basename "$prev") baseline: $s"
      fi
      prev=$d
    done
    echo "  same commit, interleaved: $flagged of ${#pairdirs[@]} pairs flagged"
    echo "  same commit, stored baseline (previous pair's): $stored_flagged of $stored_n flagged"
    declare -A tries=() caught=()
    mapfile -t plantdirs < <(ls -d "$out"/plant-* 2>/dev/null | sort -t- -k2,2n)
    for p in "${plantdirs[@]}"; do
      [[ -d $p ]] || continue
      # a plant's own --gate-args (e.g. --across-machines for a forced BLAS
      # kernel) go to its verdicts too
      eval "popts=($(cat "$p/plant.txt"))"
      extra=()
      for ((i = 0; i < ${#popts[@]}; ++i)); do
        # shellcheck disable=SC2154  # popts is set by eval
        [[ ${popts[i]} == --gate-args ]] && read -r -a extra <<< "${popts[i + 1]:-}"
      done
      v=$(verdict "$p/baseline" "$p/candidate" "${a[@]}" "${extra[@]}")
      echo "  planted [$(cat "$p/plant.txt")]: $v"
      k=$(cat "$p/plant.txt")
      tries[$k]=$(( ${tries[$k]:-0} + 1 ))
      [[ $v == REGRESSION* ]] && caught[$k]=$(( ${caught[$k]:-0} + 1 ))
    done
    # a plant given more than once: how often the gate caught it
    for k in "${!tries[@]}"; do
      (( ${tries[$k]} > 1 )) && echo "  planted [$k]: flagged in ${caught[$k]:-0} of ${tries[$k]} tries"
    done
    unset tries caught
  done
  echo
  echo "== asgd history --by-input over the same-commit sides in time order"
  inputs=()
  for d in "${pairdirs[@]}"; do inputs+=("$d/baseline" "$d/candidate"); done
  if [[ ${#inputs[@]} -gt 0 ]]; then
    "$asgd" history "${inputs[@]}" --by-input --out "$out/history" 2>&1 | tail -3
  fi
} | tee "$sum"
