#!/usr/bin/env bash
# An emulated multi-node cluster on this machine: N nodes, each a network namespace with its own
# host name (a UTS namespace) and address, joined by a bridge in a namespace of its own; each
# node's link shaped in both directions (tc htb, acknowledgements first). Nothing is connected to the machine's own
# interfaces: no route, NAT or bridge leads out, and the only addresses are the ones given here.
#   tools/cluster.sh up N [--link RATE] [--node-link K=RATE]... [--cpus C] [--slurm]
#       N nodes asgd-node1..asgd-nodeN (10.250.0.1..N), every link RATE (tc syntax: 1gbit,
#       200mbit; default 1gbit), node K's link RATE instead; --slurm also starts slurmctld (on
#       asgd-node1) and one slurmd per node, each C CPUs (default: this machine's)
#   tools/cluster.sh down          stop every process started here (by PID), remove every
#                                  namespace, link and file made here
#   tools/cluster.sh status        the nodes, their addresses and links, the daemons
#   tools/cluster.sh exec NODE CMD...   run CMD on a node (asgd-nodeK or K)
#   tools/cluster.sh burst NODE    the bytes of NODE's token bucket (htb burst; both directions)
#   tools/cluster.sh env           print the exports for the cluster's mpiexec and Slurm
# `$ASGD_CLUSTER_DIR/bin/mpiexec` (default /run/asgd-cluster) is Open MPI's mpirun started on
# asgd-node1, launching ranks on the nodes (one per node in order, wrapping round, unless
# ASGD_CLUSTER_HOSTS="asgd-node2,asgd-node3" or --host / -H / --hostfile / --map-by say otherwise).
# Latency cannot be added (no netem in every kernel): links are shaped in bandwidth only.
# Needs root, ip (iproute2), tc, the htb and bfifo qdiscs and the u32 filter; --slurm needs
# tools/setup.sh --slurm.
set -Eeuo pipefail
D=${ASGD_CLUSTER_DIR:-/run/asgd-cluster}
NET=10.250.0
PREFIX=asgd-node
SWITCH=asgd-switch
MAX_NODES=64
me=cluster.sh

die() { echo "$me: $*" >&2; exit 2; }
usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; }

need_tools() {
  [[ $(id -u) -eq 0 ]] || die "needs root (network namespaces, veth links, tc)"
  command -v ip >/dev/null || die "'ip' (iproute2) not found: apt-get install iproute2"
  command -v tc >/dev/null || die "'tc' (iproute2) not found: apt-get install iproute2"
  command -v nsenter >/dev/null && command -v unshare >/dev/null || die "nsenter/unshare (util-linux) not found"
}

node_name() {  # K or asgd-nodeK -> asgd-nodeK (must exist)
  local n=$1
  [[ $n =~ ^[0-9]+$ ]] && n=$PREFIX$n
  grep -q "^$n " "$D/nodes" 2>/dev/null || die "no node '$1' (tools/cluster.sh status lists them)"
  echo "$n"
}

# Run a command on a node: its network, its host name, and the cluster's /etc/hosts bound over
# the machine's in a mount namespace of its own (/sys stays the machine's: slurmd needs its
# cgroup mounts, which `ip netns exec` would hide).
on_node() { "$D/bin/on-node" "$@"; }

# A rate tc accepts, and htb, bfifo and u32 present: the shaping tried on the switch's loopback
# first. Prints ok, or the part that failed and tc's message (see shape).
check_rate() {
  local rate=$1 err
  if err=$(shape "$SWITCH" lo "$rate"); then
    ip netns exec "$SWITCH" tc qdisc del dev lo root
    echo ok
  else
    ip netns exec "$SWITCH" tc qdisc del dev lo root 2>/dev/null || true
    echo "$err"
  fi
}

# bytes_of RATE SECONDS: the bytes RATE (tc syntax, checked before) carries in SECONDS.
bytes_of() {
  python3 - "$1" "$2" <<'PY'
import re, sys
m = re.fullmatch(r"([0-9.]+)([kmgt]?)(bit|bps)", sys.argv[1])
v = float(m[1]) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m[2]]
print(int((v / 8 if m[3] == "bit" else v) * float(sys.argv[2])))
PY
}
# Every bucket of a link: 1 ms at its rate, at least 64 KiB (one GSO packet).
burst_of() { local b; b=$(bytes_of "$1" 0.001); echo $((b > 65536 ? b : 65536)); }

# shape NS DEV RATE: DEV sends at most RATE (htb). TCP packets under 128 bytes (acknowledgements,
# the smallest messages) go in a class served first, the rest in a byte FIFO of 100 ms at the
# rate. TCP needs a deep queue to fill a shaped link; but a node's acknowledgements for what it
# sends come in on its receiving side, and behind 100 ms of other nodes' data they cut what it
# sends by up to 40% (docs/CLUSTER.md), which a switch's shallow buffers do not. On failure
# prints one line, "PART: tc's message" (PART: htb, rate, bfifo or u32), and returns 1.
shape() {
  local ns=$1 dev=$2 rate=$3 b q s out
  b=$(burst_of "$rate")
  q=$(($(bytes_of "$rate" 0.1) + b))  # the data queue: 100 ms at the rate plus one bucket
  local -a steps=(
    "htb|qdisc replace dev $dev root handle 1: htb default 20"
    "rate|class add dev $dev parent 1: classid 1:1 htb rate $rate burst $b cburst $b quantum 65536"
    "rate|class add dev $dev parent 1:1 classid 1:10 htb rate $rate ceil $rate prio 0 burst $b cburst $b quantum 65536"
    "rate|class add dev $dev parent 1:1 classid 1:20 htb rate $rate ceil $rate prio 1 burst $b cburst $b quantum 65536"
    "bfifo|qdisc add dev $dev parent 1:20 handle 20: bfifo limit $q"
    "u32|filter add dev $dev parent 1: protocol ip prio 1 u32 match ip protocol 6 0xff match u16 0x0000 0xff80 at 2 flowid 1:10"
  )
  for s in "${steps[@]}"; do
    # shellcheck disable=SC2086  # the step's words
    if ! out=$(ip netns exec "$ns" tc ${s#*|} 2>&1); then
      echo "${s%%|*}: ${out%%$'\n'*}"
      return 1
    fi
  done
}

cleanup_all() {  # everything this script can have made, whether or not its state is whole
  local f pid ns
  if [[ -d $D/pids ]]; then
    for f in "$D"/pids/*.pid; do
      [[ -f $f ]] || continue
      pid=$(cat "$f")
      kill "$pid" 2>/dev/null || true
    done
    for f in "$D"/pids/*.pid; do
      [[ -f $f ]] || continue
      pid=$(cat "$f")
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$f"
    done
  fi
  # any process still inside one of our namespaces (an MPI rank, a step daemon)
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^($PREFIX[0-9]+|$SWITCH)$" || true); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  if [[ -d $D/uts ]]; then
    for f in "$D"/uts/*; do
      [[ -e $f ]] || continue
      umount "$f" 2>/dev/null || true
      rm -f "$f"
    done
  fi
  rm -rf "$D"
}

make_node() {  # make_node K RATE
  local k=$1 rate=$2 n=$PREFIX$1
  ip netns add "$n"
  ip link add "v$k" netns "$SWITCH" type veth peer name eth0 netns "$n"
  ip -n "$SWITCH" link set "v$k" master br0 up
  ip -n "$n" link set lo up
  ip -n "$n" addr add "$NET.$k/24" dev eth0
  ip -n "$n" link set eth0 up
  shape "$n" eth0 "$rate" >&2        # the node's sending side
  shape "$SWITCH" "v$k" "$rate" >&2  # its receiving side
  touch "$D/uts/$n"
  unshare --uts="$D/uts/$n" hostname "$n"
  echo "$n $NET.$k $rate" >>"$D/nodes"
}

write_launchers() {
  local n hosts=()
  mkdir -p "$D/bin"
  while read -r n _; do hosts+=("$n"); done <"$D/nodes"
  {
    echo "127.0.0.1 localhost"
    while read -r h a _; do echo "$a $h"; done <"$D/nodes"
  } >"$D/hosts"
  cat >"$D/bin/on-node" <<EOF
#!/bin/bash
# on-node NODE CMD...: CMD on an emulated node (tools/cluster.sh): the node's network and host
# name, the cluster's /etc/hosts, and the node's own scratch folder at $D/node-tmp
n=\$1; shift
mkdir -p "$D/local/\$n"
exec nsenter --net="/run/netns/\$n" --uts="$D/uts/\$n" -- \\
  unshare --mount --propagation private /bin/sh -c \\
  'mount --bind "\$0" /etc/hosts && mount --bind "\$1" "\$2" && shift 3 && exec "\$@"' \\
  "$D/hosts" "$D/local/\$n" "$D/node-tmp" - "\$@"
EOF
  mkdir -p "$D/node-tmp"
  # the "ssh" launcher of hydra and of Open MPI's rsh agent, called as: launch [-x] [-q] HOST CMD...
  cat >"$D/bin/launch" <<EOF
#!/bin/bash
while [[ \${1:-} == -* ]]; do shift; done
host=\$1; shift
exec "$D/bin/on-node" "\$host" /bin/sh -c "\$*"
EOF
  cat >"$D/bin/mpiexec" <<EOF
#!/bin/bash
# Open MPI's mpirun on ${hosts[0]}, its ranks on the emulated nodes (tools/cluster.sh): ob1
# over tcp on each node's eth0 (the shaped link) between nodes, vader (shared memory) among
# ranks of one node. Ranks go one per node in order, wrapping round, unless --host, -H,
# --hostfile or --map-by say otherwise. The ranks are bound to no core unless --bind-to says
# otherwise: the nodes share this machine's cores, and each node's daemon, binding its own
# ranks as if it had the machine alone, put every node's first rank on core 0 (Open MPI binds
# to a core where a job has 2 ranks). Open MPI passes no environment variable it is not
# told of: every ASGD_, OPENBLAS_, OMP_, KOKKOS_ and HDF5_ variable set here is passed on.
hosts=\${ASGD_CLUSTER_HOSTS:-$(IFS=,; echo "${hosts[*]}")}
IFS=, read -ra hs <<<"\$hosts"
slots=""
for h in "\${hs[@]}"; do slots+="\${slots:+,}\$h:64"; done  # 64 slots: more ranks than CPUs allowed
hostarg=(--host "\$slots") map=(--map-by node) bind=(--bind-to none)
for a in "\$@"; do
  case \$a in
    --host|-H|-host|--hostfile|-hostfile|--machinefile|-machinefile) hostarg=() ;;
    --map-by|-map-by) map=() ;;
    --bind-to|-bind-to) bind=() ;;
  esac
done
pass=()
while read -r v; do pass+=(-x "\$v"); done < <(compgen -e | grep -E '^(ASGD_|OPENBLAS_|OMP_|KOKKOS_|HDF5_)' || true)
exec "$D/bin/on-node" "${hosts[0]}" \\
  mpirun.openmpi --allow-run-as-root --mca plm_rsh_agent "$D/bin/launch" "\${hostarg[@]}" "\${map[@]}" "\${bind[@]}" \\
  --mca pml ob1 --mca btl tcp,vader,self --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \\
  "\${pass[@]}" "\$@"
EOF
  cat >"$D/bin/mpiexec.mpich" <<EOF
#!/bin/bash
# MPICH's hydra on ${hosts[0]}, its ranks on the emulated nodes (tools/cluster.sh), UCX over
# tcp only between them (UCX takes the namespaces for one host and would use its shared
# memory between them). Debian 12's MPICH 4.0.2 often hangs in MPI_Finalize over UCX's tcp
# transport (docs/CLUSTER.md): bin/mpiexec (Open MPI) is the cluster's working MPI.
hosts=\${ASGD_CLUSTER_HOSTS:-$(IFS=,; echo "${hosts[*]}")}
hostarg=(-hosts "\$hosts") ppn=(-ppn 1)
for a in "\$@"; do
  case \$a in -hosts|-host|-f|-hostfile|-machinefile) hostarg=() ;; -ppn|-perhost) ppn=() ;; esac
done
exec "$D/bin/on-node" "${hosts[0]}" \\
  mpiexec.hydra -launcher ssh -launcher-exec "$D/bin/launch" "\${hostarg[@]}" "\${ppn[@]}" \\
  -genv UCX_NET_DEVICES eth0 -genv UCX_TLS tcp,self "\$@"
EOF
  chmod +x "$D/bin/on-node" "$D/bin/launch" "$D/bin/mpiexec" "$D/bin/mpiexec.mpich"
}

slurm_up() {
  local cpus=$1 n a first
  command -v slurmctld >/dev/null || { down_quiet; die "--slurm: slurmctld not found (tools/setup.sh --slurm)"; }
  mkdir -p "$D/slurm/state" "$D/slurm/log" "$D/pids"
  first=$(head -1 "$D/nodes" | awk '{print $1" "$2}')
  {
    cat <<CONF
ClusterName=asgd-emulated
SlurmctldHost=${first% *}(${first#* })
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
SlurmdParameters=config_overrides
ReturnToService=2
MaxArraySize=10001
StateSaveLocation=$D/slurm/state
SlurmdSpoolDir=$D/slurm/spool/%n
SlurmctldPidFile=$D/pids/slurmctld.pid
SlurmdPidFile=$D/pids/slurmd.%n.pid
SlurmctldLogFile=$D/slurm/log/slurmctld.log
SlurmdLogFile=$D/slurm/log/slurmd.%n.log
CONF
    while read -r n a _; do echo "NodeName=$n NodeAddr=$a CPUs=$cpus State=UNKNOWN"; done <"$D/nodes"
    echo "PartitionName=emulated Nodes=$(awk '{print $1}' "$D/nodes" | paste -sd,) Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
  } >"$D/slurm/slurm.conf"
  # PMIx's per-step folders are named by job and step only: on one machine the nodes' would
  # collide in a shared /tmp, so each node keeps them in its own scratch folder
  echo "PMIxCliTmpDirBase=$D/node-tmp" >"$D/slurm/mpi.conf"
  export SLURM_CONF=$D/slurm/slurm.conf
  mkdir -p /run/munge && chown munge:munge /run/munge
  if ! { [[ -f /run/munge/munged.pid ]] && kill -0 "$(cat /run/munge/munged.pid)" 2>/dev/null; }; then
    runuser -u munge -- /usr/sbin/munged
    cp /run/munge/munged.pid "$D/pids/munged.pid"
  fi
  on_node "${first% *}" slurmctld -i
  while read -r n _; do
    mkdir -p "$D/slurm/spool/$n"
    on_node "$n" slurmd -N "$n"
  done <"$D/nodes"
  local want idle
  want=$(wc -l <"$D/nodes")
  for _ in $(seq 150); do
    idle=$(on_node "${first% *}" sinfo -h -N -o %T 2>/dev/null | grep -c '^idle' || true)
    [[ $idle -eq $want ]] && return 0
    sleep 0.2
  done
  echo "$me: only $idle of $want slurmd became idle; see $D/slurm/log" >&2
  down_quiet
  exit 1
}

down_quiet() { cleanup_all >/dev/null 2>&1 || true; }

up() {
  local N=${1:-} rate=1gbit cpus slurm=0 k r
  declare -A node_rate=()
  [[ $N =~ ^[0-9]+$ ]] || die "up: want a node count N, got '${N}'"
  (( N >= 1 && N <= MAX_NODES )) || die "up: N=$N: want 1..$MAX_NODES nodes"
  shift
  cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # nproc alone follows OMP_NUM_THREADS
  while (( $# )); do
    case $1 in
      --link) [[ $# -ge 2 ]] || die "--link needs a rate"; rate=$2; shift 2 ;;
      --node-link)
        [[ $# -ge 2 && $2 =~ ^([0-9]+)=(.+)$ ]] || die "--node-link '${2:-}': want K=RATE"
        k=${BASH_REMATCH[1]}
        (( k >= 1 && k <= N )) || die "--node-link $2: node $k is not one of 1..$N"
        node_rate[$k]=${BASH_REMATCH[2]}; shift 2 ;;
      --cpus)
        [[ $# -ge 2 && $2 =~ ^[0-9]+$ ]] && (( $2 >= 1 && $2 <= 1024 )) || die "--cpus '${2:-}': want 1..1024"
        cpus=$2; shift 2 ;;
      --slurm) slurm=1; shift ;;
      *) die "up: unknown option '$1'" ;;
    esac
  done
  for r in "$rate" "${node_rate[@]}"; do
    [[ $r =~ ^[0-9]+(\.[0-9]+)?[kmgt]?(bit|bps)$ ]] ||
      die "--link '$r': want a rate such as 1gbit, 200mbit or 100mbps"
  done
  need_tools
  if [[ -f $D/nodes ]] || ip netns list | grep -qE "^($PREFIX[0-9]+|$SWITCH)( |$)"; then
    die "already up ($(wc -l <"$D/nodes" 2>/dev/null || echo some) nodes in $D): tools/cluster.sh down first"
  fi
  mkdir -p "$D/uts"
  : >"$D/nodes.new"
  ip netns add "$SWITCH"
  ip -n "$SWITCH" link set lo up
  for r in "$rate" "${node_rate[@]}"; do
    local res
    res=$(check_rate "$r")
    case $res in
      ok) ;;
      rate:*) down_quiet; die "--link '$r': tc refused it: ${res#rate: }" ;;
      htb:*) down_quiet; die "the htb qdisc is not available in this kernel (sch_htb): ${res#htb: }" ;;
      bfifo:*) down_quiet; die "the bfifo qdisc is not available in this kernel (sch_fifo): ${res#bfifo: }" ;;
      *) down_quiet; die "the u32 filter is not available in this kernel (cls_u32): ${res#u32: }" ;;
    esac
  done
  ip -n "$SWITCH" link add br0 type bridge
  ip -n "$SWITCH" link set br0 up
  rm -f "$D/nodes.new"
  trap 'echo "$me: up failed; removing what was made" >&2; down_quiet' ERR
  for k in $(seq "$N"); do make_node "$k" "${node_rate[$k]:-$rate}"; done
  write_launchers
  trap - ERR
  if (( slurm )); then slurm_up "$cpus"; fi
  echo "$me: up: $N nodes in $D (${PREFIX}1..$PREFIX$N, $NET.1..$N), links $rate$( ((${#node_rate[@]})) && echo " (some per node: status)")$( ((slurm)) && echo ", Slurm")"
  echo "$me: mpiexec: $D/bin/mpiexec$( ((slurm)) && echo "; export SLURM_CONF=$D/slurm/slurm.conf")"
}

down() {
  need_tools
  if [[ ! -d $D ]] && ! ip netns list | grep -qE "^($PREFIX[0-9]+|$SWITCH)( |$)"; then
    die "down: nothing is up ($D does not exist)"
  fi
  cleanup_all
  echo "$me: down: every namespace, link, process and file of the cluster removed"
}

status() {
  [[ -f $D/nodes ]] || die "status: nothing is up ($D/nodes does not exist)"
  printf '%-14s %-12s %-10s %s\n' node address link processes
  local n a r
  while read -r n a r; do
    printf '%-14s %-12s %-10s %s\n' "$n" "$a" "$r" "$(ip netns pids "$n" 2>/dev/null | wc -l)"
  done <"$D/nodes"
  echo "bridge: br0 in namespace $SWITCH; no link to this machine's interfaces"
  echo "mpiexec: $D/bin/mpiexec"
  if [[ -f $D/slurm/slurm.conf ]]; then
    echo "slurm: export SLURM_CONF=$D/slurm/slurm.conf"
    SLURM_CONF=$D/slurm/slurm.conf on_node "$(head -1 "$D/nodes" | cut -d' ' -f1)" sinfo -N -h -o '  %N %T %c CPUs' || true
  fi
}

cmd=${1:-}
[[ $# -gt 0 ]] && shift
case $cmd in
  up) up "$@" ;;
  down) [[ $# -eq 0 ]] || die "down takes no arguments"; down ;;
  status) [[ $# -eq 0 ]] || die "status takes no arguments"; status ;;
  exec)
    [[ $# -ge 2 ]] || die "exec: want NODE CMD..."
    [[ -f $D/nodes ]] || die "exec: nothing is up"
    n=$(node_name "$1"); shift
    [[ -f $D/slurm/slurm.conf ]] && export SLURM_CONF=$D/slurm/slurm.conf
    on_node "$n" "$@" ;;
  burst)
    [[ $# -eq 1 ]] || die "burst: want NODE"
    [[ -f $D/nodes ]] || die "burst: nothing is up"
    n=$(node_name "$1")
    burst_of "$(awk -v n="$n" '$1 == n {print $3}' "$D/nodes")" ;;
  env)
    [[ -f $D/nodes ]] || die "env: nothing is up"
    echo "# the cluster's mpiexec: asgd sweep run --mpiexec $D/bin/mpiexec, asgd calibrate --mpiexec $D/bin/mpiexec"
    # Open MPI under srun (Slurm's PMIx): ob1 over tcp on the nodes' shaped eth0
    echo "export OMPI_MCA_pml=ob1 OMPI_MCA_btl=tcp,vader,self OMPI_MCA_btl_tcp_if_include=eth0 OMPI_MCA_oob_tcp_if_include=eth0"
    [[ -f $D/slurm/slurm.conf ]] && echo "export SLURM_CONF=$D/slurm/slurm.conf"
    true ;;
  -h|--help) usage ;;
  "") usage >&2; exit 2 ;;
  *) die "unknown command '$cmd' (up, down, status, exec, burst, env)" ;;
esac
