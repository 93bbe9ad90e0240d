#!/usr/bin/env bash
# One trainer per run: while a run trains, a second `asgd train` of the same
# run (single process, MPI, virtual) refuses with one line and exit 2, the
# first one's files untouched; `asgd sweep status` shows a locked run as
# running; a dead writer's leftover *.tmp.<pid> files are removed when its run
# starts again; killing `asgd sweep run` ends its children.
#   usage: run_lock.sh ASGD_BINARY MPIEXEC
set -uo pipefail
asgd=${1:?usage: run_lock.sh ASGD_BINARY MPIEXEC}
mpiexec=${2:-mpiexec}
export OPENBLAS_NUM_THREADS=1
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$work"; }
trap cleanup EXIT
fails=0 passes=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { echo "ok: $*"; passes=$((passes + 1)); }

long=(--model lenet --dataset synthetic --synthetic-size 28 --synthetic-train 4096 --synthetic-test 64
      --batch 32 --epochs 50 --checkpoint-every 5 --results "$work/r" --suite s --run-id k -q)
ckpt=$work/r/s/checkpoints/k.h5

wait_for() {  # wait_for FILE PID
  for _ in $(seq 600); do
    [[ -f $1 ]] && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# 1. a second single-process trainer of a running run
"$asgd" train "${long[@]}" >"$work/first.log" 2>&1 &
first=$!; pids+=("$first")
wait_for "$ckpt" "$first" || { fail "first trainer wrote no checkpoint"; cat "$work/first.log"; }
before=$(md5sum "$ckpt" | cut -d' ' -f1)
"$asgd" train "${long[@]}" >"$work/second.log" 2>"$work/second.err"; rc=$?
lines=$(wc -l <"$work/second.err")
if [[ $rc == 2 && $lines == 1 ]] && grep -q "being trained by another process" "$work/second.err"; then
  pass "second trainer refused: $(cat "$work/second.err")"
else
  fail "second trainer: exit $rc, $lines lines: $(cat "$work/second.err")"
fi
kill -0 "$first" 2>/dev/null && pass "first trainer still running" || fail "first trainer died"

# 2. the same under mpiexec (rank 0 holds the lock) and as virtual learners
"$mpiexec" -n 2 "$asgd" train "${long[@]}" --learners 1 --servers 1 >"$work/mpi.log" 2>"$work/mpi.err"; rc=$?
if [[ $rc == 2 ]] && grep -q "being trained by another process" "$work/mpi.err" &&
   [[ $(grep -c "being trained" "$work/mpi.err") == 1 ]]; then
  pass "mpiexec trainer refused once"
else
  fail "mpiexec trainer: exit $rc: $(cat "$work/mpi.err")"
fi

# 3. kill -9 the first: the kernel drops its lock; leftovers of a dead writer are removed
kill -9 "$first"; wait "$first" 2>/dev/null
touch "$work/r/s/checkpoints/k.h5.tmp.99999999" "$work/r/s/runs/k.h5.tmp.99999999" \
      "$work/r/s/checkpoints/k.shard1.h5.tmp.4242" "$work/r/s/checkpoints/kk.h5.tmp.5"
"$asgd" train "${long[@]}" --max-steps 1 >"$work/third.log" 2>&1 &
third=$!; pids+=("$third")
for _ in $(seq 300); do [[ -f $work/r/s/checkpoints/k.h5.tmp.99999999 ]] || break; sleep 0.1; done
if [[ ! -e $work/r/s/checkpoints/k.h5.tmp.99999999 && ! -e $work/r/s/runs/k.h5.tmp.99999999 &&
      ! -e $work/r/s/checkpoints/k.shard1.h5.tmp.4242 && -e $work/r/s/checkpoints/kk.h5.tmp.5 ]]; then
  pass "a dead writer's leftovers removed (another run's kept)"
else
  fail "leftovers: $(ls "$work/r/s/checkpoints" "$work/r/s/runs")"
fi
kill -9 "$third" 2>/dev/null; wait "$third" 2>/dev/null

# 4. sweep status shows a locked run as running; killing `sweep run` ends its children
cat >"$work/suite.yaml" <<YAML
name: lock
mode: real
base:
  model: lenet
  dataset: {kind: synthetic, shape: [28, 28, 1], n_train: 4096, n_test: 64}
  batch: 32
  epochs: 50
  checkpoint_every: 5
seeds: [1]
YAML
"$asgd" sweep run "$work/suite.yaml" --results "$work/r2" --jobs 1 >"$work/sweep.log" 2>&1 &
runner=$!; pids+=("$runner")
for _ in $(seq 300); do
  ls "$work/r2/lock/checkpoints/"*.h5 >/dev/null 2>&1 && break
  sleep 0.1
done
st=$("$asgd" sweep status "$work/suite.yaml" --results "$work/r2" 2>&1)
if grep -qw running <<<"$st"; then pass "sweep status: running"; else fail "sweep status: $st"; fi
child=$(pgrep -P "$runner" | head -1)
kill -TERM "$runner"; wait "$runner" 2>/dev/null
for _ in $(seq 100); do
  [[ -n $child ]] && kill -0 "$child" 2>/dev/null || break
  sleep 0.1
done
if [[ -n $child ]] && ! kill -0 "$child" 2>/dev/null; then
  pass "child $child ended with its runner"
else
  fail "child '${child}' of the runner still alive (or none found)"
  [[ -n $child ]] && kill -9 "$child" 2>/dev/null
fi
# 5. kill -9 of the runner (no forwarding possible): the kernel's parent-death
# signal ends the child, and the run can be taken again
"$asgd" sweep run "$work/suite.yaml" --results "$work/r2" --jobs 1 >"$work/sweep2.log" 2>&1 &
runner=$!; pids+=("$runner")
child=
for _ in $(seq 300); do
  child=$(pgrep -P "$runner" | head -1)
  [[ -n $child ]] && break
  sleep 0.1
done
sleep 1
kill -9 "$runner"; wait "$runner" 2>/dev/null
for _ in $(seq 100); do
  [[ -n $child ]] && kill -0 "$child" 2>/dev/null || break
  sleep 0.1
done
if [[ -n $child ]] && ! kill -0 "$child" 2>/dev/null; then
  pass "child $child ended after kill -9 of its runner"
else
  fail "child '${child}' outlived kill -9 of its runner"
  [[ -n $child ]] && kill -9 "$child" 2>/dev/null
fi
echo "$passes passed, $fails failed"
[[ $fails == 0 ]]
