#!/usr/bin/env bash
# kill -9 in the middle of a run, re-run the same command: it resumes from the
# last checkpoint and completes with a valid results file.
#   usage: train_resume.sh ASGD_BINARY
set -uo pipefail
asgd=${1:?usage: train_resume.sh ASGD_BINARY}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmd=("$asgd" train --model lenet --dataset synthetic --synthetic-size 28 --synthetic-train 2048
     --synthetic-test 256 --batch 32 --epochs 3 --checkpoint-every 20 --results "$work/r"
     --suite s --run-id k --progress-every 0.2)
ckpt=$work/r/s/checkpoints/k.h5 result=$work/r/s/runs/k.h5

"${cmd[@]}" >"$work/first.log" 2>&1 &
pid=$!
for _ in $(seq 600); do
  [[ -f $ckpt ]] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
if [[ ! -f $ckpt ]]; then echo "FAIL: no checkpoint appeared"; cat "$work/first.log"; exit 1; fi
if [[ -f $result ]]; then echo "FAIL: the run finished before it could be killed"; exit 1; fi
echo "killed after a checkpoint: $(grep -c update "$work/first.log") progress lines"

"${cmd[@]}" >"$work/second.log" 2>&1 || { echo "FAIL: re-run failed"; cat "$work/second.log"; exit 1; }
grep -q "resuming k from checkpoint at update" "$work/second.log" || { echo "FAIL: did not resume"; cat "$work/second.log"; exit 1; }
h5dump -a /status "$result" | grep -q '"completed"' || { echo "FAIL: result not completed"; exit 1; }
n=$(h5dump -H -d /updates/clock "$result" | grep -oE 'DATASPACE +SIMPLE \{ \( [0-9]+' | grep -oE '[0-9]+$')
[[ $n == 192 ]] || { echo "FAIL: $n update rows, want 192 (3 epochs x 64)"; exit 1; }
echo "resumed: $(grep resuming "$work/second.log")"
echo "1 passed, 0 failed"
