#!/usr/bin/env bash
# A truncated and a corrupt (bad magic) copy of Debian's Fashion-MNIST
# (dataset-fashion-mnist, /usr/share/datasets/fashion-mnist) are refused with
# one line naming the file and the byte, exit 2, and no result. Without the
# data set this test cannot run: it says so and exits 77, which ctest counts
# as skipped (never as passed).
#   usage: bad_dataset.sh ASGD_BINARY
set -uo pipefail
asgd=${1:?usage: bad_dataset.sh ASGD_BINARY}
src=/usr/share/datasets/fashion-mnist
files=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
for f in "${files[@]}"; do
  if [[ ! -f $src/$f.gz ]]; then
    echo "SKIPPED: $src/$f.gz not present (apt-get install dataset-fashion-mnist, or tools/setup.sh)"
    exit 77
  fi
done
source "$(cd "$(dirname "$0")" && pwd)/expect_lib.sh"

mkdir -p "$work/fm"
for f in "${files[@]}"; do zcat "$src/$f.gz" >"$work/fm/$f" || { echo "FAIL: cannot unpack $src/$f.gz"; exit 1; }; done
run=(train --model lenet --dataset fashion-mnist --data-dir "$work/fm" -q --results "$work/results")

# the training images cut after 100000 bytes (the header and 99984 bytes of pixels)
head -c 100000 "$work/fm/train-images-idx3-ubyte" >"$work/cut" && mv "$work/cut" "$work/fm/train-images-idx3-ubyte"
expect_error "truncated dataset" \
  "train-images-idx3-ubyte: byte 16: truncated: expected 47040000 bytes of image data, got 99984" -- "$asgd" "${run[@]}"
zcat "$src/train-images-idx3-ubyte.gz" >"$work/fm/train-images-idx3-ubyte"

# the test labels with their magic number overwritten
printf 'garbage!' | dd of="$work/fm/t10k-labels-idx1-ubyte" bs=1 seek=0 conv=notrunc status=none
expect_error "bad magic" "t10k-labels-idx1-ubyte: byte 0: bad magic" -- "$asgd" "${run[@]}"

if [[ -n $(ls "$work/results/adhoc/runs" 2>/dev/null) ]]; then
  echo "FAIL: a refused data set left a result"; failures=$((failures + 1))
fi
echo "$passed passed, $failures failed"
(( failures == 0 ))
