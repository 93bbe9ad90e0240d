#!/usr/bin/env bash
# Every bad input gets ONE clear line on stderr (short: a long value is cut)
# and exit code 2, and no earlier result is touched.
#   usage: bad_inputs.sh ASGD_BINARY
set -uo pipefail
asgd=${1:?usage: bad_inputs.sh ASGD_BINARY}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/expect_lib.sh"

syn=(--model mlp --dataset synthetic --synthetic-size 8 --synthetic-classes 4 --synthetic-train 256
     --synthetic-test 64 --batch 16 --epochs 1 -q --results "$work/results" --suite s --run-id r)

expect_error "all config problems at once" "batch 0.*lr -1|lr -1.*batch 0" -- \
  "$asgd" train "${syn[@]}" --batch 0 --lr -1
expect_error "unknown model" "model 'resnet' unknown" -- "$asgd" train "${syn[@]}" --model resnet
expect_error "n > learners" "softsync n 3 must be in 1..learners \(2\)" -- \
  "$asgd" train "${syn[@]}" --learners 2 --protocol softsync --n 3
expect_error "n_sync < 1" "n_sync 0" -- "$asgd" train "${syn[@]}" --protocol nsync --n-sync 0
expect_error "unknown merge rule" "merge rule 'median' unknown \(sum, mean, server-sgd, adagrad\)" -- \
  "$asgd" train "${syn[@]}" --protocol nsync --merge median
expect_error "merge under softsync" "--merge is an option of protocol nsync, not of softsync" -- \
  "$asgd" train "${syn[@]}" --protocol softsync --merge mean
expect_error "server momentum under merge adagrad" "--server-momentum is an option of merge server-sgd, not of merge adagrad" -- \
  "$asgd" train "${syn[@]}" --protocol nsync --merge adagrad --server-momentum 0.5
expect_error "negative server rate" "--server-lr -0.5 must be in \(0, 1e6\)" -- \
  "$asgd" train "${syn[@]}" --protocol nsync --merge server-sgd --server-lr -0.5
expect_error "unknown device" "device 'tpu' unknown \(cpu, cuda\)" -- "$asgd" train "${syn[@]}" --device tpu
expect_error "virtual learners on a GPU" "virtual learners run on the CPU" -- \
  "$asgd" train "${syn[@]}" --device cuda --virtual --learners 2
# No GPU here: a CPU-only build says how to build with CUDA; a CUDA build says no device is visible.
expect_error "--device cuda without a GPU" "built without CUDA|no CUDA device visible" -- \
  "$asgd" train "${syn[@]}" --device cuda
expect_error "unwritable results folder" "cannot create results folder /proc/" -- \
  "$asgd" train "${syn[@]}" --results /proc/asgd-results
# The environment, in a single-process and a virtual run as in MPI ranks; Kokkos' own variables
expect_error "single run: bad ASGD_WAIT" "ASGD_WAIT='bogus'" -- env ASGD_WAIT=bogus "$asgd" train "${syn[@]}"
expect_error "virtual run: bad ASGD_INJECT_SERVER" "ASGD_INJECT_SERVER='a:b'" -- \
  env ASGD_INJECT_SERVER=a:b "$asgd" train "${syn[@]}" --virtual --learners 2
expect_error "KOKKOS_NUM_THREADS not asgd's" "KOKKOS_NUM_THREADS='abc'.*unset KOKKOS_NUM_THREADS" -- \
  env KOKKOS_NUM_THREADS=abc "$asgd" train "${syn[@]}"
expect_error "a bad KOKKOS_DEVICE_ID" "Kokkos refused its settings .*KOKKOS_DEVICE_ID" -- \
  env KOKKOS_DEVICE_ID=abc "$asgd" info
# Virtual-learner options on a real run would change its id and nothing else
for opt in "--compute-s 1" "--comm-s 0.1" "--timing fixed" "--straggler 0"; do
  expect_error "real run with $opt" "${opt%% *} is for virtual learners" -- "$asgd" train "${syn[@]}" $opt
done
# What the run would refuse, --dry-run refuses; a refused run leaves no folder behind
expect_error "dry run: warm start is a folder" "--warm-start '/tmp': not a regular file" -- \
  "$asgd" train "${syn[@]}" --dry-run --warm-start /tmp
expect_error "dry run: no warm-start file" "--warm-start '$work/none.h5': no such file" -- \
  "$asgd" train "${syn[@]}" --dry-run --warm-start "$work/none.h5"
expect_error "dry run: beyond memory" "--synthetic-size 1048576: the run would need about" -- \
  "$asgd" train "${syn[@]}" --dry-run --synthetic-size 1048576
expect_error "memory: the flag that makes the model large" "--synthetic-classes 1048576: the run would need" -- \
  "$asgd" train "${syn[@]}" --model alexnet --synthetic-size 227 --synthetic-channels 3 --synthetic-classes 1048576 \
  --results "$work/mem"
[[ -e $work/mem ]] && fail "a run refused for memory made $work/mem"

# A truncated and a corrupt copy of the real Fashion-MNIST: tests/cli/bad_dataset.sh
# (ctest cli.bad_dataset; skipped, not passed, where the data set is absent).
expect_error "missing dataset" "cannot open" -- \
  "$asgd" train --model lenet --dataset fashion-mnist --data-dir "$work/none" -q --results "$work/results"

# a corrupt checkpoint is refused, left as it is, and no result appears
mkdir -p "$work/results/s/checkpoints"
echo "corrupt" >"$work/results/s/checkpoints/r.h5"
expect_error "corrupt checkpoint" "checkpoints/r.h5: not a readable HDF5 file" -- "$asgd" train "${syn[@]}"
[[ -f $work/results/s/runs/r.h5 ]] && { echo "FAIL corrupt checkpoint: a result was written"; failures=$((failures + 1)); }
[[ $(cat "$work/results/s/checkpoints/r.h5") == corrupt ]] || { echo "FAIL corrupt checkpoint was modified"; failures=$((failures + 1)); }
rm "$work/results/s/checkpoints/r.h5"

# a finished run is not run again and its file is untouched
"$asgd" train "${syn[@]}" >/dev/null 2>&1 || { echo "FAIL: a good run failed"; failures=$((failures + 1)); }
sum=$(md5sum <"$work/results/s/runs/r.h5")
"$asgd" train "${syn[@]}" >"$work/out" 2>&1
if [[ $(md5sum <"$work/results/s/runs/r.h5") != "$sum" ]] || ! grep -q "already finished" "$work/out"; then
  echo "FAIL finished run: re-run changed the result or did not say so"; failures=$((failures + 1))
else
  echo "ok   finished run is kept: $(head -1 "$work/out")"; passed=$((passed + 1))
fi

# ------------------------------------------------------------------ exit codes
# CLI11's own errors (unknown option, bad number, missing value) are bad input too.
expect_error "unknown option exits 2" "argument was not expected: --bogus" -- "$asgd" train "${syn[@]}" --bogus
expect_error "not a number exits 2" "batch.*abc" -- "$asgd" train "${syn[@]}" --batch abc
expect_error "fraction for an integer" "batch.*1\.5" -- "$asgd" train "${syn[@]}" --batch 1.5
expect_error "missing value exits 2" "batch" -- "$asgd" train "${syn[@]}" --batch
expect_error "int out of range" "learners" -- "$asgd" train "${syn[@]}" --learners 99999999999
expect_error "integer beyond 64 bits (CLI11 saturates it)" "--max-steps: '99999999999999999999' is not a whole number" -- \
  "$asgd" train "${syn[@]}" --max-steps 99999999999999999999
expect_error "hexadecimal batch" "--batch: '0x10' is not a whole number" -- "$asgd" train "${syn[@]}" --batch 0x10
expect_error "no subcommand" "subcommand is required" -- "$asgd"
expect_error "unknown subcommand" "subcommand is required|frobnicate" -- "$asgd" frobnicate
"$asgd" --help >/dev/null 2>&1 && "$asgd" train --help >/dev/null 2>&1 && pass "--help exits 0" || fail "--help does not exit 0"

# ------------------------------------------------------------------ numbers
expect_error "negative seed" "--seed: '-1' is not a whole number" -- "$asgd" train "${syn[@]}" --seed -1
expect_error "fractional seed" "--seed: '1.5'" -- "$asgd" train "${syn[@]}" --seed 1.5
expect_error "seed beyond 64 bits" "--seed: '99999999999999999999999'" -- \
  "$asgd" train "${syn[@]}" --seed 99999999999999999999999
expect_error "epochs inf" "epochs inf must be a finite number" -- "$asgd" train "${syn[@]}" --epochs inf
expect_error "epochs nan" "epochs nan" -- "$asgd" train "${syn[@]}" --epochs nan
expect_error "epochs 1e300" "epochs 1e\+300 is beyond" -- "$asgd" train "${syn[@]}" --epochs 1e300
expect_error "epochs 0" "epochs 0 must be > 0" -- "$asgd" train "${syn[@]}" --epochs 0
expect_error "epochs negative" "epochs -2 must be > 0" -- "$asgd" train "${syn[@]}" --epochs -2
expect_error "lr nan" "lr nan must be > 0" -- "$asgd" train "${syn[@]}" --lr nan
expect_error "lr inf" "lr inf must be > 0" -- "$asgd" train "${syn[@]}" --lr inf
expect_error "momentum 1" "momentum 1 must be in \\[0, 1)" -- "$asgd" train "${syn[@]}" --momentum 1
expect_error "weight decay inf" "weight decay inf" -- "$asgd" train "${syn[@]}" --weight-decay inf
expect_error "diverge loss inf" "diverge loss inf" -- "$asgd" train "${syn[@]}" --diverge-loss inf
expect_error "lr steps not increasing" "lr steps must be increasing" -- "$asgd" train "${syn[@]}" --lr-steps 5,3
expect_error "lr step nan" "lr step nan" -- "$asgd" train "${syn[@]}" --lr-steps nan
expect_error "threads 0" "threads 0 must be in 1..512" -- "$asgd" train "${syn[@]}" --threads 0
expect_error "threads 100000" "threads 100000" -- "$asgd" train "${syn[@]}" --threads 100000
expect_error "eval every 0" "eval every 0" -- "$asgd" train "${syn[@]}" --eval-every 0
expect_error "eval batch 0" "eval batch 0" -- "$asgd" train "${syn[@]}" --eval-batch 0
expect_error "target error 2" "target error 2 must be in \\[0, 1\\]" -- "$asgd" train "${syn[@]}" --target-error 2
expect_error "max steps negative" "max steps -1" -- "$asgd" train "${syn[@]}" --max-steps -1
expect_error "checkpoint every negative" "checkpoint every -5" -- "$asgd" train "${syn[@]}" --checkpoint-every -5
expect_error "learners negative" "learners -1 must be in 1..65536" -- "$asgd" train "${syn[@]}" --learners -1
expect_error "learners 0, no second problem of n" "\\(1 problem\\): learners 0 must be in 1..65536\$" -- "$asgd" train "${syn[@]}" --learners 0
expect_error "virtual: bad ASGD_IN_PLACE" "ASGD_IN_PLACE='no': want 1" -- \
  env ASGD_IN_PLACE=no "$asgd" train "${syn[@]}" --virtual --learners 2 --results "$work/inplace"
[[ -e $work/inplace ]] && fail "a refused ASGD_IN_PLACE left $work/inplace"
expect_error "straggler out of range" "straggler 5" -- "$asgd" train "${syn[@]}" --virtual --learners 2 --straggler 5
expect_error "straggler -1 (none is no value)" "straggler -1" -- "$asgd" train "${syn[@]}" --virtual --learners 2 --straggler -1
expect_error "compute cv negative" "compute cv -1 must be >= 0" -- "$asgd" train "${syn[@]}" --virtual --learners 2 --compute-cv -1
expect_error "unknown timing" "timing 'fast' unknown" -- "$asgd" train "${syn[@]}" --virtual --learners 2 --timing fast
expect_error "protocol in capitals" "protocol 'SoftSync' unknown" -- "$asgd" train "${syn[@]}" --protocol SoftSync

# ------------------------------------------------------------------ sizes and memory (refused before allocating)
expect_error "batch 99999999999 (synthetic)" "--synthetic-train 256 has fewer samples than one round .* --batch 99999999999" -- \
  "$asgd" train "${syn[@]}" --batch 99999999999 --run-id big1
expect_error "batch 99999999999 (fashion-mnist)" "^asgd: error: --batch 99999999999 x 1 learner is more than fashion-mnist's 60000 training samples" -- \
  "$asgd" train --model mlp --dataset fashion-mnist --data-dir "$work/none" --batch 99999999999 -q --results "$work/results"
expect_error "synthetic size 100000" "--synthetic-size 100000: the run would need about .* more than the .* available" -- \
  "$asgd" train "${syn[@]}" --synthetic-size 100000 --run-id big2
expect_error "synthetic size 0" "synthetic shape 0x0x1 must be positive" -- "$asgd" train "${syn[@]}" --synthetic-size 0
expect_error "synthetic size beyond bound" "synthetic shape .* is too large" -- "$asgd" train "${syn[@]}" --synthetic-size 9999999
expect_error "model that cannot take the input" "model lenet cannot take 2x2x1 inputs \(--synthetic-size" -- \
  "$asgd" train "${syn[@]}" --model lenet --synthetic-size 2 --run-id small
expect_error "alexnet on fashion-mnist" "model alexnet cannot take 28x28x1 inputs of fashion-mnist" -- \
  "$asgd" train --model alexnet --dataset fashion-mnist -q --results "$work/results"
expect_error "synthetic classes 1" "synthetic classes 1" -- "$asgd" train "${syn[@]}" --synthetic-classes 1
expect_error "fewer samples than a batch" "--synthetic-train 10 has fewer samples than one round of 1 learner x --batch 16" -- \
  "$asgd" train "${syn[@]}" --synthetic-train 10 --run-id big3

# ------------------------------------------------------------------ empty test sets
expect_error "synthetic test set of 0" "--synthetic-test 0" -- "$asgd" train "${syn[@]}" --synthetic-test 0
mkdir -p "$work/zero"
/usr/bin/python3 - "$work/zero" <<'EOF'
import struct, sys
d = sys.argv[1]
def images(name, n):
    open(f"{d}/{name}", "wb").write(struct.pack(">IIII", 0x803, n, 28, 28) + bytes(n * 784))
def labels(name, n):
    open(f"{d}/{name}", "wb").write(struct.pack(">II", 0x801, n) + bytes(n))
images("train-images-idx3-ubyte", 64); labels("train-labels-idx1-ubyte", 64)
images("t10k-images-idx3-ubyte", 0); labels("t10k-labels-idx1-ubyte", 0)
EOF
expect_error "IDX test set of 0 images" "zero/t10k-images-idx3-ubyte: byte 4: 0 images: the test set is empty" -- \
  "$asgd" train --model mlp --dataset mnist --data-dir "$work/zero" --batch 16 -q --results "$work/results"
[[ -z $(ls "$work/results/adhoc/runs" 2>/dev/null) ]] && pass "no result from an empty test set" || fail "an empty test set left a result"

# ------------------------------------------------------------------ files and folders
expect_error "data dir is a file" "is a file, not a data folder" -- \
  "$asgd" train --model mlp --dataset mnist --data-dir "$work/zero/t10k-images-idx3-ubyte" -q --results "$work/results"
mkdir -p "$work/dirfile" && cp "$work/zero/"* "$work/dirfile/" && rm "$work/dirfile/train-labels-idx1-ubyte" && mkdir "$work/dirfile/train-labels-idx1-ubyte"
expect_error "data file is a folder" "train-labels-idx1-ubyte: is a folder, not a data file" -- \
  "$asgd" train --model mlp --dataset mnist --data-dir "$work/dirfile" -q --results "$work/results"
expect_error "results folder is a file" "results" -- "$asgd" train "${syn[@]}" --results "$work/zero/t10k-images-idx3-ubyte"
expect_error "empty results folder" "--results: must not be empty" -- "$asgd" train "${syn[@]}" --results ""
expect_error "empty data dir" "--data-dir: must not be empty" -- "$asgd" train "${syn[@]}" --data-dir ""

# ------------------------------------------------------------------ names used as path components
expect_error "suite .." "suite '\.\.' is not a name" -- "$asgd" train "${syn[@]}" --suite ..
expect_error "suite ." "suite '\.' is not a name" -- "$asgd" train "${syn[@]}" --suite .
expect_error "suite with a slash" "suite 'a/b' may hold only" -- "$asgd" train "${syn[@]}" --suite a/b
expect_error "empty suite" "--suite: must not be empty" -- "$asgd" train "${syn[@]}" --suite ""
expect_error "run id .." "run id '\.\.' is not a name" -- "$asgd" train "${syn[@]}" --run-id ..
expect_error "empty run id" "--run-id: must not be empty" -- "$asgd" train "${syn[@]}" --run-id ""
expect_error "run id of 300 characters" "run id 'rrrr.*is too long \(300 characters, at most 200\)" -- \
  "$asgd" train "${syn[@]}" --run-id "$(printf 'r%.0s' {1..300})"
[[ ! -e $work/s && ! -e $work/a ]] && pass "nothing written outside --results" || fail "a name wrote outside --results"

# ------------------------------------------------------------------ long and odd values
long=$(head -c 100000 /dev/zero | tr '\0' x)
expect_error "100 kB model name is cut" "model 'xxxx.*\.\.\. \(100000 characters\)' unknown" -- "$asgd" train "${syn[@]}" --model "$long"
expect_error "100 kB number is cut" "batch" -- "$asgd" train "${syn[@]}" --batch "$long"
expect_error "newline in a value" "model 'le.nnet' unknown" -- "$asgd" train "${syn[@]}" --model $'le\nnet'
expect_error "unknown model of asgd models" "model 'resnet' unknown" -- "$asgd" models resnet
expect_error "unknown dataset of asgd models" "dataset 'imagenet' unknown" -- "$asgd" models --dataset imagenet

# ------------------------------------------------------------------ --config FILE
cfg() { printf '%s' "$2" >"$work/$1"; echo "$work/$1"; }
expect_error "config: unknown key" "bad1.json: unknown key 'lerners' \(did you mean 'learners'\?\)" -- \
  "$asgd" train --config "$(cfg bad1.json '{"lerners": 2}')"
expect_error "config: wrong type names the key" "key 'batch': expected a whole number .*got the text" -- \
  "$asgd" train --config "$(cfg bad2.json '{"batch": "64"}')"
printf '{"batch": 6\xff4}' >"$work/nonutf8.json"
expect_error "config: a byte that is not UTF-8 is escaped" "nonutf8.json: not valid JSON: .*\\\\xff" -- \
  "$asgd" train --config "$work/nonutf8.json"
expect_error "config: float for an integer" "key 'batch': expected a whole number .*got 64.5" -- \
  "$asgd" train --config "$(cfg bad3.json '{"batch": 64.5}')"
expect_error "config: array top level" "bad4.json: expected a JSON object of config keys, got a list" -- \
  "$asgd" train --config "$(cfg bad4.json '[{"batch": 64}]')"
expect_error "config: a folder" "is a folder, not a config file" -- "$asgd" train --config "$work"
expect_error "config: missing file" "nope.json: cannot open config file" -- "$asgd" train --config "$work/nope.json"
expect_error "config: empty file" "empty.json: config file is empty" -- "$asgd" train --config "$(cfg empty.json '')"
expect_error "config: truncated JSON" "cut.json: not valid JSON" -- "$asgd" train --config "$(cfg cut.json '{"batch": 6')"
expect_error "config: negative seed" "key 'seed': expected a whole number from 0" -- \
  "$asgd" train --config "$(cfg seed.json '{"seed": -1}')"
expect_error "config=FILE form" "eq.json: unknown key 'epoch' \(did you mean 'epochs'\?\)" -- \
  "$asgd" train --config="$(cfg eq.json '{"epoch": 2}')"
printf '{"model": "%s"}' "$long$long$long$long$long$long$long$long$long$long" >"$work/mb.json"
expect_error "config: 1 MB value is cut" "model 'xxxx.*\(1000000 characters\)' unknown" -- \
  "$asgd" train --config "$work/mb.json" --dataset synthetic -q --results "$work/results"

# ------------------------------------------------------------------ machine profiles (--profile)
good_profile() {
  cat <<'YAML'
name: t
compute:
  - model: mlp
    batch: 16
    seconds: {value: 0.01, measured: "t"}
    cv: {value: 0.01, measured: "t"}
link:
  learner: {latency_s: {value: 1e-6, measured: "p"}, bandwidth_Bps: {value: 1e+10, measured: "p"}}
  server: {latency_s: {value: 1e-6, measured: "p"}, bandwidth_Bps: {value: 1e+10, measured: "p"}}
server:
  accumulate_s_per_param: {value: 2e-10, measured: "c"}
  update_s_per_param: {value: 4e-10, measured: "c"}
YAML
}
good_profile >"$work/good.yaml"
good_profile | sed 's/  update_s_per_param:.*//' >"$work/missing.yaml"
good_profile | sed 's/value: 2e-10/value: -2e-10/' >"$work/negative.yaml"
good_profile | sed 's/^name: t/name: t\nspeed: 3/' >"$work/unknown.yaml"
virt=(--virtual --learners 2 --results "$work/prof")
expect_error "profile: missing figure" "missing.yaml: server.update_s_per_param: missing" -- \
  "$asgd" train "${syn[@]}" "${virt[@]}" --profile "$work/missing.yaml"
expect_error "profile: negative figure" "negative.yaml: server.accumulate_s_per_param.value: -2e-10 is negative" -- \
  "$asgd" train "${syn[@]}" "${virt[@]}" --profile "$work/negative.yaml"
expect_error "profile: unknown key" "unknown.yaml: speed: unknown key" -- \
  "$asgd" train "${syn[@]}" "${virt[@]}" --profile "$work/unknown.yaml"
expect_error "profile: no compute time for the model" "good.yaml: compute: no entry for model lenet at batch 16" -- \
  "$asgd" train "${syn[@]}" "${virt[@]}" --model lenet --profile "$work/good.yaml"
expect_error "profile: absent file" "absent.yaml: cannot open profile file" -- \
  "$asgd" train "${syn[@]}" "${virt[@]}" --profile "$work/absent.yaml"
expect_error "profile without --virtual" "--profile is for virtual learners" -- \
  "$asgd" train "${syn[@]}" --profile "$work/good.yaml"
expect_error "profile with --compute-s" "no --compute-s or --comm-s" -- \
  "$asgd" train "${syn[@]}" "${virt[@]}" --profile "$work/good.yaml" --compute-s 0.1
if [[ -e "$work/prof/s/runs/r.h5" ]]; then fail "a refused profile run left a result"; else pass "no result after the refusals"; fi
"$asgd" train "${syn[@]}" "${virt[@]}" --profile "$work/good.yaml" --epochs 0.25 >/dev/null 2>"$work/err" \
  && [[ -e "$work/prof/s/runs/r.h5" ]] && pass "a good profile trains" || fail "a good profile: $(head -c 300 "$work/err")"
rm -rf "$work/prof"
expect_error "calibrate: unknown model" "resnet" -- "$asgd" calibrate --models resnet --out "$work/p.yaml"
expect_error "calibrate: bad batch" "batch" -- "$asgd" calibrate --batch 0 --out "$work/p.yaml"
expect_error "calibrate: unwritable --out" "--out /proc/x/p.yaml: cannot write in /proc/x" -- \
  "$asgd" calibrate --out /proc/x/p.yaml
expect_error "calibrate: --out a folder" "is a folder" -- "$asgd" calibrate --out "$work"
# the wait it measures under, set wrong: said before any measuring, nothing written
expect_error "calibrate: bad ASGD_DOORBELL" "ASGD_DOORBELL='2': want 1" -- \
  env ASGD_DOORBELL=2 "$asgd" calibrate --models mlp --out "$work/p.yaml"
expect_error "calibrate: bad ASGD_WAIT" "ASGD_WAIT='nap'" -- env ASGD_WAIT=nap "$asgd" calibrate --models mlp --out "$work/p.yaml"
[[ -e $work/p.yaml ]] && fail "calibrate wrote $work/p.yaml after a bad environment"
expect_error "ASGD_INJECT_SERVER malformed" "ASGD_INJECT_SERVER='x': want UPDATE_S:BYTE_S" -- \
  env ASGD_INJECT_SERVER=x mpiexec -n 2 "$asgd" train "${syn[@]}" --learners 1 --servers 1

# ------------------------------------------------------------------ suites and the runner
printf 'name: ..\nbase: {model: mlp, dataset: {kind: synthetic}}\n' >"$work/dotdot.yaml"
expect_error "suite file name .." "name '\.\.' is not a name" -- "$asgd" sweep plan "$work/dotdot.yaml" --results "$work/results"
printf 'name: %s\nbase: {model: mlp, dataset: {kind: synthetic}}\n' "$long$long$long$long$long$long$long$long$long$long" >"$work/mbname.yaml"
expect_error "suite name of 1 MB" "is too long \(1000000 characters, at most 128\)" -- "$asgd" sweep plan "$work/mbname.yaml"
expect_error "10^12 runs refused with the count" "make 1000000000000 runs, more than the 1000000" -- \
  "$asgd" sweep plan "$here/../data/bad_suites/31_too_many_runs.yaml"
expect_error "suite is a folder" "is a folder, not a suite file" -- "$asgd" sweep plan "$work"
printf 'name: ok\nbase: {model: mlp, dataset: {kind: synthetic, n_train: 256, n_test: 64}, batch: 16, epochs: 1}\n' >"$work/ok.yaml"
expect_error "sweep run --jobs 0" "--jobs: '0' is not a whole number in \[1," -- "$asgd" sweep run "$work/ok.yaml" --jobs 0 --results "$work/sw"
expect_error "sweep run --jobs -1" "--jobs" -- "$asgd" sweep run "$work/ok.yaml" --jobs -1 --results "$work/sw"
expect_error "sweep run --cores -1" "--cores" -- "$asgd" sweep run "$work/ok.yaml" --cores -1 --results "$work/sw"
expect_error "compare --threshold nan" "--threshold: nan is not a finite number" -- "$asgd" compare "$work" "$work" --threshold nan
expect_error "gpu-bench --batch 0" "--batch: '0' is not a whole number" -- "$asgd" gpu-bench --batch 0

# ------------------------------------------------------------------ a finished run and its checkpoint
res=$work/results/s/runs/r.h5 ck=$work/results/s/checkpoints/r.h5
sum=$(md5sum <"$res")
expect_error "finished run id, another configuration" "runs/r.h5: run r already finished with another configuration" -- \
  "$asgd" train "${syn[@]}" --lr 0.05
[[ $(md5sum <"$res") == "$sum" ]] && pass "the finished result is unchanged" || fail "the finished result changed"
"$asgd" train "${syn[@]}" --threads 2 >"$work/out" 2>&1 && grep -q "already finished" "$work/out" \
  && pass "same configuration, other threads: already finished" || fail "threads made it another run"

expect_error "warm start: missing file" "--warm-start .*nope.h5.: no such file" -- "$asgd" train "${syn[@]}" --run-id w0 --warm-start "$work/nope.h5"
expect_error "warm start: a folder" "--warm-start .*: not a regular file \(a folder" -- "$asgd" train "${syn[@]}" --run-id w1 --warm-start "$work"
expect_error "warm start: a results file" "is an asgd checkpoint, not|not an asgd checkpoint" -- \
  "$asgd" train "${syn[@]}" --run-id w2 --warm-start "$res"
if have_h5py; then
  # a checkpoint whose weights hold NaN (a diverged run's) is no warm start
  cp "$ck" "$work/nan.h5"
  /usr/bin/python3 -c "import h5py, numpy as np, sys; f = h5py.File(sys.argv[1], 'r+'); w = f['weights']; w[5] = np.nan; f.close()" "$work/nan.h5"
  expect_error "warm start: NaN weights" "nan.h5: warm start checkpoint holds a non-finite weight \(NaN at index 5\)" -- \
    "$asgd" train "${syn[@]}" --run-id w3 --warm-start "$work/nan.h5"
  cp "$ck" "$work/inf.h5"
  /usr/bin/python3 -c "import h5py, numpy as np, sys; f = h5py.File(sys.argv[1], 'r+'); w = f['weights']; w[0] = np.inf; f.close()" "$work/inf.h5"
  expect_error "warm start: Inf weights" "inf.h5: warm start checkpoint holds a non-finite weight \(Inf at index 0\)" -- \
    "$asgd" train "${syn[@]}" --run-id w4 --warm-start "$work/inf.h5"
  [[ ! -e $work/results/s/runs/w3.h5 && ! -e $work/results/s/runs/w4.h5 ]] && pass "no result from a NaN warm start" || fail "a NaN warm start left a result"

  # a resume checkpoint of this run id (same configuration) with a wrong weight count
  cp "$ck" "$ck.orig"
  cp "$ck" "$work/results/s/checkpoints/r2.h5"
  /usr/bin/python3 - "$work/results/s/checkpoints/r2.h5" <<'EOF'
import h5py, sys
f = h5py.File(sys.argv[1], "r+")
for name in ("weights", "momentum"):
    data = f[name][:-7]
    del f[name]
    f[name] = data
f.close()
EOF
  sum2=$(md5sum <"$work/results/s/checkpoints/r2.h5")
  expect_error "resume: wrong weight count" "checkpoints/r2.h5: holds [0-9]+ weights, but its one shard should hold all" -- \
    "$asgd" train "${syn[@]}" --run-id r2
  [[ $(md5sum <"$work/results/s/checkpoints/r2.h5") == "$sum2" && ! -e $work/results/s/runs/r2.h5 ]] \
    && pass "the bad checkpoint is untouched, no result" || fail "the bad checkpoint changed or a result appeared"
  /usr/bin/python3 - "$work/results/s/checkpoints/r2.h5" "$ck" <<'EOF'
import h5py, sys
f = h5py.File(sys.argv[1], "r+"); g = h5py.File(sys.argv[2], "r")
for name in ("weights", "momentum"):
    del f[name]; f[name] = g[name][:]
f.attrs["n_params"] = g.attrs["n_params"] - 7      # both agree, the model does not
del f["weights"]; f["weights"] = g["weights"][:-7]
del f["momentum"]; f["momentum"] = g["momentum"][:-7]
f.close()
EOF
  expect_error "resume: n_params of another model" "checkpoints/r2.h5: checkpoint holds [0-9]+ parameters, this run's mlp has" -- \
    "$asgd" train "${syn[@]}" --run-id r2
  # a checkpoint whose clock and epochs lie past the run's end
  cp "$ck" "$work/results/s/checkpoints/r3.h5"
  /usr/bin/python3 -c "import h5py, sys; f = h5py.File(sys.argv[1], 'r+'); f.attrs['clock'] = 62000000000 * 16; f.attrs['epochs'] = 62e9; f.close()" \
    "$work/results/s/checkpoints/r3.h5"
  expect_error "resume: past the run's end" "checkpoints/r3.h5: epochs 6.2e\+10 lies past the run's end" -- \
    "$asgd" train "${syn[@]}" --run-id r3
  cp "$ck" "$work/results/s/checkpoints/r4.h5"
  /usr/bin/python3 -c "import h5py, sys; f = h5py.File(sys.argv[1], 'r+'); f.attrs['clock'] = 5000; f.close()" \
    "$work/results/s/checkpoints/r4.h5"
  expect_error "resume: clock past the run's end" "checkpoints/r4.h5: checkpoint is at update 5000, past the run's end at update 16" -- \
    "$asgd" train "${syn[@]}" --run-id r4
  [[ $(md5sum <"$ck") == $(md5sum <"$ck.orig") ]] && pass "the run's own checkpoint is untouched" || fail "the checkpoint changed"

  # asgd validate checks every attribute against its domain (exit 1, one line per file)
  for case in "status:exploded:status \"exploded\" is not completed" "config:not json:config is not a JSON object" \
              "mode:imaginary:mode \"imaginary\"" "timing_model:[]:timing_model is not a JSON object"; do
    IFS=: read -r attr value want <<<"$case"
    cp "$res" "$work/v.h5"
    /usr/bin/python3 -c "import h5py, sys; f = h5py.File(sys.argv[1], 'r+'); f.attrs[sys.argv[2]] = sys.argv[3]; f.close()" \
      "$work/v.h5" "$attr" "$value"
    "$asgd" validate "$work/v.h5" >"$work/out" 2>&1
    rc=$?
    (( rc == 1 )) && grep -qF "$want" "$work/out" && pass "validate refuses $attr = $value: $(head -1 "$work/out")" \
      || { fail "validate took $attr = $value (rc=$rc)"; cat "$work/out"; }
  done
  cp "$res" "$work/v.h5"
  /usr/bin/python3 -c "import h5py, sys; f = h5py.File(sys.argv[1], 'r+'); f['summary'].attrs['epochs'] = 62e9; f.close()" "$work/v.h5"
  "$asgd" validate "$work/v.h5" >"$work/out" 2>&1
  (( $? == 1 )) && grep -q "epochs 6.2e+10 is beyond the configured run" "$work/out" && pass "validate refuses 62 billion epochs" \
    || { fail "validate took 62 billion epochs"; cat "$work/out"; }
  # a stored configuration naming a model or protocol this asgd does not know
  for kv in "model=resnet" "protocol=hogwild"; do
    cp "$res" "$work/v.h5"
    /usr/bin/python3 -c "import h5py, json, sys; f = h5py.File(sys.argv[1], 'r+'); k, v = sys.argv[2].split('='); c = json.loads(f.attrs['config']); c[k] = v; f.attrs['config'] = json.dumps(c); f.close()" \
      "$work/v.h5" "$kv"
    "$asgd" validate "$work/v.h5" >"$work/out" 2>&1
    (( $? == 1 )) && grep -q "config ${kv%%=*} '${kv#*=}' is not one of" "$work/out" && pass "validate refuses $kv: $(cat "$work/out")" \
      || { fail "validate took a stored $kv"; cat "$work/out"; }
  done
  cp "$res" "$work/v.h5"  # the file's own model attribute, which reports group by
  /usr/bin/python3 -c "import h5py, sys; f = h5py.File(sys.argv[1], 'r+'); f.attrs['model'] = 'resnet'; f.close()" "$work/v.h5"
  "$asgd" validate "$work/v.h5" >"$work/out" 2>&1
  (( $? == 1 )) && grep -q ": model 'resnet' is not one of" "$work/out" && pass "validate refuses the model attribute resnet" \
    || { fail "validate took the model attribute resnet"; cat "$work/out"; }
else
  echo "SKIPPED checkpoint and validate cases: /usr/bin/python3 has no h5py (tools/setup.sh installs it)"
  skipped=$((skipped + 1))
fi
"$asgd" validate "$res" >"$work/out" 2>&1 && pass "validate accepts a good file: $(cat "$work/out")" || fail "validate refused a good file"

# --help states each number's domain and default from the field table, never the type's limits
help=$("$asgd" train --help 2>&1)
for want in "--batch,--mu INT >= 1 (64)" "--momentum NUMBER in [0, 1) (0.9)" "--threads INT in 1..512 (1)" \
            "--n INT in 1..learners (1)"; do
  if grep -qF -- "$want" <<<"$help"; then passed=$((passed + 1)); else echo "FAIL: train --help lacks '$want'"; failures=$((failures + 1)); fi
done
if grep -qE -- "9223372036854775807|2147483647" <<<"$help"; then
  echo "FAIL: train --help shows a type's limits"; failures=$((failures + 1))
fi
echo "$passed passed, $failures failed, $skipped parts skipped"
(( failures == 0 )) || exit 1
# a part that could not run is not a pass: 77 is ctest's "skipped" (SKIP_RETURN_CODE)
(( skipped == 0 )) || exit 77
