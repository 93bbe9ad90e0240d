#!/usr/bin/env bash
# The bad inputs exploratory reviews found that the other
# scripts did not cover: each gets ONE line naming it and exit 2, before any
# work; and two `sweep run`s of one suite share its runs without a failure.
#   usage: review_inputs.sh ASGD_BINARY
set -uo pipefail
asgd=$(realpath "${1:?usage: review_inputs.sh ASGD_BINARY}")
here=$(cd "$(dirname "$0")" && pwd)
source "$here/expect_lib.sh"

syn=(--model mlp --dataset synthetic --synthetic-size 8 --synthetic-classes 4 --synthetic-train 256
     --synthetic-test 64 --batch 16 --epochs 1 -q --results "$work/results" --suite s --run-id r)
mkdir -p "$work/folder.yaml" "$work/sites/dir.yaml"

# flags
expect_error "an empty number is no 0" "--momentum: '' is not a number" -- "$asgd" train "${syn[@]}" --momentum ""
expect_error "a double's range" "--lr: '1e309' is out of the range of a double" -- "$asgd" train "${syn[@]}" --lr 1e309
expect_error "threads beyond Kokkos' OpenMP pool" "threads 513 must be in 1..512" -- "$asgd" train "${syn[@]}" --threads 513
expect_error "info threads" "--threads: .600. is not a whole number in \[1, 512\]" -- "$asgd" info --threads 600
expect_error "warm steps beyond the run" "--warm-steps 1000000 is more than the run's 16 updates" -- \
  "$asgd" train "${syn[@]}" --warm-steps 1000000
expect_error "compute_s beyond 1e6 s" "compute_s 1e\+308 is beyond 1e\+06 s" -- \
  "$asgd" train "${syn[@]}" --virtual --learners 2 --timing fixed --compute-s 1e308
expect_error "batch beyond the dataset" "--batch 40000 x 2 learners is more than fashion-mnist's 60000" -- \
  "$asgd" train --model lenet --dataset fashion-mnist --batch 40000 --learners 2 --virtual --dry-run
expect_error "server-lr's range" "--server-lr 1000000 must be in \(0, 1e6\)" -- \
  "$asgd" train "${syn[@]}" --virtual --learners 2 --protocol nsync --merge server-sgd --server-lr 1e6
expect_error "models: empty name" "name: must not be empty|must not be empty" -- "$asgd" models ""
expect_error "mpiexec not found" "--mpiexec: '/nonexistent/mpiexec' is not an executable file" -- \
  "$asgd" calibrate --mpiexec /nonexistent/mpiexec --out "$work/p.yaml"

mkfifo "$work/fifo.yaml"
expect_error "calibrate: --out a pipe is not replaced" "fifo.yaml: is not a regular file" -- \
  "$asgd" calibrate --models mlp --batch 16 --steps 2 --out "$work/fifo.yaml"
[[ -p $work/fifo.yaml ]] && pass "the pipe is still a pipe" || fail "calibrate replaced the pipe"
expect_error "calibrate: a model twice" "--models: 'mlp' is given twice" -- \
  "$asgd" calibrate --models mlp,mlp --batch 16 --steps 2 --out "$work/dup.yaml"

# files: folders, devices, endless files, keys given twice
printf '{"batch": 16, "batch": 32}\n' >"$work/twice.json"
expect_error "config: a key twice" "twice.json: key 'batch' is given twice" -- "$asgd" train --config "$work/twice.json"
expect_error "profile: a folder" "profile .*folder.yaml: is a folder, not a profile file" -- \
  "$asgd" train "${syn[@]}" --virtual --learners 2 --profile "$work/folder.yaml"
expect_error "profile: a device" "profile /proc/self/mem: cannot read profile file" -- \
  "$asgd" train "${syn[@]}" --virtual --learners 2 --profile /proc/self/mem
expect_error "suite: endless" "/dev/zero: is not a regular file .*, not a suite file" -- "$asgd" sweep plan /dev/zero
base="base: {model: mlp, dataset: {kind: synthetic, shape: [8, 8, 1], classes: 4, n_train: 256, n_test: 64}, batch: 16, epochs: 1}"
printf 'name: s1\nmode: real\n%s\nseeds: [1]\n' "$base" >"$work/s1.yaml"
expect_error "site: a folder" "dir.yaml: is a folder, not a site file" -- \
  "$asgd" sweep submit "$work/s1.yaml" --sites-dir "$work/sites" --site dir --dry-run --results "$work/sub"
printf 'name: g\nmode: real\nbase: {model: mlp, device: cuda, learners: 4, dataset: {kind: synthetic, n_train: 256}}\nresources: {gpus_per_learner: 1073741824}\n' \
  >"$work/gpl.yaml"
expect_error "suite: GPUs per learner overflowing" "gpl.yaml:4: resources gpus_per_learner: 1073741824 must be in 0..1" -- \
  "$asgd" sweep plan "$work/gpl.yaml"
printf 'name: g4\nmode: real\nbase: {model: mlp, device: cuda, learners: 2, dataset: {kind: synthetic, n_train: 256}}\nresources: {gpus_per_learner: 4}\n' \
  >"$work/gpl4.yaml"
expect_error "suite: GPUs a learner would not use" "resources gpus_per_learner: 4 must be in 0..1 \(a learner drives one GPU" -- \
  "$asgd" sweep plan "$work/gpl4.yaml"
printf 'name: t8\nmode: real\n%s\nresources: {cpus_per_rank: 2}\nzip:\n  - threads: [8]\n' "$base" >"$work/t8.yaml"
expect_error "submit: threads above cpus_per_rank" "t8.yaml: run .*: threads 8 is more than resources.cpus_per_rank 2" -- \
  "$asgd" sweep submit "$work/t8.yaml" --dry-run --results "$work/sub"
if [[ $("$asgd" info 2>/dev/null) != *"CUDA    built"* ]]; then
  printf 'name: cu\nmode: real\nbase: {model: mlp, device: cuda, dataset: {kind: synthetic, n_train: 256}}\nresources: {gpus_per_learner: 1}\n' \
    >"$work/cu.yaml"
  expect_error "submit: device cuda from a build without CUDA" "cu.yaml: run .* has device cuda, but .* was built without CUDA" -- \
    "$asgd" sweep submit "$work/cu.yaml" --dry-run --results "$work/sub"
  expect_error "run: device cuda from a build without CUDA" "cu.yaml: run .* has device cuda, but .* was built without CUDA" -- \
    "$asgd" sweep run "$work/cu.yaml" --results "$work/sub"
fi
# a relative --results: submit writes the absolute folder into each run config (a task starts elsewhere)
(cd "$work" && "$asgd" sweep submit s1.yaml --dry-run --results rel >/dev/null 2>&1)
if grep -q "\"results_dir\": \"$work/rel\"" "$work"/rel/s1/configs/*.json 2>/dev/null; then
  pass "submit: configs hold the absolute results folder"
else
  fail "submit: configs' results_dir: $(grep -h results_dir "$work"/rel/s1/configs/*.json 2>&1 | head -2)"
fi
printf 'name: c\nmode: real\n%s\nresources: {cpus_per_rank: 513}\n' "$base" >"$work/cpus.yaml"
expect_error "suite: cpus per rank" "resources cpus_per_rank: 513 must be in 1..512" -- "$asgd" sweep plan "$work/cpus.yaml"
printf 'name: b\nmode: real\nbase: {model: mlp, dataset: {kind: synthetic, n_train: 256}, batch: 1000}\n' >"$work/big.yaml"
expect_error "suite: batch beyond the data, at plan time" "big.yaml.*--synthetic-train 256 has fewer samples than one round of 1 learner x --batch 1000" -- \
  "$asgd" sweep plan "$work/big.yaml"
: >"$work/afile"
expect_error "status: results is a file" "afile: is a file, not a results folder" -- \
  "$asgd" sweep status "$work/s1.yaml" --results "$work/afile"

# compare: a gate compares every file or refuses
mkdir -p "$work/cmp/base" "$work/cmp/cand"
"$asgd" train "${syn[@]}" --max-steps 2 --results "$work/cmp/base" --run-id a >/dev/null 2>&1 || fail "compare's baseline run"
cp -r "$work/cmp/base/." "$work/cmp/cand/"
head -c 100 "$(ls "$work"/cmp/cand/s/runs/*.h5 | head -1)" >"$work/cmp/cand/s/runs/broken.h5"
expect_error "compare: an unreadable candidate file" "compare: .*broken.h5.*a gate compares every results file" -- \
  "$asgd" compare "$work/cmp/base/s" "$work/cmp/cand/s"
bench() {  # bench FILE REAL_TIME
  printf '{"context": {}, "benchmarks": [{"name": "x", "run_type": "iteration", "real_time": %s, "time_unit": "ns"}]}\n' "$2" >"$1"
}
bench "$work/b.json" 100
for bad in -5 0 '"abc"'; do
  bench "$work/c.json" "$bad"
  expect_error "compare: benchmark real_time $bad" "c.json: benchmark x: real_time" -- "$asgd" compare "$work/b.json" "$work/c.json"
done

# OMP_NUM_THREADS is checked on every build (an OpenMP build's libgomp may warn first: only asgd's line counted)
openmp=0
info_text=$("$asgd" info 2>/dev/null)  # captured: `| grep -q` under pipefail fails when grep stops reading early
[[ $info_text == *"(OpenMP)"* ]] && openmp=1
if true; then
  for v in 0 abc 1024 "2,x"; do
    OMP_NUM_THREADS=$v timeout 60 "$asgd" info >"$work/out" 2>"$work/err"
    rc=$?
    if (( rc == 2 )) && [[ $(grep -c "^asgd: error: OMP_NUM_THREADS '$v': want whole numbers in 1..512" "$work/err") == 1 ]]; then
      pass "OMP_NUM_THREADS=$v refused"
    else
      fail "OMP_NUM_THREADS=$v: rc=$rc $(head -c 300 "$work/err")"
    fi
  done
fi

# threads that ran, the OpenMP runtime's limits, asgd_micro, site sbatch entries
micro=$(dirname "$asgd")/asgd_micro
json_threads=$(OMP_NUM_THREADS=2 "$asgd" info --json 2>/dev/null | grep -o '"threads_per_rank": [0-9]*')
[[ $json_threads == '"threads_per_rank": 2' ]] && pass "OMP_NUM_THREADS=2: the machine record says 2 threads per rank" ||
  fail "OMP_NUM_THREADS=2: info --json says '$json_threads'"
if (( openmp )); then
  expect_error "OMP_THREAD_LIMIT below --threads" "OMP_THREAD_LIMIT 1 is below the 2 threads per rank" -- \
    env OMP_THREAD_LIMIT=1 "$asgd" info --threads 2
  expect_error "OMP_THREAD_LIMIT below OMP_NUM_THREADS, in train" "OMP_THREAD_LIMIT 1 is below the 2 threads per rank" -- \
    env OMP_THREAD_LIMIT=1 OMP_NUM_THREADS=2 "$asgd" train "${syn[@]}"
  for e in OMP_DYNAMIC=true OMP_MAX_ACTIVE_LEVELS=0; do
    if [[ $(env "$e" timeout 60 "$asgd" info --threads 2 2>"$work/err") == *"(OpenMP) (2 threads)"* ]]; then
      pass "$e: Kokkos starts its 2 threads"
    else
      fail "$e: $(head -c 300 "$work/err")"
    fi
  done
else
  [[ $(OMP_NUM_THREADS=2 "$asgd" info 2>/dev/null) == *", 2 threads"$'\n'* ]] && pass "Serial: OMP_NUM_THREADS=2 gives the BLAS 2 threads" ||
    fail "Serial: OMP_NUM_THREADS=2: $(OMP_NUM_THREADS=2 "$asgd" info 2>&1 | grep BLAS)"
fi
OMP_NUM_THREADS=abc timeout 60 "$asgd" train "${syn[@]}" --dry-run >"$work/out" 2>"$work/err"
rc=$?
if (( rc == 2 )) && [[ $(grep -c "^asgd: error: OMP_NUM_THREADS 'abc'" "$work/err") == 1 ]]; then
  pass "train --dry-run checks OMP_NUM_THREADS"
else
  fail "train --dry-run with OMP_NUM_THREADS=abc: rc=$rc $(head -c 300 "$work/err")"
fi
OMP_NUM_THREADS=513 timeout 60 "$asgd" sweep run "$work/s1.yaml" --results "$work/omp513" >"$work/out" 2>"$work/err"
rc=$?
if (( rc == 2 )) && grep -q "^asgd: error: OMP_NUM_THREADS '513'" "$work/err" && [[ ! -e $work/omp513/s1/runs ]]; then
  pass "sweep run: OMP_NUM_THREADS=513 refused before any run"
else
  fail "sweep run with OMP_NUM_THREADS=513: rc=$rc $(head -c 300 "$work/err")"
fi
if [[ -x $micro ]]; then
  expect_error "asgd_micro: threads beyond the pool" "asgd_micro: --threads '600': want a whole number in 1..512" -- "$micro" --threads 600
  expect_error "asgd_micro: threads not a number" "asgd_micro: --threads '2x'" -- "$micro" --threads 2x
  OMP_NUM_THREADS=abc timeout 60 "$micro" --threads 2 >"$work/out" 2>"$work/err"
  rc=$?
  if (( rc == 2 )) && [[ $(grep -c "^asgd_micro: OMP_NUM_THREADS 'abc'" "$work/err") == 1 ]] && ! grep -q terminate "$work/err"; then
    pass "asgd_micro: OMP_NUM_THREADS=abc refused"
  else
    fail "asgd_micro: OMP_NUM_THREADS=abc: rc=$rc $(head -c 300 "$work/err")"
  fi
fi
mkdir -p "$work/sb/sites"
sb=0
for entry in '"-c 3"' '"--cpus-per-task=8"' '"--ntasks=2"' '"--export=NONE"' '"--cpus-per-task 8"' \
             '"--expo=NONE"' '"--arr=0-99"' '"--cpus-per-t=8"'; do
  sb=$((sb + 1))
  printf 'description: t\nsbatch: ["--exclusive", %s]\n' "$entry" >"$work/sb/sites/s$sb.yaml"
  expect_error "site: sbatch entry $entry" "s$sb.yaml:2: sbatch\[1\] '${entry//\"/}': " -- \
    "$asgd" sweep submit "$work/s1.yaml" --sites-dir "$work/sb/sites" --site "s$sb" --dry-run --results "$work/sb/r"
done
printf 'description: t\nsbatch: ["--exclusive", "--comment=a b", "--mem=4G"]\n' >"$work/sb/sites/good.yaml"
"$asgd" sweep submit "$work/s1.yaml" --sites-dir "$work/sb/sites" --site good --dry-run --results "$work/sb/r" >/dev/null 2>&1 &&
  pass "site: --exclusive, --comment with a space, --mem accepted" || fail "site: good sbatch entries refused"
"$asgd" sweep plan "$work/t8.yaml" >"$work/out" 2>&1 && grep -q "^note: run .*: threads 8 is more than resources.cpus_per_rank 2: .sweep submit. refuses" "$work/out" &&
  pass "plan says submit would refuse threads above cpus_per_rank" || fail "plan t8: $(head -c 300 "$work/out")"
mkdir -p "$work/cmp/cand2"
OMP_NUM_THREADS=2 "$asgd" train "${syn[@]}" --max-steps 2 --results "$work/cmp/cand2" --run-id a >/dev/null 2>&1 || fail "compare's 2-thread run"
expect_error "compare: 1 thread against 2" "baseline ran with Kokkos .*, 1 thread per rank and the candidate with Kokkos .*, 2 threads per rank" -- \
  "$asgd" compare "$work/cmp/base/s" "$work/cmp/cand2/s"

# reports' inputs
mkfifo "$work/fifo.json" "$work/fifo.h5"
timeout 20 "$asgd" validate "$work/fifo.h5" >"$work/out" 2>&1
rc=$?
(( rc == 1 )) && grep -q "fifo.h5: is not a regular file" "$work/out" && pass "validate: a pipe is invalid, no hang" ||
  fail "validate on a pipe: rc=$rc $(head -c 300 "$work/out")"
expect_error "compare: a pipe (no hang)" "fifo.json: is not a regular file" -- "$asgd" compare "$work/fifo.json" "$work/b.json"
expect_error "history: a pipe (no hang)" "fifo.json: is not a regular file" -- "$asgd" history "$work/fifo.json" --out "$work/hf"
printf '{"context": {}, "benchmarks": [{"name": "x", "run_type": "iteration", "real_time": 5, "error_occurred": "true"}]}\n' >"$work/err.json"
expect_error "compare: a field of the wrong type" "err.json: benchmark x: field error_occurred is not true or false: \"true\"" -- \
  "$asgd" compare "$work/b.json" "$work/err.json"
"$asgd" history "$work/b.json" "$work/err.json" --out "$work/he" --no-plots >"$work/out" 2>&1
rc=$?
(( rc == 0 )) && grep -q "err.json: benchmark x: field error_occurred is not true or false" "$work/he/history.md" &&
  pass "history: a field of the wrong type skips the entry, named" || fail "history with err.json: rc=$rc $(head -c 300 "$work/out")"
printf '{"context": {}, "benchmarks": [{"name": "g", "run_type": "iteration", "real_time": 5, "time_unit": "ns", "GFLOP/s": 10}]}\n' >"$work/g1.json"
printf '{"context": {}, "benchmarks": [{"name": "g", "run_type": "iteration", "real_time": 5, "time_unit": "ns", "GFLOP/s": "NaN"}]}\n' >"$work/g2.json"
expect_error "compare: GFLOP/s not a number" "g2.json: benchmark g: GFLOP/s is not a number" -- "$asgd" compare "$work/g1.json" "$work/g2.json"
"$asgd" history "$work/cmp/base/s" "$work/cmp/base/s" --out "$work/hc" --no-plots >"$work/out" 2>&1
(( $? == 0 )) && grep -q "a copy of .* (counted once)" "$work/hc/history.md" && pass "history: one folder given twice counts once" ||
  fail "history over a folder twice: $(grep -c copy "$work/hc/history.md" 2>&1)"
mkdir -p "$work/ro/report/speedup.csv"
cp -r "$work/cmp/base/s/runs" "$work/ro/"
expect_error "report: an output that is a folder, before any table is written" "speedup.csv" -- \
  "$asgd" report "$work/ro" --no-plots
[[ ! -e $work/ro/report/runs.csv ]] && pass "report: no runs.csv written beside the refused output" || fail "report wrote runs.csv"

# two runners of one suite: each run trained once, nothing counted failed, no log cut
printf 'name: conc\nmode: real\nbase: {model: lenet, dataset: {kind: synthetic, shape: [28, 28, 1], n_train: 2048, n_test: 64}, batch: 32, epochs: 1}\nseeds: [1, 2, 3]\n' \
  >"$work/conc.yaml"
timeout 300 "$asgd" sweep run "$work/conc.yaml" --results "$work/conc" --no-report >"$work/r1.out" 2>&1 &
first=$!
sleep 1
timeout 300 "$asgd" sweep run "$work/conc.yaml" --results "$work/conc" --no-report >"$work/r2.out" 2>&1
rc2=$?
wait "$first"
rc1=$?
runs=$(ls "$work/conc/conc/runs/"*.h5 2>/dev/null | wc -l)
if (( rc1 == 0 && rc2 == 0 && runs == 3 )) && ! ls "$work/conc/conc/logs/"*.failed >/dev/null 2>&1 &&
   grep -q " 0 failed" "$work/r1.out" && grep -q " 0 failed" "$work/r2.out"; then
  pass "two runners of one suite: 3 runs, none failed ($(grep -h 'suite conc: .* completed' "$work/r1.out" "$work/r2.out" | tr '\n' ';'))"
else
  fail "two runners: rc $rc1/$rc2, $runs results"; cat "$work/r1.out" "$work/r2.out"
fi
for log in "$work/conc/conc/logs/"*.log; do
  grep -q "^== asgd sweep run (pid" "$log" || fail "$log has no attempt header"
done

echo "$passed passed, $failures failed, $skipped parts skipped"
(( failures == 0 )) || exit 1
