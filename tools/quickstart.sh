#!/usr/bin/env bash
# The main job: installs what is needed, builds the release preset and trains
# lenet on Fashion-MNIST for one epoch, ending with its result summary.
# Results: results/quickstart/runs/*.h5 (see results/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
cmake --preset default
cmake --build --preset default -j "$(nproc)"
export OPENBLAS_NUM_THREADS=1
build/default/asgd train --model lenet --dataset fashion-mnist --epochs 1 --eval-every 0.5 \
  --suite quickstart --results results "$@"
