#!/usr/bin/env bash
# Installs what is needed, builds with warnings as errors and runs every test
# (unit, MPI, virtual learners, command line, a real one-node Slurm); then builds the AddressSanitizer preset and runs
# the unit tests under it. This is what CI runs (.ci/run).
#   tools/test.sh            all of it
#   tools/test.sh --no-asan  skip the sanitizer build
set -euo pipefail
cd "$(dirname "$0")/.."

asan=1
for arg in "$@"; do
  case "$arg" in
    --no-asan) asan=0 ;;
    -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test.sh: unknown option '$arg'" >&2; exit 2 ;;
  esac
done

tools/setup.sh --slurm
jobs=$(nproc)
export OPENBLAS_NUM_THREADS=1

echo "== ci preset: build (warnings are errors) and all tests"
cmake --preset ci
cmake --build --preset ci -j "$jobs"
ctest --preset ci -j "$jobs"

if (( asan )); then
  echo "== asan preset: unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
  cmake --preset asan
  cmake --build --preset asan -j "$jobs"
  ctest --preset asan -j "$jobs"
fi
echo "test.sh: all tests passed"
