#!/usr/bin/env bash
# A real one-node Slurm: start it, submit a tiny suite with `asgd sweep submit`,
# wait for the arrays and the report job, check every result file and the
# report; re-submit (nothing to do), delete one result and re-submit (only it
# runs); requeue a running task and check it resumes from its checkpoint.
# Stops the daemons it started. Exit 77 (skipped) without Slurm or root.
#   usage: check_slurm.sh ASGD_BINARY SOURCE_DIR
set -uo pipefail
asgd=${1:?usage: check_slurm.sh ASGD_BINARY SOURCE_DIR}
src=${2:?usage: check_slurm.sh ASGD_BINARY SOURCE_DIR}
if ! command -v slurmctld >/dev/null || [[ $(id -u) -ne 0 ]]; then
  echo "SKIPPED: needs root and Slurm (tools/setup.sh --slurm)"; exit 77
fi
work=$(mktemp -d)
D=$work/cluster
cleanup() { "$src/tools/slurm-local.sh" stop "$D" >/dev/null; rm -rf "$work"; }
trap cleanup EXIT
"$src/tools/slurm-local.sh" start "$D" || exit 1
export SLURM_CONF=$D/slurm.conf
fail() { echo "FAIL: $*"; exit 1; }

# Waits. Measured (2 cores, Slurm 22.05): 197 s in all, of which 155 s were
# the requeued task pending with reason BeginTime: slurmctld holds a requeued
# job until the credential of its previous run expires (AuthInfo cred_expire,
# 120 s by default) plus its next scheduling pass. The test releases it early
# (scontrol update StartTime=now, below): what is tested is that the task runs
# again and resumes from its checkpoint, not Slurm's hold. The queue itself is
# polled every 0.2 s (squeue answers in ~10 ms): a wait ends within 0.2 s of
# the event; sacct is not available (no accounting here), and `sbatch --wait`
# cannot wrap the arrays `asgd sweep submit` submits.
t0=$SECONDS
# squeue fails (exit 1, nothing on stdout) while slurmctld is busy: only an
# answer counts, an empty queue is an empty answer with exit 0.
queue() {  # squeue's answer, retried while it fails
  local out
  for _ in $(seq 50); do
    if out=$(squeue -h "$@" 2>/dev/null); then printf '%s' "$out"; return 0; fi
    sleep 0.2
  done
  fail "squeue $* failed for 10 s"
}
wait_idle() {  # until our jobs have left the queue
  local start=$SECONDS
  for _ in $(seq 1500); do
    if [[ -z $(queue) ]]; then
      echo "   (queue empty after $((SECONDS - start)) s; $((SECONDS - t0)) s since the start)"
      return 0
    fi
    sleep 0.2
  done
  squeue; fail "jobs still queued after 300 s"
}
job_state() { queue -j "$1" -o %T | head -1; }

cat >"$work/tiny.yaml" <<YAML
name: tiny
mode: real
base:
  model: mlp
  dataset: {kind: synthetic, shape: [8, 8, 1], classes: 4, n_train: 512, n_test: 64}
  batch: 16
  epochs: 1
zip:
  - learners: [1, 2, 2]
    protocol: [hardsync, hardsync, softsync]
    n: [1, 1, 2]
seeds: [1]
resources: {servers: 1, time_limit: "00:05:00"}
YAML
res=$work/results
"$asgd" sweep submit "$work/tiny.yaml" --results "$res" --sites-dir "$src/slurm/sites" || fail "submit"
wait_idle
n=$(ls "$res/tiny/runs/"*.h5 2>/dev/null | wc -l)
[[ $n == 3 ]] || { tail -n 20 "$res"/tiny/logs/*; fail "$n of 3 result files"; }
"$asgd" validate "$res"/tiny/runs/*.h5 || fail "invalid result files"
[[ -s $res/tiny/report/report.md ]] || { cat "$res"/tiny/logs/*report*; fail "no report from the report job"; }
for f in "$res"/tiny/runs/*.h5; do
  h5dump -a /slurm_array_job_id "$f" | grep -qE '"[0-9]+"' || fail "$f: no Slurm array job id recorded"
done
echo "ok: 3 runs through 2 arrays + the report job"

out=$("$asgd" sweep submit "$work/tiny.yaml" --results "$res" --sites-dir "$src/slurm/sites")
grep -q "nothing to submit" <<<"$out" || fail "re-submit of a finished sweep submitted: $out"
victim=$(ls "$res"/tiny/runs/*L2-softsync*.h5)
rm "$victim" "$res"/tiny/checkpoints/$(basename "$victim")
out=$("$asgd" sweep submit "$work/tiny.yaml" --results "$res" --sites-dir "$src/slurm/sites")
grep -q "(1 array tasks" <<<"$out" || fail "half-finished sweep: expected 1 task: $out"
wait_idle
[[ -f $victim ]] || fail "the missing run was not re-run"
echo "ok: a re-submitted half-finished sweep ran only the missing run"

# requeue a running task: it must resume from its checkpoint
cat >"$work/long.yaml" <<YAML
name: long
base:
  model: lenet
  dataset: {kind: synthetic, shape: [28, 28, 1], n_train: 2048, n_test: 64}
  batch: 32
  epochs: 6
  checkpoint_every: 20
  eval_every: 10
seeds: [1]
resources: {time_limit: "00:10:00"}
YAML
"$asgd" sweep submit "$work/long.yaml" --results "$res" --sites-dir "$src/slurm/sites" >/dev/null || fail "submit long"
ck=$(printf '%s\n' "$res"/long/checkpoints/*.h5)
for _ in $(seq 600); do compgen -G "$res/long/checkpoints/*.h5" >/dev/null && break; sleep 0.2; done
compgen -G "$res/long/checkpoints/*.h5" >/dev/null || fail "no checkpoint appeared"
job=$(queue -n asgd-long-1 -o %i | head -1)
[[ -n $job ]] || fail "the long run finished before it could be requeued"
scontrol requeue "$job" || fail "scontrol requeue $job"
# Slurm's requeue hold (BeginTime, see above) is lifted as soon as the task is pending again
for _ in $(seq 300); do [[ $(job_state "$job") == PENDING ]] && break; sleep 0.1; done
[[ $(job_state "$job") == PENDING ]] || fail "requeued task $job is not pending: $(job_state "$job")"
# the killed trainer must be gone first: it holds the run's lock until it exits,
# and a second trainer of the same run refuses (one trainer per run)
lock=$(printf '%s\n' "$res"/long/checkpoints/*.lock)
for _ in $(seq 600); do flock -n "$lock" true && break; sleep 0.1; done
flock -n "$lock" true || fail "the requeued task's trainer still holds $lock after 60 s"
# slurmd refuses a launch credential made no later than the second it revoked
# the killed run's ("Killing non-startable batch job: Job credential revoked":
# the job then ends failed, not requeued). Slurm's own hold avoids that; the
# early release waits for the next whole second but one instead.
revoked=$(date +%s)
while (( $(date +%s) < revoked + 2 )); do sleep 0.1; done
scontrol update JobId="$job" StartTime=now || fail "scontrol update JobId=$job StartTime=now"
wait_idle
compgen -G "$res/long/runs/*.h5" >/dev/null || { tail -n 30 "$res"/long/logs/*; tail -n 40 "$D"/log/slurmctld.log; fail "requeued run did not finish"; }
grep -q "resuming" "$res"/long/logs/asgd-long-1_* || { cat "$res"/long/logs/*; fail "requeued task did not resume from its checkpoint"; }
echo "ok: a requeued task resumed from its checkpoint"
echo "3 passed, 0 failed"
