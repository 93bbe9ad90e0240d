#!/usr/bin/env bash
# Where a training step's time goes, by function, sampled with perf:
#   tools/profile_step.sh [-b BUILD] [-m "lenet cifar10-18pct"] [-r REPS] [-t THREADS]
# For the sgemm 1024^3 reference and each model's whole step (asgd_micro, batch
# 64, REPS repetitions, default 30), the share of the samples in
#   - OpenBLAS's sgemm micro-kernel (sgemm_kernel*: the multiply-adds),
#   - the rest of OpenBLAS (packing the operands, *copy*, and scaling C, *beta*),
#   - this project's kernels (asgd_micro's own code: pooling, LRN, the direct
#     first convolution, im2row, the update...), the C library (memset,
#     memcpy), the operating system and other libraries (libgomp's waits),
# and the project's heaviest functions. Two figures follow from the shares,
# assuming the micro-kernel does a FLOP in the same time in the step as in the
# 1024^3 sgemm: `kernel-bound` (the step's micro-kernel share over the
# sgemm's: about the step's GFLOP/s against the sgemm's) and `OpenBLAS alone`
# (the same with nothing but OpenBLAS in the step: what removing every other
# cost would reach, the packing kept).
# Needs perf (Debian's linux-perf) and kernel.perf_event_paranoid <= 1 or root;
# the samples are cpu-clock ones, which a virtual machine without a PMU has.
# BUILD: the folder with asgd_micro (default build/ci, else build/default);
# THREADS: asgd_micro's --threads (default 1; more takes an OpenMP build).
set -euo pipefail
cd "$(dirname "$0")/.."
build="" models="lenet cifar10-18pct" reps=30 threads=1
usage="usage: tools/profile_step.sh [-b BUILD] [-m MODELS] [-r REPS] [-t THREADS]"
while getopts ":b:m:r:t:h" o; do
  case $o in
    b) build=$OPTARG ;;
    m) models=$OPTARG ;;
    r) reps=$OPTARG ;;
    t) threads=$OPTARG ;;
    h) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    :) echo "profile_step.sh: -$OPTARG needs a value ($usage)" >&2; exit 2 ;;
    *) echo "profile_step.sh: bad option -$OPTARG ($usage)" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
(( $# == 0 )) || { echo "profile_step.sh: unexpected argument '$1' ($usage)" >&2; exit 2; }
[[ $reps =~ ^[1-9][0-9]{0,2}$ ]] || { echo "profile_step.sh: -r '$reps': a count 1..999" >&2; exit 2; }
[[ $threads =~ ^[1-9][0-9]?$ ]] || { echo "profile_step.sh: -t '$threads': a count 1..99" >&2; exit 2; }
for m in $models; do
  case $m in
    lenet | cifar10-18pct) ;;
    *) echo "profile_step.sh: -m: unknown model '$m' (asgd_micro steps: lenet, cifar10-18pct)" >&2; exit 2 ;;
  esac
done
[[ -n ${models// /} ]] || { echo "profile_step.sh: -m: no model given" >&2; exit 2; }
if [[ -z $build ]]; then
  for b in build/ci build/default; do [[ -x $b/asgd_micro ]] && { build=$b; break; }; done
  [[ -n $build ]] || { echo "profile_step.sh: no build/ci/asgd_micro or build/default/asgd_micro (tools/test.sh builds build/ci; or -b BUILD)" >&2; exit 1; }
fi
micro=$build/asgd_micro
[[ -x $micro ]] || { echo "profile_step.sh: -b '$build': no asgd_micro there" >&2; exit 2; }
command -v perf >/dev/null || { echo "profile_step.sh: perf not found (apt-get install linux-perf)" >&2; exit 1; }
if ((EUID != 0)) && (($(cat /proc/sys/kernel/perf_event_paranoid) > 1)); then
  echo "profile_step.sh: kernel.perf_event_paranoid is $(cat /proc/sys/kernel/perf_event_paranoid): run as root or set it to 1" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(getconf _NPROCESSORS_ONLN) cores; asgd_micro --threads $threads (${build##*/}); commit $(git rev-parse --short=7 HEAD 2>/dev/null || echo '?')"

# profile NAME FILTER: perf samples of the timed repetitions only (the set-up,
# which builds the model and times one repetition, runs before perf's delay).
profile() {
  local t0 t1 setup_ms
  t0=$(date +%s%N)
  "$micro" --threads "$threads" --benchmark_filter="$2" --benchmark_repetitions=1 >/dev/null 2>&1 ||
    { echo "profile_step.sh: $micro --benchmark_filter='$2' failed" >&2; exit 1; }
  t1=$(date +%s%N)
  setup_ms=$(((t1 - t0) / 1000000))
  perf record -q -e cpu-clock -F 2000 -D "$setup_ms" -o "$work/$1.data" \
    "$micro" --threads "$threads" --benchmark_filter="$2" --benchmark_repetitions="$reps" >/dev/null 2>&1 ||
    { echo "profile_step.sh: perf record of $1 failed (perf_event_paranoid, or perf too old for -D?)" >&2; exit 1; }
  perf report -i "$work/$1.data" --stdio -q --no-children --sort dso,symbol --percent-limit 0 2>/dev/null |
    awk 'NF >= 4 && $1 ~ /%$/ { p = $1; sub(/%/, "", p); dso = $2; sym = $4; for (i = 5; i <= NF; ++i) sym = sym " " $i; print p "\t" dso "\t" sym }' \
      > "$work/$1.tsv"
  [[ -s $work/$1.tsv ]] || { echo "profile_step.sh: perf recorded no samples for $1" >&2; exit 1; }
}
profile sgemm '^sgemm/1024/'
for m in $models; do profile "$m" "^$m/step/"; done

# shellcheck disable=SC2086  # one argument per model (checked above)
/usr/bin/python3 - "$work" "$threads" sgemm $models <<'PY'
import collections, re, sys
work, threads, names = sys.argv[1], sys.argv[2], sys.argv[3:]
def without_args(sym):
    # the function without its parameter list: the last parenthesised group at the
    # end (a template argument may hold parentheses too: float __vector(16))
    if not sym.endswith(")"):
        return sym
    depth = 0
    for i in range(len(sym) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(sym[i], 0)
        if depth == 0:
            return sym[:i] if i > 0 else sym
    return sym
def groups(name):
    g = collections.Counter(); own = collections.Counter(); others = collections.Counter()
    for line in open(f"{work}/{name}.tsv"):
        p, dso, sym = line.rstrip("\n").split("\t")
        sym = re.sub(r"(\s+-)+$", "", sym)  # perf's empty columns after the symbol
        p = float(p)
        if "openblas" in dso or dso.startswith("libblas"):
            g["blas_kernel" if sym.startswith("sgemm_kernel") else "blas_rest"] += p
        elif dso.startswith("asgd"):
            g["own"] += p
            own[without_args(sym)[:70]] += p
        elif dso.startswith("[kernel"):
            g["os"] += p
        elif dso.startswith("libc") or dso.startswith("libm"):
            g["libc"] += p
        else:
            g["other"] += p
            others[dso] += p
    total = sum(g.values())
    return {k: 100 * v / total for k, v in g.items()}, own, others
parsed = {n: groups(n) for n in names}
kref = parsed["sgemm"][0].get("blas_kernel", 0)
print(f"\nshares of the samples (perf record -e cpu-clock), {threads} thread(s); sgemm: asgd_micro's 1024^3 reference")
print("| run | sgemm micro-kernel | OpenBLAS packing, scaling | this project's kernels | C library | OS | other | kernel-bound | OpenBLAS alone |")
print("|---|---|---|---|---|---|---|---|---|")
tops, rest = {}, {}
for n in names:
    g, own, others = parsed[n]
    k, r = g.get("blas_kernel", 0), g.get("blas_rest", 0)
    bound = f"{100 * k / kref:.0f}%" if n != "sgemm" and kref > 0 else "-"
    alone = f"{100 * (100 * k / (k + r)) / kref:.0f}%" if n != "sgemm" and kref > 0 and k + r > 0 else "-"
    print(f"| {'sgemm 1024' if n == 'sgemm' else n + ' step'} | {k:.1f}% | {r:.1f}% | {g.get('own', 0):.1f}% | "
          f"{g.get('libc', 0):.1f}% | {g.get('os', 0):.1f}% | {g.get('other', 0):.1f}% | {bound} | {alone} |")
    if others:
        rest[n] = others
    if n != "sgemm":
        tops[n] = own
print("kernel-bound: the step's micro-kernel share over the sgemm's (about the step's GFLOP/s against the sgemm's, "
      "if the micro-kernel does a FLOP in the same time in both); OpenBLAS alone: the same with only OpenBLAS in the step")
for n, others in rest.items():
    print(f"other in {n}: " + ", ".join(f"{d} {p:.1f}% of the samples" for d, p in others.most_common(3)))
for n, own in tops.items():
    print(f"\n{n}: this project's heaviest functions, share of the step's samples")
    for sym, p in own.most_common(8):
        print(f"- {p:.1f}% `{sym}`")
PY
