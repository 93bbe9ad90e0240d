#!/usr/bin/env bash
# Installs what is needed; compiles the `cuda` preset (the native CUDA path, warnings as
# errors; its GPU tests run where a GPU is, and show as skipped elsewhere); builds the
# AddressSanitizer preset and runs the unit tests under it; builds the `fuzz` preset and runs
# each fuzz target of the file readers for 30 s, two at a time (tools/fuzz.sh); builds Kokkos + KokkosKernels
# with the OpenMP backend from Debian's trilinos source (once, into a cache outside the clone,
# keyed by what decides the build), the `openmp` preset on it, and runs every unit, MPI and virtual-learner test with 2 threads per
# rank and the kernel tests also with 1; then builds the `ci` preset with warnings as errors and
# runs every test (unit, MPI, virtual learners, command line, a real one-node Slurm, and, as root,
# the emulated multi-node cluster with the `ompi` preset's asgd). This is what CI runs.
# Every compilation goes through ccache, its cache outside the clone (ASGD_CACHE, default
# /var/cache/asgd-bench, one cache per CPU model and flags: the builds use -march=native),
# so a second run on the same machine recompiles only what changed.
#   tools/test.sh              all of it
#   tools/test.sh --no-asan    skip the sanitizer build
#   tools/test.sh --no-cuda    skip the cuda preset
#   tools/test.sh --no-fuzz    skip the fuzz targets
#   tools/test.sh --no-openmp  skip the OpenMP backend (Kokkos build, openmp preset, its tests)
set -euo pipefail
cd "$(dirname "$0")/.."

asan=1 cuda=1 fuzz=1 openmp=1
for arg in "$@"; do
  case "$arg" in
    --no-asan) asan=0 ;;
    --no-cuda) cuda=0 ;;
    --no-fuzz) fuzz=0 ;;
    --no-openmp) openmp=0 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test.sh: unknown option '$arg'" >&2; exit 2 ;;
  esac
done

tools/setup.sh --slurm --cluster
jobs=$(nproc)
export OPENBLAS_NUM_THREADS=1
# --threads 1 defers to OMP_NUM_THREADS on every build: the tests set their own
# thread counts (the openmp preset: 2), none inherited from the calling shell.
unset OMP_NUM_THREADS OMP_THREAD_LIMIT OMP_DYNAMIC OMP_MAX_ACTIVE_LEVELS

# The compiler cache. ccache does not look behind -march=native, so an object
# made on one CPU could be served to another: the cache is keyed by the CPU.
cache=${ASGD_CACHE:-/var/cache/asgd-bench}
if command -v ccache >/dev/null && mkdir -p "$cache" 2>/dev/null && [[ -w $cache ]]; then
  cpu=$(grep -m2 -E '^(model name|flags)' /proc/cpuinfo | sha1sum | cut -c1-12)
  # BASEDIR and NOHASHDIR: clones in other folders share the cache
  export CCACHE_DIR=$cache/ccache-$cpu CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=4G
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
  ccache --zero-stats >/dev/null
  echo "test.sh: compiler cache $CCACHE_DIR"
fi

if (( asan )); then
  echo "== asan preset: unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
  cmake --preset asan
  cmake --build --preset asan -j "$jobs"
  ctest --preset asan -j "$jobs"
fi
if (( cuda )); then
  nvcc=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
  if [[ -x $nvcc ]]; then
    echo "== cuda preset: compile the CUDA path (warnings are errors); GPU tests (skipped without a GPU)"
    cmake --preset cuda -DCMAKE_CUDA_COMPILER="$nvcc"
    cmake --build --preset cuda -j "$jobs" --target asgd test_gpu
    ctest --preset cuda
  else
    echo "test.sh: NOTE: no CUDA toolkit at $nvcc: the cuda preset was not compiled" >&2
  fi
fi
if (( fuzz )); then
  echo "== fuzz preset: every fuzz target of the file readers for 30 s, two at a time (clang, libFuzzer, ASan + UBSan)"
  ASGD_BUILD_JOBS=$jobs tools/fuzz.sh -j "$jobs" 30
fi
if (( openmp )); then
  echo "== openmp preset: Kokkos' OpenMP backend; unit, MPI, virtual-learner tests with 2 threads"
  tools/setup.sh --kokkos-openmp   # about 8 min on 2 cores the first time, then reused
  cmake --preset openmp
  cmake --build --preset openmp -j "$jobs"
  ctest --preset openmp -j "$jobs"   # OMP_NUM_THREADS=2 (CMakePresets.json)
  # the bad inputs of an OpenMP build (OMP_NUM_THREADS, --threads beyond Kokkos' pool)
  ctest --test-dir build/openmp -R '^cli\.review_inputs$' --output-on-failure
  # The 1-thread run writes a digest of every kernel output, the 2-thread run must match it.
  digest=build/openmp/kernel-threads.digest
  rm -f "$digest"
  for t in 1 2; do
    echo "== openmp preset: kernel tests with OMP_NUM_THREADS=$t"
    for k in test_kernels test_kernel_threads; do
      ASGD_THREADS_DIGEST=$digest OMP_NUM_THREADS=$t OMP_PROC_BIND=false OMP_WAIT_POLICY=passive \
        build/openmp/tests/$k --gtest_brief=1
    done
  done
fi
# The full suite runs last, so that its summary (every label, the count of tests
# passed) is what the log ends with.
echo "== ompi preset: asgd against Open MPI, the emulated cluster's MPI (the cluster tests run it)"
cmake --preset ompi
cmake --build --preset ompi -j "$jobs"
echo "== ci preset: build (warnings are errors) and all tests"
cmake --preset ci
cmake --build --preset ci -j "$jobs"
ctest --preset ci -j "$jobs"
if [[ -n ${CCACHE_DIR:-} ]]; then ccache --show-stats | grep -E '^ *(Hits|Misses)' | sed 's/^ */test.sh: ccache /' || true; fi
echo "test.sh: all tests passed"
