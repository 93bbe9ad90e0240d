#!/usr/bin/env bash
# Installs every Debian 12 package asgd-bench needs (as root: apt-get).
#   tools/setup.sh            build, run and test (compiler, CMake, Kokkos, BLAS, MPI, HDF5, ...;
#                             clang and libFuzzer's runtime for the fuzz preset)
#   tools/setup.sh --peers    also the PyTorch peer baseline (python3-torch, about 270 packages)
#   tools/setup.sh --slurm    also a one-node Slurm (slurm-wlm, munge) for the Slurm tests
#   tools/setup.sh --list     print the package names (build and test set) and exit
set -euo pipefail

usage() { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; }

peers=0 slurm=0 list=0
for arg in "$@"; do
  case "$arg" in
    --list) list=1 ;;
    --peers) peers=1 ;;
    --slurm) slurm=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "setup.sh: unknown option '$arg'" >&2; usage >&2; exit 2 ;;
  esac
done

packages=(
  g++ cmake ninja-build pkg-config git
  clang libclang-rt-14-dev
  libtrilinos-kokkos-dev libtrilinos-kokkos-kernels-dev libopenblas-dev
  mpich libmpich-dev
  libhdf5-dev hdf5-tools zlib1g-dev
  libyaml-cpp-dev libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev
  libgtest-dev libbenchmark-dev
  dataset-fashion-mnist
  python3 python3-h5py python3-matplotlib python3-numpy
)
(( peers )) && packages+=(python3-torch)
(( slurm )) && packages+=(slurm-wlm munge)
if (( list )); then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if (( ${#missing[@]} == 0 )); then
  echo "setup.sh: all ${#packages[@]} packages already installed"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "setup.sh: need root to install: ${missing[*]}" >&2
  exit 1
fi
echo "setup.sh: installing ${#missing[@]} packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
