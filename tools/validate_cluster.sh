#!/usr/bin/env bash
# The performance model across nodes: brings up the emulated cluster (tools/cluster.sh) with
# one node per rank, calibrates with the link probe run between two of its nodes, then runs
# each configuration for real across the nodes and on virtual learners with that profile, and
# prints predicted against measured (tools/validate_model.py's table and bounds).
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: sudo tools/validate_cluster.sh [-m MODEL] [-b BATCH] [-l RATE] [-L "1 2 4"] [-S "1 2"]
                                      [-p "hardsync"] [-u N] [-r N] [-x "ARGS"] [-o OUT] [-R DIR] [-h]

  -m MODEL a built-in model (default lenet)
  -b BATCH minibatch size (default 64)

  -l RATE  every node's link, both directions (tc syntax; default 200mbit)
  -L LIST  learner counts (default "1 2 4")
  -S LIST  server shard counts (default "1 2")
  -p LIST  protocols of hardsync, softsync (n = L), nsync (n_sync 4) (default "hardsync")
  -u N     updates of a hardsync run (default 12; softsync N x L pushes, nsync N x L rounds
           of n_sync 4 minibatches, at least 6: N pushes a learner)
  -r N     real runs per configuration, their median measured (default 1)
  -x ARGS  more `asgd train` options for every run, real and virtual (e.g. "--lr 0.02")
  -o OUT   working folder (default /tmp/asgd-validate-cluster): profile, results, logs, table.md
  -R DIR   predict again only: the real runs and the profile of an earlier study's working folder
           DIR (its pairs.tsv and profile.yaml) against virtual runs of this asgd, with the same
           -m -b -L -S -p -u -x; no cluster, no root (for work on the model)
  -h       this help

Seed 7; lenet is 3.3M parameters, 13 MB a push or a pull. Rank r runs on node r + 1: the S
shards and the L learners each on a node of their own, L + S nodes. The cluster is brought up
(and taken down at the end) unless one is up already; then its links are the ones it has
(tools/cluster.sh status), and -l, when given, must name the same rate. Needs root, the ompi preset's
asgd (build/ompi/asgd, or set ASGD) and tools/setup.sh --cluster. Exit 1 when a run is outside
the bounds (throughput within 10%, mean staleness within 10% or 0.1 absolute below 1).
USAGE
}

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
model=lenet batch=64 more="" rate=200mbit rate_given=0 learners="1 2 4" shards="1 2" protocols=hardsync updates=12 repeats=1
out=/tmp/asgd-validate-cluster reuse=""
while getopts ":m:b:l:L:S:p:u:r:x:o:R:h" opt; do
  case "$opt" in
    m) model="$OPTARG" ;;
    b) batch="$OPTARG" ;;
    l) rate="$OPTARG" rate_given=1 ;;
    x) more="$OPTARG" ;;
    L) learners="$OPTARG" ;;
    S) shards="$OPTARG" ;;
    p) protocols="$OPTARG" ;;
    u) updates="$OPTARG" ;;
    r) repeats="$OPTARG" ;;
    o) out="$OPTARG" ;;
    R) reuse="$OPTARG" ;;
    h) usage; exit 0 ;;
    *) echo "validate_cluster.sh: bad option -$OPTARG (see -h)" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
die() { echo "validate_cluster.sh: $*" >&2; exit 2; }
(( $# == 0 )) || die "unexpected argument '$1' (see -h)"
for v in $learners $shards; do [[ $v =~ ^[1-9][0-9]?$ ]] || die "-L/-S want counts 1..99, not '$v'"; done
for p in $protocols; do [[ $p =~ ^(hardsync|softsync|nsync)$ ]] || die "-p: '$p' is not hardsync, softsync or nsync"; done
[[ $updates =~ ^[1-9][0-9]{0,3}$ ]] || die "-u wants 1..9999, not '$updates'"
[[ $repeats =~ ^[1-9]$ ]] || die "-r wants 1..9, not '$repeats'"
[[ $model =~ ^[a-z0-9][a-z0-9_-]*$ ]] || die "-m: '$model' is not a model name (asgd models lists them)"
[[ $batch =~ ^[1-9][0-9]{0,4}$ ]] || die "-b wants 1..99999, not '$batch'"
[[ $rate =~ ^[0-9]+(\.[0-9]+)?([kmg]?(bit|bps))$ ]] || die "-l: '$rate' is not a tc rate (e.g. 200mbit, 1gbit)"
read -r -a extra_args <<<"$more"
if [[ -n $reuse ]]; then
  [[ -f $reuse/pairs.tsv && -f $reuse/profile.yaml ]] || die "-R $reuse: no pairs.tsv and profile.yaml there"
  reuse=$(cd "$reuse" && pwd)
  [[ $reuse != "$(mkdir -p "$out" && cd "$out" && pwd)" ]] || die "-R: OUT must be another folder than $reuse"
fi
[[ -n $reuse || $(id -u) -eq 0 ]] || die "needs root (tools/cluster.sh)"
asgd="${ASGD:-$root/build/ompi/asgd}"
[[ -x $asgd ]] || die "no $asgd (cmake --preset ompi && cmake --build build/ompi, or set ASGD)"

max() { local m=0 v; for v in "$@"; do (( v > m )) && m=$v; done; echo "$m"; }
nodes=$(( $(max $learners) + $(max $shards) ))
(( nodes >= 2 )) || nodes=2
D=${ASGD_CLUSTER_DIR:-/run/asgd-cluster}
made=0
if [[ -n $reuse ]]; then
  rate=$(sed -n 's/^links \([^;]*\);.*/\1/p' "$reuse/table.md" 2>/dev/null | head -1)
elif [[ -f $D/nodes ]]; then
  have=$(wc -l <"$D/nodes")
  (( have >= nodes )) || die "the cluster that is up has $have nodes; $nodes wanted (tools/cluster.sh down first)"
  rates=$(awk '{print $3}' "$D/nodes" | sort -u | paste -sd, -)
  (( rate_given == 0 )) || [[ $rates == "$rate" ]] ||
    die "-l $rate, but the cluster that is up has links $rates (tools/cluster.sh down first)"
  rate=$rates
else
  "$root/tools/cluster.sh" up "$nodes" --link "$rate" >&2
  made=1
fi
cleanup() { (( made )) && "$root/tools/cluster.sh" down >&2 || true; }
trap cleanup EXIT
mpiexec="$D/bin/mpiexec"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
mkdir -p "$out"
rm -rf "$out/results"
pairs="$out/pairs.tsv"
: >"$pairs"

if [[ -n $reuse ]]; then
  cp "$reuse/profile.yaml" "$out/profile.yaml"
else
  echo "calibrating: $asgd calibrate --mpiexec $mpiexec (the link probe between asgd-node1 and asgd-node2)" >&2
  "$asgd" calibrate --out "$out/profile.yaml" --models "$model" --batch "$batch" --mpiexec "$mpiexec" >"$out/calibrate.log" 2>&1 ||
    { cat "$out/calibrate.log" >&2; exit 1; }
  # the links' token bucket, as tools/cluster.sh set it (calibrate cannot see it: a message
  # after a pause waits longer for the ranks' polls than the bucket saves)
  burst=$("$root/tools/cluster.sh" burst 1)
  sed -i "/^  send_buffer_bytes:/a\\  burst_bytes: {value: $burst, stated: \"the token bucket of every link of the emulated cluster (tools/cluster.sh burst 1)\"}" \
    "$out/profile.yaml"
  grep -q '^  burst_bytes:' "$out/profile.yaml" || die "could not add the links' bucket to $out/profile.yaml"
  # the largest message Open MPI sends at once (pml ob1, btl tcp: what the cluster's mpiexec
  # uses); a larger one waits for the receiver's poll
  eager=$(ompi_info --parsable --param btl tcp --level 9 2>/dev/null | sed -n 's/^mca:btl:tcp:param:btl_tcp_eager_limit:value://p')
  [[ $eager =~ ^[0-9]+$ ]] || die "could not read Open MPI's btl_tcp_eager_limit (ompi_info --param btl tcp --level 9)"
  sed -i "/^  burst_bytes:/a\\  eager_bytes: {value: $eager, stated: \"Open MPI's btl_tcp_eager_limit (ompi_info): the cluster's mpiexec uses pml ob1 and btl tcp\"}" \
    "$out/profile.yaml"
  grep -q '^  eager_bytes:' "$out/profile.yaml" || die "could not add the eager limit to $out/profile.yaml"
fi

common=(--model "$model" --batch "$batch" --eval-every 100 --seed 7 "${extra_args[@]}")
for L in $learners; do
  for S in $shards; do
    for p in $protocols; do
      steps=$updates extra=()
      case $p in
        softsync) steps=$((updates * L)); extra=(--n "$L") ;;
        nsync) steps=$(( updates * L > 6 ? updates * L : 6 )); extra=(--n-sync 4) ;;
      esac
      args=("${common[@]}" --learners "$L" --servers "$S" --protocol "$p" --max-steps "$steps" "${extra[@]}")
      echo "== $model L=$L S=$S $p over $((L + S)) nodes" >&2
      "$asgd" train "${args[@]}" --virtual --timing normal --profile "$out/profile.yaml" --results "$out/results" \
        --suite virtual -q >"$out/virtual.log" 2>&1 || { cat "$out/virtual.log" >&2; exit 1; }
      line="$model L=$L S=$S $p	$(sed -n 's/.*results \(.*\.h5\)$/\1/p' "$out/virtual.log" | tail -1)"
      if [[ -n $reuse ]]; then
        real=$(awk -F'\t' -v l="$model L=$L S=$S $p" '$1 == l { for (i = 3; i <= NF; i++) printf "\t%s", $i }' "$reuse/pairs.tsv")
        [[ -n $real ]] || die "-R: $reuse/pairs.tsv has no real run of $model L=$L S=$S $p"
        printf '%s%s\n' "$line" "$real" >>"$pairs"
        continue
      fi
      for r in $(seq "$repeats"); do
        "$mpiexec" -n $((L + S)) "$asgd" train "${args[@]}" --results "$out/results" --suite "real$r" -q \
          >"$out/real.log" 2>&1 || { cat "$out/real.log" >&2; exit 1; }
        line="$line	$(sed -n 's/.*results \(.*\.h5\)$/\1/p' "$out/real.log" | tail -1)"
      done
      printf '%s\n' "$line" >>"$pairs"
    done
  done
done
: >"$out/table.md"
[[ -z $reuse ]] || echo "predicted again against the real runs of $reuse" | tee -a "$out/table.md"
echo "links $rate; $(grep -m1 -i 'model name' /proc/cpuinfo | sed 's/.*: //'); $(getconf _NPROCESSORS_ONLN) CPUs; commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)" |
  tee -a "$out/table.md"
/usr/bin/python3 "$root/tools/validate_model.py" "$pairs" | tee -a "$out/table.md"
