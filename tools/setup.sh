#!/usr/bin/env bash
# Installs every Debian 12 package asgd-bench needs (as root: apt-get).
#   tools/setup.sh            build, run and test (compiler, CMake, Kokkos, BLAS, MPI, HDF5, ...;
#                             clang and libFuzzer's runtime for the fuzz preset)
#   tools/setup.sh --peers    also the PyTorch peer baseline (python3-torch, about 270 packages)
#   tools/setup.sh --slurm    also a one-node Slurm (slurm-wlm, munge) for the Slurm tests
#   tools/setup.sh --cluster  also Open MPI (the emulated cluster's MPI: tools/cluster.sh, the
#                             `ompi` preset); MPICH stays the default mpicc/mpiexec
#   tools/setup.sh --kokkos-openmp   also build Kokkos + KokkosKernels with the OpenMP backend
#                             from Debian's own `trilinos` source package (apt-get source), once
#                             into a cache outside the clone (ASGD_CACHE, default
#                             /var/cache/asgd-bench; rebuilt when absent or when trilinos, this
#                             recipe or the compiler change; about 8 min on 2 cores), linked from
#                             .deps/kokkos-openmp/install; the `openmp` preset uses it
#   tools/setup.sh --list     print the package names (build and test set) and exit
set -euo pipefail

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; }

peers=0 slurm=0 cluster=0 list=0 kokkos_openmp=0
for arg in "$@"; do
  case "$arg" in
    --list) list=1 ;;
    --peers) peers=1 ;;
    --slurm) slurm=1 ;;
    --cluster) cluster=1 ;;
    --kokkos-openmp) kokkos_openmp=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "setup.sh: unknown option '$arg'" >&2; usage >&2; exit 2 ;;
  esac
done

packages=(
  g++ cmake ninja-build pkg-config git ccache
  clang libclang-rt-14-dev
  libtrilinos-kokkos-dev libtrilinos-kokkos-kernels-dev libopenblas-dev
  mpich libmpich-dev
  libhdf5-dev hdf5-tools zlib1g-dev
  libyaml-cpp-dev libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev
  libgtest-dev libbenchmark-dev libboost-math-dev
  dataset-fashion-mnist
  python3 python3-h5py python3-matplotlib python3-numpy python3-scipy
)
(( peers )) && packages+=(python3-torch)
(( slurm )) && packages+=(slurm-wlm munge)
(( cluster )) && packages+=(openmpi-bin libopenmpi-dev iproute2 util-linux)
# apt-get source needs dpkg-dev (dpkg-source, which checks the .dsc).
(( kokkos_openmp )) && packages+=(dpkg-dev)
if (( list )); then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

# Kokkos 3.4 + KokkosKernels (the versions in Debian's Trilinos 13.2) with the OpenMP backend,
# built from Debian's trilinos source package: only packages/kokkos and packages/kokkos-kernels
# of it, each with its own CMake, Debian's patches that touch them applied.
# The build lives in a cache outside the clone (ASGD_CACHE, default /var/cache/asgd-bench, or
# .deps/ in the clone where that cannot be written), in a folder named by a key of what decides
# it: Debian's trilinos version, this recipe and the compiler. Another key (a new trilinos, a
# changed recipe) builds afresh; the clone's .deps/kokkos-openmp/install links to the build.
build_kokkos_openmp() {
  local clone cache key root prefix jobs=${ASGD_KOKKOS_JOBS:-2}
  clone=$(cd "$(dirname "$0")/.." && pwd)
  cache=${ASGD_CACHE:-/var/cache/asgd-bench}
  mkdir -p "$cache" 2>/dev/null && [[ -w $cache ]] || cache=$clone/.deps/cache
  key=$( { dpkg-query -W -f='${Version}' libtrilinos-kokkos-dev; declare -f build_kokkos_openmp;
           c++ --version | head -1; cmake --version | head -1; } | sha256sum | cut -c1-12)
  root=$cache/kokkos-openmp-$key
  prefix=$root/install
  mkdir -p "$clone/.deps/kokkos-openmp"
  if [[ -f $prefix/.complete ]]; then
    rm -rf "$clone/.deps/kokkos-openmp/install"
    ln -sfn "$prefix" "$clone/.deps/kokkos-openmp/install"
    echo "setup.sh: Kokkos (OpenMP) already built in $prefix (cache key $key)"
    return 0
  fi
  rm -rf "$clone/.deps/kokkos-openmp/install"
  mkdir -p "$cache/src" "$root"
  cd "$cache/src"
  if ! ls trilinos_*.dsc >/dev/null 2>&1; then
    # No deb-src entry yet: add the one matching this system's release (Debian's archive).
    if ! apt-get source --print-uris -qq trilinos >/dev/null 2>&1; then
      [[ $(id -u) -eq 0 ]] || { echo "setup.sh: need root to add the deb-src entry for trilinos" >&2; return 1; }
      local codename
      codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
      cat >/etc/apt/sources.list.d/asgd-deb-src.sources <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $codename $codename-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
      apt-get update -qq
    fi
    # Download only (apt checks the files against the archive's signed Sources index);
    # dpkg-source would unpack all of Trilinos, of which two packages are built.
    apt-get source --download-only -qq trilinos
  fi
  local dsc orig debian_tar ver
  dsc=$(ls trilinos_*.dsc | head -1)
  ver=${dsc#trilinos_}; ver=${ver%.dsc}
  orig=$(ls trilinos_"${ver%-*}".orig.tar.* | head -1)
  debian_tar=$(ls trilinos_"$ver".debian.tar.* | head -1)
  orig=$PWD/$orig debian_tar=$PWD/$debian_tar
  cd "$root"
  if [[ ! -d tree/packages/kokkos-kernels ]]; then
    echo "setup.sh: unpacking packages/kokkos and packages/kokkos-kernels of $orig"
    rm -rf tree && mkdir tree
    tar -xf "$orig" -C tree --strip-components=1 --wildcards '*/packages/kokkos/*' '*/packages/kokkos-kernels/*'
    tar -xf "$debian_tar" -C tree
    # Debian's patches that touch these two packages, in series order.
    if [[ -f tree/debian/patches/series ]]; then
      local patch
      while read -r patch _; do
        [[ -z $patch || $patch == \#* ]] && continue
        if grep -qE '^\+\+\+ [^/]*/packages/kokkos(-kernels)?/' "tree/debian/patches/$patch"; then
          echo "setup.sh: applying Debian patch $patch"
          patch -d tree -p1 -s --no-backup-if-mismatch <"tree/debian/patches/$patch"
        fi
      done <tree/debian/patches/series
    fi
  fi
  local common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix"
                -DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=ON -DCMAKE_INSTALL_LIBDIR=lib)
  echo "setup.sh: building Kokkos (OpenMP) with -j$jobs"
  cmake -S tree/packages/kokkos -B build-kokkos "${common[@]}" \
        -DKokkos_ENABLE_OPENMP=ON -DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_TESTS=OFF \
        -DKokkos_ENABLE_EXAMPLES=OFF >/dev/null
  cmake --build build-kokkos -j "$jobs"
  cmake --install build-kokkos >/dev/null
  # No explicit instantiations (ETI): asgd uses float views in LayoutRight, which no ETI
  # set covers (they are instantiated from the headers; GEMM goes to the BLAS), and the
  # sparse ETI files alone take most of the build.
  echo "setup.sh: building KokkosKernels (OpenMP, system BLAS) with -j$jobs"
  cmake -S tree/packages/kokkos-kernels -B build-kernels "${common[@]}" \
        -DKokkos_ROOT="$prefix" -DKokkosKernels_ENABLE_TPL_BLAS=ON \
        -DKokkosKernels_INST_DOUBLE=OFF -DKokkosKernels_INST_FLOAT=OFF \
        -DKokkosKernels_INST_LAYOUTLEFT=OFF -DKokkosKernels_INST_LAYOUTRIGHT=OFF \
        -DKokkosKernels_INST_OFFSET_SIZE_T=OFF -DKokkosKernels_INST_OFFSET_INT=OFF \
        -DKokkosKernels_INST_ORDINAL_INT=OFF \
        -DKokkosKernels_ENABLE_TESTS=OFF -DKokkosKernels_ENABLE_EXAMPLES=OFF >/dev/null
  cmake --build build-kernels -j "$jobs"
  cmake --install build-kernels >/dev/null
  echo "$dsc" >"$prefix/.complete"
  ln -sfn "$prefix" "$clone/.deps/kokkos-openmp/install"
  echo "setup.sh: Kokkos + KokkosKernels (OpenMP) installed in $prefix (cache key $key)"
}

# Open MPI's alternatives outrank MPICH's (50 against 40): mpicc, mpiexec and the build stay
# on MPICH; the cluster calls mpirun.openmpi and mpicxx.openmpi by name.
pin_mpich() {
  (( cluster )) || return 0
  [[ $(update-alternatives --query mpi | sed -n 's/^Value: //p') == /usr/bin/mpicc.mpich &&
     $(update-alternatives --query mpirun | sed -n 's/^Value: //p') == /usr/bin/mpirun.mpich ]] && return 0
  [[ $(id -u) -eq 0 ]] || { echo "setup.sh: need root to keep MPICH the default MPI" >&2; exit 1; }
  update-alternatives --quiet --set mpi /usr/bin/mpicc.mpich
  update-alternatives --quiet --set mpirun /usr/bin/mpirun.mpich
}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if (( ${#missing[@]} == 0 )); then
  echo "setup.sh: all ${#packages[@]} packages already installed"
  pin_mpich
  if (( kokkos_openmp )); then build_kokkos_openmp; fi
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
pin_mpich
(( kokkos_openmp )) && build_kokkos_openmp
exit 0
