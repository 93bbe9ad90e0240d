#!/usr/bin/env bash
# Every bad input gets ONE clear line on stderr and a non-zero exit, and no
# earlier result is touched.   usage: bad_inputs.sh ASGD_BINARY
set -uo pipefail
asgd=${1:?usage: bad_inputs.sh ASGD_BINARY}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0 passed=0

# expect_error NAME PATTERN -- COMMAND...: non-zero exit, one stderr line matching PATTERN
expect_error() {
  local name=$1 pattern=$2
  shift 3
  "$@" >"$work/out" 2>"$work/err"
  local rc=$? lines
  lines=$(wc -l <"$work/err")
  if (( rc == 0 )) || (( lines != 1 )) || ! grep -qE -- "$pattern" "$work/err"; then
    echo "FAIL $name: rc=$rc, $lines stderr lines, want /$pattern/:"; cat "$work/err"
    failures=$((failures + 1))
  else
    echo "ok   $name: $(cat "$work/err")"
    passed=$((passed + 1))
  fi
}

syn=(--model mlp --dataset synthetic --synthetic-size 8 --synthetic-classes 4 --synthetic-train 256
     --synthetic-test 64 --batch 16 --epochs 1 -q --results "$work/results" --suite s --run-id r)

expect_error "all config problems at once" "batch 0.*lr -1|lr -1.*batch 0" -- \
  "$asgd" train "${syn[@]}" --batch 0 --lr -1
expect_error "unknown model" "model 'resnet' unknown" -- "$asgd" train "${syn[@]}" --model resnet
expect_error "n > learners" "softsync n 3 must be in 1..learners \(2\)" -- \
  "$asgd" train "${syn[@]}" --learners 2 --protocol softsync --n 3
expect_error "n_sync < 1" "n_sync 0" -- "$asgd" train "${syn[@]}" --protocol nsync --n-sync 0
expect_error "unknown device" "device 'tpu' unknown \(cpu, cuda\)" -- "$asgd" train "${syn[@]}" --device tpu
expect_error "virtual learners on a GPU" "virtual learners run on the CPU" -- \
  "$asgd" train "${syn[@]}" --device cuda --virtual --learners 2
# No GPU here: a CPU-only build says how to build with CUDA; a CUDA build says no device is visible.
expect_error "--device cuda without a GPU" "built without CUDA|no CUDA device visible" -- \
  "$asgd" train "${syn[@]}" --device cuda
expect_error "unwritable results folder" "cannot create results folder /proc/" -- \
  "$asgd" train "${syn[@]}" --results /proc/asgd-results

# a truncated Fashion-MNIST image file
mkdir -p "$work/fm"
src=/usr/share/datasets/fashion-mnist
if [[ -f $src/train-images-idx3-ubyte.gz ]]; then
  zcat "$src/train-images-idx3-ubyte.gz" | head -c 100000 >"$work/fm/train-images-idx3-ubyte"
  zcat "$src/train-labels-idx1-ubyte.gz" >"$work/fm/train-labels-idx1-ubyte"
  zcat "$src/t10k-images-idx3-ubyte.gz" >"$work/fm/t10k-images-idx3-ubyte"
  zcat "$src/t10k-labels-idx1-ubyte.gz" >"$work/fm/t10k-labels-idx1-ubyte"
  expect_error "truncated dataset" "train-images-idx3-ubyte: byte 16: truncated" -- \
    "$asgd" train --model lenet --dataset fashion-mnist --data-dir "$work/fm" -q --results "$work/results"
  printf 'garbage!' | dd of="$work/fm/t10k-labels-idx1-ubyte" bs=1 seek=0 conv=notrunc status=none
  zcat "$src/train-images-idx3-ubyte.gz" >"$work/fm/train-images-idx3-ubyte"
  expect_error "bad magic" "t10k-labels-idx1-ubyte: byte 0: bad magic" -- \
    "$asgd" train --model lenet --dataset fashion-mnist --data-dir "$work/fm" -q --results "$work/results"
fi
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

echo "$passed passed, $failures failed"
(( failures == 0 ))
