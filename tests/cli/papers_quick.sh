#!/usr/bin/env bash
# The papers' quick suites end to end: suites/paine2013-virtual-quick.yaml
# and tools/zhang_speedup.sh -q (calibration, the virtual speedup suite on two
# profiles, the real L = 1, 2 suite). Their shapes need not hold at this size;
# this checks that the runs complete, that virtual nsync runs record their
# minibatch errors, and that each report has the paper's table with the paper's
# figure and data set in their own columns, every modelled figure labelled
# with its profile, and (two seeds) every figure with its interval and every
# row with a verdict decided by one.
#   usage: papers_quick.sh ASGD_BINARY SOURCE_DIR MPIEXEC
set -uo pipefail
asgd=${1:?usage: papers_quick.sh ASGD_BINARY SOURCE_DIR MPIEXEC}
src=${2:?source dir}
mpiexec=${3:-mpiexec}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }
has() { grep -qF -- "$2" "$1" || fail "$1 lacks: $2"; }
cd "$src" || fail "no source dir $src"

"$asgd" sweep run suites/paine2013-virtual-quick.yaml --results "$work/r" --jobs 2 >"$work/paine.log" 2>&1 ||
  { tail -20 "$work/paine.log"; fail "paine2013-virtual-quick did not run"; }
md=$work/r/paine2013-virtual-quick/report/report.md
has "$md" "| paper's claim | paper | paper's data | ours | verdict | our data, model | our configuration |"
has "$md" "| paper: 3.2x | ImageNet | ours: time-to-target"
has "$md" "(modelled, profile paine2013 (profiles/paine2013.yaml))"
has "$md" "paper: 70% at L=1, 58% at L=8 | ImageNet | ours: smoothed training error at t = "
has "$md" "ours (modelled time, profile paine2013 (profiles/paine2013.yaml)): smoothed training error early"
has "$md" "ours: final test error n_sync 100: "
has "$md" "ours: amplitude of the periodic component at period n_sync"
if grep -q "saw-toothed error curve | ImageNet | ours: no " "$md"; then fail "no saw-tooth figure"; fi
# two seeds: intervals on every figure, and verdicts decided by them
has "$md" "(smoothed training error, at every update)"
grep -qE '\| \*\*(reproduced|not reproduced|undecided)\*\*: time-to-target speedup \(training error\) [0-9.]+x \[' "$md" ||
  fail "no speedup verdict with an interval"
grep -qE '\| \*\*(reproduced|not reproduced|undecided)\*\*: n_sync 300 minus 100 ' "$md" || fail "no n_sync verdict"
has "$md" "- speedup_8_gpus: "
if grep -qF "(n=1)" "$md"; then fail "a figure of two seeds without its interval"; fi
n=$(grep -c "fashion-mnist, mlp | nsync" "$md")
[[ $n -ge 10 ]] || fail "only $n rows of ours with their data set"
run=$(ls "$work"/r/paine2013-virtual-quick/runs/*L8-nsync300*mergeadagrad*.h5 | head -1)
h5dump -H -d /minibatches/error "$run" >/dev/null 2>&1 || fail "$run has no /minibatches/error"
echo "paine2013-virtual-quick: report and minibatch errors ok"

ASGD="$asgd" MPIEXEC="$mpiexec" tools/zhang_speedup.sh -q -o "$work/r" >"$work/zhang.log" 2>&1 ||
  { tail -20 "$work/zhang.log"; fail "tools/zhang_speedup.sh -q failed"; }
virt=$work/r/zhang2015-speedup-quick/report/report.md
real=$work/r/zhang2015-speedup-real/report/report.md
has "$virt" "### Throughput speedup against learners"
has "$virt" "ours, modelled, profile zhang2015 (profiles/zhang2015.yaml)"
has "$virt" "(profiles/local.yaml)"
has "$virt" "| 8 | close to linear (up to 30) | CIFAR10, ImageNet |"
has "$real" "ours, measured here ("
grep -qE '^\| 2 \| close to linear \(up to 30\) \| CIFAR10, ImageNet \| [0-9.]+ \(n=1\) \|' "$real" ||
  fail "no measured speedup at L = 2 in $real"
echo "zhang2015 speedup (quick): virtual and real reports ok"
