#!/usr/bin/env bash
# The performance model's validation (docs/MODEL.md): calibrates
# this machine, then runs each configuration for real (mpiexec) and on virtual
# learners with the profile, and prints predicted against measured.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: tools/validate_model.sh [-o OUT] [-r REPEATS] [-q | -s | -w] [-1] [-R DIR] [-h]

  -o OUT   working folder (default /tmp/asgd-validate-model); results, profiles,
           logs and the table (OUT/table.md) go there
  -r N     rounds per configuration (default 3): each calibrates, runs the configuration
           for real and virtually on that profile; the round of median ratio is the row's
           (with -1 and for the injected rows: N real runs, their median measured)
  -q       quick: lenet only, L = 2, S = 1 and 2 (no server-bound runs)
  -s       the server-bound runs only
  -w       the short-step and oversubscribed runs only (below)
  -1       calibrate once, at the start, as a user with one profile would; by default
           each round is calibrated right before its real run (OUT/profiles/LABEL-R.yaml),
           so a drift of the machine's speed over the study's minutes is not charged to
           the model
  -R DIR   predict again only: the real runs and the profiles of an earlier study's working
           folder DIR (a changed model checked in minutes, not an hour; with -q, -s or -w
           the rows that study ran)
  -h       this help

Runs, for lenet (3.3M parameters) and cifar10-18pct (90k): L = 1, 2 learners,
S = 1, 2 shards, hardsync, softsync (n = L: c = 1, asynchronous) and nsync (n_sync 4), each
for real (mpiexec -n L+S) and virtually with the profile just measured; then
server-bound runs with costs injected into the real server
(ASGD_INJECT_SERVER) and the same costs in the profile; then short steps, where
each exchange's own costs decide (mlp at batch 64 and at batch 8, a step of a
millisecond or less: L = 2, S = 1, softsync n = 1 and n = 2; at least 3 real runs each
whatever -r says), and more ranks than
cores (lenet L = 3, S = 1 hardsync: 4 ranks; cifar10-18pct L = 3, S = 2
softsync n = 3: 5 ranks). Prints the table;
exit 1 when a run is outside the bounds (throughput within 10%, mean
staleness within 10% or 0.1 absolute below 1).
Environment: ASGD (default build/ci/asgd, else build/default/asgd), MPIEXEC (mpiexec).
USAGE
}

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out=/tmp/asgd-validate-model
quick=0
server_only=0
wide_only=0
once=0
repeats=3
reuse=""
while getopts ":o:r:qsw1R:h" opt; do
  case "$opt" in
    o) out="$OPTARG" ;;
    r) repeats="$OPTARG"; [[ "$repeats" =~ ^[1-9][0-9]?$ ]] || { echo "validate_model.sh: -r wants 1..99" >&2; exit 2; } ;;
    q) quick=1 ;;
    s) server_only=1 ;;
    w) wide_only=1 ;;
    1) once=1 ;;
    R) reuse="$OPTARG" ;;
    h) usage; exit 0 ;;
    *) echo "validate_model.sh: bad option -$OPTARG (see -h)" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
(( $# == 0 )) || { echo "validate_model.sh: unexpected argument '$1' (see -h)" >&2; exit 2; }
asgd="${ASGD:-}"
if [[ -z "$asgd" ]]; then
  for b in "$root/build/ci/asgd" "$root/build/default/asgd"; do [[ -x "$b" ]] && { asgd="$b"; break; }; done
fi
[[ -x "$asgd" ]] || { echo "validate_model.sh: no asgd binary (build first, or set ASGD)" >&2; exit 2; }
mpiexec="${MPIEXEC:-mpiexec}"
if [[ -n $reuse ]]; then
  [[ -f $reuse/pairs.tsv && -f $reuse/profile.yaml ]] \
    || { echo "validate_model.sh: -R $reuse: no pairs.tsv and profile.yaml there" >&2; exit 2; }
  reuse=$(cd "$reuse" && pwd)
  [[ $reuse != "$(mkdir -p "$out" && cd "$out" && pwd)" ]] \
    || { echo "validate_model.sh: -R: OUT must be another folder than $reuse" >&2; exit 2; }
fi
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
mkdir -p "$out"
rm -rf "$out/results"
pairs="$out/pairs.tsv"
: > "$pairs"

calibrate() {  # OUT.yaml: this machine now, the figures of every model a row uses
  [[ -z $reuse ]] || { [[ -f $1 ]] || { echo "validate_model.sh: -R: no $1" >&2; exit 2; }; return 0; }
  "$asgd" calibrate --out "$1" --models lenet,cifar10-18pct,mlp --batch 64,8 >"$out/calibrate.log" 2>&1 \
    || { cat "$out/calibrate.log" >&2; exit 1; }
}

# one configuration: LABEL INJECT(U:B) PROFILE args... By default (calibrated per row, not
# injected) in rounds: calibrate (every model, as at the start), one real run, one virtual run on that
# profile, each round a line of the pairs file (validate_model.py takes the median round);
# else the given profile, the real runs, then one virtual run.
run_pair() {
  local label="$1" inject="$2" profile="$3"
  shift 3
  local L S
  L=$(sed -n 's/.*--learners \([0-9]*\).*/\1/p' <<<"$*")
  S=$(sed -n 's/.*--servers \([0-9]*\).*/\1/p' <<<"$*")
  echo "== $label" >&2
  # injected costs are not in the config: the suite name keeps those runs apart
  local tag="${inject:+-inject-${inject//[:.]/_}}"
  local reals="" r
  if [[ $once == 0 && -z $inject ]]; then
    for r in $(seq "$repeats"); do
      profile="$profiles/profiles/$(tr -c 'A-Za-z0-9=.\n-' _ <<<"$label")-$r.yaml"
      calibrate "$profile"
      real_run "$r" "" "" "$L" "$S" "$@"
      virtual_run "$profile" "$tag" "$@"
      printf '%s\t%s\t%s\n' "$label" "$virtual" "$real" >>"$pairs"
    done
    return
  fi
  for r in $(seq "$repeats"); do
    real_run "$r" "$inject" "$tag" "$L" "$S" "$@"
    reals="$reals	$real"
  done
  virtual_run "$profile" "$tag" "$@"
  printf '%s\t%s%s\n' "$label" "$virtual" "$reals" >>"$pairs"
}

real_run() {  # ROUND INJECT TAG L S args...: sets $real, the results file
  if [[ -n $reuse ]]; then  # the ROUND-th real run of this label in the earlier study
    real=$(awk -F'\t' -v l="$label" -v r="$1" -v once="$([[ $once == 1 || -n $2 ]] && echo 1)" \
      '$1 == l { if (once) { print $(2 + r); exit } if (++n == r) { print $3; exit } }' "$reuse/pairs.tsv")
    [[ -n $real ]] || { echo "validate_model.sh: -R: $reuse/pairs.tsv has no real run $1 of '$label'" >&2; exit 2; }
    return 0
  fi
  ASGD_INJECT_SERVER="$2" "$mpiexec" -n $(($4 + $5)) "$asgd" train "${@:6}" --results "$out/results" \
    --suite "real$1$3" -q >"$out/real.log" 2>&1 || { cat "$out/real.log" >&2; exit 1; }
  real=$(sed -n 's/.*results \(.*\.h5\)$/\1/p' "$out/real.log" | tail -1)
}

virtual_run() {  # PROFILE TAG args...: sets $virtual, the results file
  "$asgd" train "${@:3}" --virtual --timing normal --profile "$1" --results "$out/results" --suite "virtual$2" -q \
    >"$out/virtual.log" 2>&1 || { cat "$out/virtual.log" >&2; exit 1; }
  virtual=$(sed -n 's/.*results \(.*\.h5\)$/\1/p' "$out/virtual.log" | tail -1)
}

common=(--eval-every 100 --seed 7)
models=(lenet cifar10-18pct)
learners=(1 2)
[[ $quick == 1 ]] && { models=(lenet); learners=(2); }
profiles="${reuse:-$out}"  # where the profiles are: this study's, or the earlier one's with -R
rm -rf "$out/profiles"
mkdir -p "$out/profiles"
echo "calibrating ($asgd calibrate)" >&2
calibrate "$profiles/profile.yaml"
[[ $server_only == 1 || $wide_only == 1 ]] && models=()
for m in "${models[@]}"; do
  for L in "${learners[@]}"; do
    for S in 1 2; do
      for p in hardsync softsync nsync; do
        steps=60
        extra=()
        case "$p" in
          softsync) steps=$((60 * L)); extra=(--n "$L") ;;
          nsync) steps=$((15 * L)); extra=(--n-sync 4) ;;
        esac
        run_pair "$m L=$L S=$S $p" "" "$profiles/profile.yaml" --model "$m" --learners "$L" --servers "$S" \
          --protocol "$p" --max-steps "$steps" "${extra[@]}" "${common[@]}"
      done
    done
  done
done
if [[ $quick == 0 && $wide_only == 0 ]]; then
  # server-bound on purpose: a per-update and a per-byte cost in the real
  # server, the same in the profile
  for inj in "0.1:0" "0:4e-9"; do
    u="${inj%%:*}" b="${inj##*:}"
    [[ -n $reuse ]] || "$asgd" calibrate --out "$out/profile-$inj.yaml" --models lenet,cifar10-18pct \
      --inject-update-s "$u" --inject-byte-s "$b" >"$out/calibrate.log" 2>&1 || { cat "$out/calibrate.log" >&2; exit 1; }
    for S in 1 2; do
      run_pair "lenet L=2 S=$S softsync n=2, injected $inj" "$inj" "$profiles/profile-$inj.yaml" --model lenet \
        --learners 2 --servers "$S" --protocol softsync --n 2 --max-steps 80 "${common[@]}"
    done
  done
fi
if [[ $quick == 0 && $server_only == 0 ]]; then
  # short steps: each exchange's own costs (latency, polls, the shard's per-push work) decide;
  # at least 3 real runs each (a second or two apiece): with 3 ranks on 2 cores their
  # throughput moves by up to 2x between runs as the scheduler places the ranks
  all_repeats=$repeats
  (( repeats >= 3 )) || repeats=3
  for b in 64 8; do
    for n in 1 2; do
      run_pair "mlp batch $b L=2 S=1 softsync n=$n" "" "$profiles/profile.yaml" --model mlp --batch "$b" \
        --learners 2 --servers 1 --protocol softsync --n "$n" --max-steps $((4000 / n)) "${common[@]}"
    done
  done
  repeats=$all_repeats
  # more ranks than cores
  run_pair "lenet L=3 S=1 hardsync (4 ranks)" "" "$profiles/profile.yaml" --model lenet --learners 3 --servers 1 \
    --protocol hardsync --max-steps 40 "${common[@]}"
  run_pair "cifar10-18pct L=3 S=2 softsync n=3 (5 ranks)" "" "$profiles/profile.yaml" --model cifar10-18pct \
    --learners 3 --servers 2 --protocol softsync --n 3 --max-steps 150 "${common[@]}"
fi
: >"$out/table.md"
[[ -z $reuse ]] || echo "predicted again against the real runs of $reuse" | tee -a "$out/table.md"
/usr/bin/python3 "$root/tools/validate_model.py" "$pairs" | tee -a "$out/table.md"
