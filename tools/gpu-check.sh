#!/usr/bin/env bash
# The GPU check: builds the `cuda` preset, runs the GPU tests (every CUDA layer
# against the CPU path, a short training run against the CPU loss curve), times
# lenet and alexnet training steps on this machine's GPU (samples/s and the
# fraction of the same-run cuBLAS SGEMM rate), and runs a 2-learner MPI job on
# the GPU to show the host staging time GPU A-SGD's n_sync exists for.
#
#   tools/gpu-check.sh                      build + check with the system's packages
#   tools/gpu-check.sh --deps DIR           first unpack the .deb files in DIR
#   tools/gpu-check.sh --fetch-debs DIR     (on a Debian 12 machine with apt) download
#                                           every package the build needs into DIR
#   options: --steps N (timed steps per model, default 50), --build-only
#
# A GPU machine often lacks MPI, HDF5, Kokkos and the rest, and has no package
# manager that reaches Debian. Then, on a Debian 12 machine that has apt:
#     tools/gpu-check.sh --fetch-debs .deps/debs
# bring the checkout (with .deps/debs) to the GPU machine and run
#     tools/gpu-check.sh --deps .deps/debs
# which unpacks each .deb with `dpkg -x` (or `ar` + `tar` where dpkg is
# missing) into .deps/root inside the checkout and points CMake, the compiler
# and the loader there. The CUDA toolkit (nvcc, cuDNN 9, cuBLAS) comes from
# the machine: /usr/local/cuda, or CUDA_HOME.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; }

deps="" fetch="" steps=50 build_only=0
while (( $# )); do
  case "$1" in
    --deps) deps=${2:?--deps DIR}; shift 2 ;;
    --fetch-debs) fetch=${2:?--fetch-debs DIR}; shift 2 ;;
    --steps) steps=${2:?--steps N}; shift 2 ;;
    --build-only) build_only=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu-check.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

if [[ -n $fetch ]]; then
  # The build set and everything it depends on (no recommends), as .deb files.
  mkdir -p "$fetch"
  mapfile -t roots < <(bash tools/setup.sh --list | grep -v -E '^(dataset-fashion-mnist|python3.*)$')
  mapfile -t all < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
                       --no-breaks --no-replaces --no-enhances "${roots[@]}" |
                     grep -E '^[a-z0-9]' | sort -u)
  echo "gpu-check: downloading ${#all[@]} packages into $fetch"
  (cd "$fetch" && apt-get download "${all[@]}" >/dev/null)
  du -sh "$fetch"
  exit 0
fi

if [[ -n $deps ]]; then
  root="$here/.deps/root"
  mkdir -p "$root"
  n=0
  for deb in "$deps"/*.deb; do
    [[ -e $deb ]] || { echo "gpu-check: no .deb files in $deps" >&2; exit 1; }
    if command -v dpkg >/dev/null; then
      dpkg -x "$deb" "$root"
    else
      t=$(mktemp -d) && (cd "$t" && ar x "$(realpath "$deb")" && tar -xf data.tar.* -C "$root") && rm -rf "$t"
    fi
    n=$((n + 1))
  done
  echo "gpu-check: unpacked $n packages into $root"
  arch=x86_64-linux-gnu
  export PATH="$root/usr/bin:$PATH"
  export CMAKE_PREFIX_PATH="$root/usr:$root/usr/lib/$arch/cmake${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export CPATH="$root/usr/include:$root/usr/include/trilinos:$root/usr/include/hdf5/serial:$root/usr/include/$arch/mpich${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$root/usr/lib/$arch:$root/usr/lib/$arch/hdf5/serial${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$root/usr/lib/$arch:$root/usr/lib/$arch/hdf5/serial:$root/usr/lib/$arch/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # MPICH's and HDF5's compiler wrappers hard-code /usr: point them at the copy.
  export MPICH_CC=gcc MPICH_CXX=g++
  extra=(-DMPI_CXX_COMPILER="$root/usr/bin/mpicxx.mpich" -DMPI_C_COMPILER="$root/usr/bin/mpicc.mpich"
         -DHDF5_C_INCLUDE_DIRS="$root/usr/include/hdf5/serial"
         -DHDF5_C_LIBRARIES="$root/usr/lib/$arch/hdf5/serial/libhdf5.so")
else
  extra=()
fi

cuda=${CUDA_HOME:-/usr/local/cuda}
[[ -x $cuda/bin/nvcc ]] || { echo "gpu-check: no nvcc in $cuda/bin (set CUDA_HOME)" >&2; exit 1; }
archs=""
if command -v nvidia-smi >/dev/null && cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1); then
  archs=${cap//./}
  echo "gpu-check: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1), sm_$archs"
fi
cmake --preset cuda -DCMAKE_CUDA_COMPILER="$cuda/bin/nvcc" ${archs:+-DCMAKE_CUDA_ARCHITECTURES="$archs"} \
  "${extra[@]}" >/dev/null
cmake --build build/cuda --target asgd test_gpu -j "$(nproc)"
echo "gpu-check: build/cuda built"
(( build_only )) && exit 0

asgd=build/cuda/asgd
"$asgd" info
echo "== GPU tests (CUDA layers vs the CPU path) =="
rc=0
build/cuda/tests/test_gpu || rc=$?
if (( rc == 77 )); then
  echo "gpu-check: no GPU here: the tests were skipped, nothing was timed"
  exit 0
elif (( rc != 0 )); then
  echo "gpu-check: GPU tests FAILED (exit $rc)"
  exit "$rc"
fi

echo "== training-step throughput =="
"$asgd" gpu-bench --models lenet alexnet --batch 64 --steps "$steps"

echo "== lenet on Fashion-MNIST, one GPU learner, 1 epoch =="
data=()
[[ -d /usr/share/datasets/fashion-mnist ]] || data=(--dataset synthetic --synthetic-size 28 --synthetic-channels 1)
out=$(mktemp -d)
"$asgd" train --device cuda --model lenet "${data[@]}" --epochs 1 --results "$out" --suite gpu-check \
  --progress-every 5

if command -v mpiexec >/dev/null; then
  echo "== 2 GPU learners, nsync n_sync=4: staging time per learner =="
  mpiexec -n 3 "$asgd" train --device cuda --model lenet "${data[@]}" --learners 2 --protocol nsync \
    --n-sync 4 --max-steps 400 --results "$out" --suite gpu-check-mpi -q
  /usr/bin/python3 - "$out" <<'EOF' || echo "(h5py missing: h5dump the file under $out for /learners)"
import glob, sys, h5py
for f in glob.glob(sys.argv[1] + "/gpu-check-mpi/runs/*.h5"):
    with h5py.File(f) as h:
        L = h["learners"]
        for i in range(len(L["learner"])):
            print(f"learner {L['learner'][i]}: compute {L['compute_s'][i]:.2f}s  stage {L['stage_s'][i]:.2f}s  "
                  f"push {L['push_s'][i]:.2f}s  pull {L['pull_s'][i]:.2f}s  gradients {L['gradients'][i]}")
EOF
fi
rm -rf "$out"
echo "gpu-check: done"
