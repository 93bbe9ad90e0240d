#!/usr/bin/env bash
# Measurement integrity of generated Slurm scripts (no Slurm needed: --dry-run):
# the local site runs a timing suite one task at a time (--array=...%1) and
# says so; a suite can lift it (max_parallel_tasks: 0) or ask for whole nodes
# (exclusive: true -> #SBATCH --exclusive); virtual suites (modelled clock)
# are not throttled; bad values are refused with exit 2.
#   usage: slurm_timing.sh ASGD_BINARY SOURCE_DIR
set -uo pipefail
asgd=${1:?usage: slurm_timing.sh ASGD_BINARY SOURCE_DIR}
src=${2:?usage: slurm_timing.sh ASGD_BINARY SOURCE_DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0 passes=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { echo "ok: $*"; passes=$((passes + 1)); }

suite() {  # suite NAME MODE RESOURCES
  cat >"$work/$1.yaml" <<YAML
name: $1
mode: $2
base:
  model: mlp
  dataset: {kind: synthetic, shape: [8, 8, 1], classes: 4, n_train: 512, n_test: 64}
  epochs: 1
zip:
  - learners: [1, 2]
    protocol: [hardsync, softsync]
    n: [1, 2]
seeds: [1, 2]
resources: {$3}
YAML
}
submit() {  # submit NAME -> stdout of a dry-run submit
  "$asgd" sweep submit "$work/$1.yaml" --results "$work/r" --sites-dir "$src/slurm/sites" --dry-run 2>&1
}

suite timing real "servers: 1"
out=$(submit timing)
if grep -q -- "--array=0-1%1" "$work"/r/timing/slurm/asgd-timing-1.sbatch &&
   grep -q -- "--array=0-1%1" "$work"/r/timing/slurm/asgd-timing-2.sbatch &&
   grep -q "run 1 at a time" <<<"$out"; then
  pass "local site: timing suite one task at a time, and says so"
else
  fail "local site throttle: $out $(grep -h array "$work"/r/timing/slurm/*.sbatch)"
fi
grep -q -- "--exclusive" "$work"/r/timing/slurm/asgd-timing-1.sbatch && fail "exclusive without asking" || pass "no --exclusive by default"

suite open real "servers: 1, max_parallel_tasks: 0, exclusive: true"
out=$(submit open)
if grep -q -- "--array=0-1$" "$work"/r/open/slurm/asgd-open-1.sbatch &&
   grep -qx "#SBATCH --exclusive" "$work"/r/open/slurm/asgd-open-1.sbatch; then
  pass "max_parallel_tasks: 0 lifts the limit; exclusive: true asks for whole nodes"
else
  fail "open/exclusive: $(grep -h 'array\|exclusive' "$work"/r/open/slurm/*.sbatch)"
fi

suite virt virtual "servers: 1"
submit virt >/dev/null
if grep -q -- "--array=0-3$" "$work"/r/virt/slurm/asgd-virt-1.sbatch; then
  pass "virtual suite (modelled clock) not throttled"
else
  fail "virtual: $(grep -h array "$work"/r/virt/slurm/*.sbatch)"
fi

for bad in "max_parallel_tasks: -1" "exclusive: perhaps" "max_parallel_tasks: 1.5"; do
  suite bad real "servers: 1, $bad"
  out=$(submit bad); rc=$?
  if [[ $rc == 2 ]] && grep -q "$(cut -d: -f1 <<<"$bad")" <<<"$out"; then
    pass "refused: $bad"
  else
    fail "'$bad': exit $rc: $out"
  fi
done
echo "$passes passed, $fails failed"
[[ $fails == 0 ]]
