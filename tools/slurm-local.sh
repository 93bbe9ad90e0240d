#!/usr/bin/env bash
# A real one-node Slurm on this machine, for tests and trying `asgd sweep submit`.
#   tools/slurm-local.sh start [DIR]   start munged, slurmctld, slurmd (state in DIR, default /tmp/asgd-slurm)
#   tools/slurm-local.sh stop [DIR]    stop exactly the daemons started from DIR (by their PID files)
#   tools/slurm-local.sh env [DIR]     print `export SLURM_CONF=...` for this cluster
# Needs root and the packages of `tools/setup.sh --slurm` (slurm-wlm, munge).
set -euo pipefail
cmd=${1:-}
D=${2:-/tmp/asgd-slurm}
usage() { sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; }

start() {
  command -v slurmctld >/dev/null || { echo "slurm-local.sh: slurmctld not found (tools/setup.sh --slurm)" >&2; exit 1; }
  [[ $(id -u) -eq 0 ]] || { echo "slurm-local.sh: needs root" >&2; exit 1; }
  if [[ -f $D/slurmctld.pid ]] && kill -0 "$(cat "$D/slurmctld.pid")" 2>/dev/null; then
    echo "slurm-local.sh: already running from $D"; return 0
  fi
  mkdir -p "$D/state" "$D/spool" "$D/log"
  local host cpus
  host=$(hostname) cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
  cat >"$D/slurm.conf" <<CONF
ClusterName=asgd-local
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=pmi2
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MaxArraySize=10001
MaxJobCount=20000
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
  export SLURM_CONF=$D/slurm.conf
  mkdir -p /run/munge && chown munge:munge /run/munge
  if ! { [[ -f /run/munge/munged.pid ]] && kill -0 "$(cat /run/munge/munged.pid)" 2>/dev/null; }; then
    runuser -u munge -- /usr/sbin/munged
    echo started >"$D/munged.ours"
  fi
  slurmctld -i
  slurmd
  for _ in $(seq 100); do
    [[ $(sinfo -h -o %T 2>/dev/null) == idle* ]] && { echo "slurm-local.sh: up ($D, $cpus CPUs); export SLURM_CONF=$D/slurm.conf"; return 0; }
    sleep 0.2
  done
  echo "slurm-local.sh: the node did not become idle; see $D/log" >&2
  exit 1
}

stop() {
  local f pid
  for f in "$D/slurmd.pid" "$D/slurmctld.pid"; do
    [[ -f $f ]] || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$f"
  done
  if [[ -f $D/munged.ours && -f /run/munge/munged.pid ]]; then
    kill "$(cat /run/munge/munged.pid)" 2>/dev/null || true
    rm -f "$D/munged.ours"
  fi
  echo "slurm-local.sh: stopped ($D)"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  env) echo "export SLURM_CONF=$D/slurm.conf" ;;
  -h|--help|"") usage; [[ -n $cmd ]] ;;
  *) echo "slurm-local.sh: unknown command '$cmd'" >&2; usage >&2; exit 2 ;;
esac
