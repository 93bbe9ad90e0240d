#!/usr/bin/env bash
# The main job: installs what is needed, builds the release preset and runs the
# quickstart suite here (lenet on real Fashion-MNIST: 1 learner against 2
# learners with hardsync, 2-softsync and nsync; a few minutes on 2 cores),
# ending with its report. Results: results/quickstart/ (runs/*.h5, report/).
#   tools/quickstart.sh [asgd sweep run options, e.g. --jobs 2]
set -euo pipefail
cd "$(dirname "$0")/.."
case ${1:-} in
  -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
tools/setup.sh
cmake --preset default
cmake --build --preset default -j "$(nproc)"
export OPENBLAS_NUM_THREADS=1
build/default/asgd sweep run suites/quickstart.yaml --results results "$@"
