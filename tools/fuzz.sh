#!/usr/bin/env bash
# Runs the libFuzzer targets of the file readers (tests/fuzz; docs/TESTING.md "Fuzzing").
#   tools/fuzz.sh [-j N] [SECONDS] [TARGET...]
# SECONDS per target (default 60), N targets at a time (default 1: one after
# another; each target is one process on one core); TARGETs by name
# (fuzz_suite or suite; default all: suite site sbatch config idx idx_gz cifar
# results checkpoint profile bench). Builds the `fuzz` preset when needed (clang, libFuzzer,
# ASan + UBSan; ASGD_BUILD_JOBS parallel jobs, default all cores), makes the
# seed corpora (tests/fuzz/make_seeds.py, into build/fuzz/seeds.<pid>), keeps each
# target's corpus in build/fuzz/corpus/<target> (git-ignored, grows from run to
# run), logs to build/fuzz/logs/<target>.log and saves what a target finds in
# build/fuzz/findings/<target>/ (crash-*, leak-*, timeout-*, oom-*).
# A finding inside the HDF5 library (its innermost frame, past the sanitizer
# and libc frames, is in libhdf5: HDF5 1.10.8 crashes and hangs on some
# corrupt files) is set aside in findings/<target>/hdf5/ with its frame, and
# the target goes on for the time left; any other finding ends the target.
# Ends with a table per target (executions, executions per second, libFuzzer's
# cov: and ft:, corpus size, peak memory, findings inside HDF5) and exits 1
# when a target found anything of ours: a crash, leak, sanitizer report,
# timeout, out-of-memory or a broken invariant. Replay an input:
# build/fuzz/fuzzers/<target> FILE (ASGD_FUZZ_VERBOSE=1 prints each refusal).
set -euo pipefail
cd "$(dirname "$0")/.."

all=(suite site sbatch config idx idx_gz cifar results checkpoint profile bench)
seconds=60
par=1
case "${1:-}" in
  -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  -j)
    [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: -j takes a number of targets at a time (1 or more), not '${2:-}'" >&2; exit 2; }
    par=$2
    shift 2 ;;
esac
if [[ ${1:-} =~ ^[0-9]+$ ]]; then
  seconds=$1
  shift
fi
targets=()
for arg in "$@"; do
  t=${arg#fuzz_}
  [[ " ${all[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target '$arg' (${all[*]})" >&2; exit 2; }
  targets+=("$t")
done
(( ${#targets[@]} )) || targets=("${all[@]}")
(( seconds >= 1 )) || { echo "fuzz.sh: SECONDS must be >= 1" >&2; exit 2; }

build=build/fuzz
jobs=${ASGD_BUILD_JOBS:-$(nproc)}
if [[ -z ${ASGD_FUZZ_BUILT:-} ]]; then
  [[ -f $build/build.ninja ]] || cmake --preset fuzz
  cmake --build --preset fuzz --target fuzzers -j "$jobs"
fi

# N at a time: N runs of this script side by side, each with every Nth target
# (their seeds, scratch folders and logs apart), their tables printed in turn.
if (( par > 1 && ${#targets[@]} > 1 )); then
  mkdir -p "$build/logs"
  pids=() parts=()
  for (( i = 0; i < par && i < ${#targets[@]}; i++ )); do
    part=()
    for (( k = i; k < ${#targets[@]}; k += par )); do part+=("${targets[k]}"); done
    parts+=("$build/logs/part.$$.$i")
    ASGD_FUZZ_BUILT=1 "$0" "$seconds" "${part[@]}" >"${parts[i]}" 2>&1 &
    pids+=($!)
    echo "== fuzz.sh: ${part[*]} (${#part[@]} x $seconds s, output in ${parts[i]})"
  done
  rc=0
  for i in "${!pids[@]}"; do
    wait "${pids[i]}" || rc=1
    cat "${parts[i]}"
    rm -f "${parts[i]}"
  done
  exit "$rc"
fi

python=/usr/bin/python3
[[ -x $python ]] || python=python3
# Seeds of this run only (two runs of different targets may go side by side).
seeds=$build/seeds.$$
# The targets' scratch folders (tests/fuzz/fuzz_util.hpp) go under one folder of
# this run: a target that HDF5 ends mid-read (a crash or hang inside the
# library) cannot remove its own, and this run removes them all at its end.
export TMPDIR=$PWD/$build/tmp.$$
mkdir -p "$TMPDIR"
trap 'rm -rf "$seeds" "$TMPDIR"' EXIT

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Leaks inside HDF5 and hwloc themselves (docs/TESTING.md "Fuzzing"): nothing of them reaches the caller.
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0}
# The seeds come from the fuzz build's own asgd (`train --dry-run` starts MPI, whose hwloc
# plugins leak and are unloaded): whole allocation stacks, so that lsan.supp can name hwloc.
ASAN_OPTIONS=$ASAN_OPTIONS:fast_unwind_on_malloc=0 \
  "$python" tests/fuzz/make_seeds.py --asgd "$build/asgd" --source "$PWD" --out "$seeds"

# triage LOG: "none", "hdf5 FRAME" (a hang, crash or out-of-memory whose
# innermost frame in either the HDF5 library or the project's sources -- the
# sanitizer runtime, its interceptors, libFuzzer, libc and libstdc++ passed
# over -- lies in HDF5) or "project FRAME" (everything else: a crash, hang or
# out-of-memory in our code, a leak, a UBSan report, an exception other than
# asgd::Error or a broken invariant -- FUZZ FINDING).
triage() {
  local log=$1 frame
  grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|FUZZ FINDING' "$log" || { echo none; return; }
  if grep -qE 'FUZZ FINDING|runtime error:|ERROR: LeakSanitizer' "$log"; then
    echo "project $(grep -m1 -E 'FUZZ FINDING|runtime error:|ERROR: LeakSanitizer' "$log")"
    return
  fi
  frame=$(awk -v src="$PWD/" '/ERROR: (AddressSanitizer|libFuzzer)/ { on = 1 }
               on && /^ *#[0-9]+ / && (/libhdf5/ || index($0, src "src/") || index($0, src "tests/")) {
                 sub(/^ *#[0-9]+ 0x[0-9a-f]+ /, ""); print; exit
               }' "$log")
  if [[ $frame == *libhdf5* ]]; then echo "hdf5 $frame"; else echo "project ${frame:-$(grep -m1 ERROR "$log")}"; fi
}

mkdir -p "$build/logs"
failed=()
summary=()
hdf5_notes=()
for t in "${targets[@]}"; do
  name=fuzz_$t
  corpus=$build/corpus/$name
  findings=$build/findings/$name
  log=$build/logs/$name.log
  mkdir -p "$corpus" "$findings"
  : >"$log"
  timeout=30 asan=$ASAN_OPTIONS limits=(-rss_limit_mb=2048)
  if [[ $t == results || $t == checkpoint ]]; then
    timeout=5  # a read takes milliseconds; HDF5 itself loops forever on some files
    # Whole allocation stacks through HDF5 (built without frame pointers), so
    # that lsan.supp can tell a leak inside HDF5 from one of ours.
    asan=$asan:fast_unwind_on_malloc=0
    # HDF5 allocates what a corrupt length field says (a variable-length
    # string's 1.6 GB, 17 GB, 23 GB) and may fill it; the peak-RSS limit lies
    # far above the largest allocation allowed (below).
    limits=(-malloc_limit_mb=512 -rss_limit_mb=4096)
  fi
  # ASan refuses an allocation above 512 MB before making it, and reports it
  # with its stack. Without this, ASan maps the block and marks its shadow
  # first (an eighth of the size: 2.9 GB for 23 GB), and libFuzzer's RSS
  # thread ended the process while its malloc report was still printing the
  # stack (CI: an HDF5 allocation reported with no frame).
  asan=$asan:max_allocation_size_mb=512
  opts=(-timeout="$timeout" "${limits[@]}" -print_final_stats=1 -artifact_prefix="$findings/")
  dict=tests/fuzz/$t.dict
  [[ $t == idx_gz ]] && dict=tests/fuzz/idx.dict
  [[ $t == checkpoint ]] && dict=tests/fuzz/results.dict
  [[ -f $dict ]] && opts+=(-dict="$dict")
  echo "== $name: $seconds s (corpus $corpus, log $log)"
  # A finding inside HDF5 is recorded (findings/<target>/hdf5/) and fuzzing
  # goes on for the time left; a finding of ours ends the target.
  start=$SECONDS units=0 verdict=ok hdf5=0 hdf5_frames=()
  while (( seconds - (SECONDS - start) >= 1 )); do
    seg=$log.segment
    rc=0
    ASAN_OPTIONS=$asan "$build/fuzzers/$name" "${opts[@]}" -max_total_time=$(( seconds - (SECONDS - start) )) \
      "$corpus" "$seeds/$name" >"$seg" 2>&1 || rc=$?
    cat "$seg" >>"$log"
    n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$seg")
    units=$(( units + ${n:-0} ))
    last=$(grep -E '^#[0-9]+' "$seg" | tail -1 || true)
    [[ -n $last ]] && { cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last"); ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last"); }
    found=$(triage "$seg")
    (( rc == 0 )) && [[ $found == none ]] && break
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$seg" | tail -1)
    # A report without a stack frame (two of libFuzzer's threads reporting at
    # once, one ending the process): the input alone, in a fresh process,
    # says where it fails; an input that does not fail alone stays a finding.
    if [[ $found == project* && $found != *FUZZ\ FINDING* && $found != *runtime\ error* && -n $artifact && -f $artifact ]] &&
       ! grep -qE '^ *#[0-9]+ .*(libhdf5|/src/|/tests/)' "$seg"; then
      replay=$log.replay
      mkdir -p "$build/replay"
      ASAN_OPTIONS=$asan timeout 120 "$build/fuzzers/$name" -timeout="$timeout" "${limits[@]}" \
        -artifact_prefix="$build/replay/" "$artifact" >"$replay" 2>&1 || true
      { echo "== replay of $artifact alone"; cat "$replay"; } >>"$log"
      again=$(triage "$replay")
      rm -f "$replay"
      if [[ $again == none ]]; then
        found="$found (no stack frame; the input alone did not fail)"
      else
        found=$again
      fi
    fi
    # HDF5 does not always fail the same way on the same bytes (its free
    # lists and caches carry state from one file to the next): an input kept
    # in the corpus may crash it when the corpus is read again. That input
    # (the corpus names files by the SHA-1 the artifact's name ends with)
    # leaves the corpus with the finding.
    if [[ $found == hdf5* && -n $artifact && -f $artifact ]] && ! grep -q INITED "$seg"; then
      if [[ -f $corpus/${artifact##*-} ]]; then
        rm -f "$corpus/${artifact##*-}"
      else
        found="project (while reading the seeds) $found"
      fi
    fi
    if [[ $found == hdf5* && -n $artifact && -f $artifact ]]; then
      mkdir -p "$findings/hdf5"
      mv "$artifact" "$findings/hdf5/"
      echo "${found#hdf5 }" >"$findings/hdf5/$(basename "$artifact").frame"
      hdf5=$(( hdf5 + 1 ))
      # the function, else the library and offset
      hdf5_frames+=("$(sed -E 's/^in ([^ ]+) .*/\1/; s/^ *\(([^ )]*\/)?([^ )/]+)\).*/\2/' <<<"${found#hdf5 }")")
      echo "   inside HDF5: $(basename "$artifact"): ${found#hdf5 }"
      continue
    fi
    verdict="FOUND (exit $rc)"
    failed+=("$name")
    echo "   FOUND: ${found#project }" >&2
    grep -E 'ERROR:|runtime error:|FUZZ FINDING|SUMMARY:|Test unit written' "$seg" | head -8 >&2 || true
    break
  done
  elapsed=$(( SECONDS - start ))
  eps=$(( units / (elapsed > 0 ? elapsed : 1) ))
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | sort -n | tail -1)
  ncorp=$(find "$corpus" -type f | wc -l)
  if (( hdf5 )); then
    where=$(printf '%s\n' "${hdf5_frames[@]}" | sort | uniq -c | sort -rn | awk '{printf "%s%s x%s", (NR>1?", ":""), $2, $1}')
    hdf5_notes+=("$name: $hdf5 inside the HDF5 library ($where); inputs in $findings/hdf5/")
  fi
  summary+=("$(printf '%-16s %6ss %10s %8s %6s %6s %7s %6s %5s  %s' "$name" "$elapsed" "$units" "$eps" \
               "${cov:-?}" "${ft:-?}" "$ncorp" "${rss:-?}" "$hdf5" "$verdict")")
  rm -f "$log.segment"
done
echo
printf '%-16s %7s %10s %8s %6s %6s %7s %6s %5s  %s\n' target time execs exec/s cov ft corpus rss_mb hdf5 result
printf '%s\n' "${summary[@]}"
(( ${#hdf5_notes[@]} )) && printf 'HDF5 library: %s\n' "${hdf5_notes[@]}"
if (( ${#failed[@]} )); then
  echo "fuzz.sh: findings in ${failed[*]} (inputs in $build/findings/)" >&2
  exit 1
fi
echo "fuzz.sh: no crash, leak, sanitizer report, timeout or out-of-memory in our code (${#targets[@]} targets)"
