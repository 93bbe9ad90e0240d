#!/usr/bin/env bash
# The GPU check: builds the `cuda` preset's asgd and test_gpu, runs the GPU tests (every CUDA
# layer against the CPU path, a short training run against the CPU loss curve), times lenet,
# cifar10-18pct and alexnet training steps on this machine's GPU (samples/s and the fraction of
# the same-run cuBLAS SGEMM rate), trains lenet for one epoch on one GPU learner, and runs a
# 2-learner nsync MPI job on the GPU at n_sync 1 and 100 to show the share of each learner's
# cycle that host staging takes, the time GPU A-SGD's n_sync exists for.
#
#   tools/gpu-check.sh [options]              build + check with the system's packages
#   tools/gpu-check.sh --deps DIR [options]   the same with the packages in DIR (below)
#   tools/gpu-check.sh --fetch-debs DIR       (on a Debian 12 machine with apt) download the
#                                             package set below into DIR
#   options:
#     --out DIR          also write the full log (gpu-check.log), the step table (summary.txt)
#                        and the figures (gpu-bench.txt, test_gpu.xml, staging.txt and
#                        staging.csv: each learner's stage_s, its share of compute_s +
#                        stage_s + push_s + pull_s, and the rest of /learners) into DIR
#     --steps N          timed steps per model in gpu-bench (default 50)
#     --deadline S       stop measuring S seconds after the start: each step's time limit is
#                        cut to what is left, and steps that no longer fit are skipped
#     --build-dir DIR    build folder (default build/cuda)
#     --no-werror        build without -Werror (a host compiler newer than the project's own)
#     --configure-only, --build-only
#     --profile          after gpu-bench: lenet and cifar10-18pct at batch 256 and 1024, and each
#                        kernel's GPU time over 3 lenet steps from Nsight Compute (ncu, where
#                        present) into profile.txt
#     --with-dataset     (with --fetch-debs) also Fashion-MNIST (31 MB); else synthetic data
#     -- ARGS...         more arguments for the CMake configure step
#
# A failed measurement step is recorded and the next one runs; only a build in which neither
# asgd nor test_gpu was built stops the check. Each step's exit status and time are printed at
# the end (and into summary.txt).
#
# A GPU machine often lacks MPI, HDF5, Kokkos and the rest, and has no package manager that
# reaches Debian. Then, on a Debian 12 machine that has apt:
#     tools/gpu-check.sh --fetch-debs .deps/debs
# which downloads the packages of deb_set below: what CMake needs to configure, compile and
# link asgd and test_gpu and what they, mpiexec and their libraries load at run time, without
# the C/C++ runtime (libc, libstdc++, libgcc), which the machine's compiler brings. Large
# development packages are cut to the files the build reads (as NAME_VERSION_cut.tar.gz).
# Bring the checkout (with .deps/debs) to the GPU machine and run
#     tools/gpu-check.sh --deps .deps/debs
# which unpacks each .deb (`dpkg-deb -x`, or `ar` + `tar` where dpkg is missing) and each cut
# .tar.gz into .deps/root inside the checkout, points the Debian files that name /usr at that
# folder, hands CMake the packages from there and runs the programs with .deps/root's
# libraries (LD_LIBRARY_PATH, for the check's own commands only). The CUDA toolkit (nvcc,
# cuDNN 9, cuBLAS) comes from the machine: /usr/local/cuda or CUDA_HOME; cuDNN from there or
# from Python's nvidia-cudnn package. MPI runs on one node: hydra starts the ranks by fork,
# UCX uses shared memory (HYDRA_LAUNCHER and UCX_TLS, where not set already).
set -uo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
usage() { sed -n '2,49p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "gpu-check: $*" >&2; exit 1; }

# The Debian 12 packages a --deps build needs, and only those: one package name (or several)
# a line, or `NAME: PATH...` to keep only those paths (shell patterns) of package NAME;
# `%boost-includes` stands for the Boost headers that the sources' #include <boost/...>
# lines reach (found with the machine's g++), with Boost's CMake files.
deb_set() {
  cat <<'EOF'
# Kokkos and KokkosKernels (Trilinos 13.2, Serial backend) and the BLAS and LAPACK they link
libtrilinos-kokkos-dev libtrilinos-kokkos-13.2
libtrilinos-kokkos-kernels-dev libtrilinos-kokkos-kernels-13.2
libopenblas0-pthread libgfortran5 libquadmath0
# HDF5 (the serial C library) and what it loads: libaec, libcurl with its TLS, Kerberos, LDAP, SSH
libhdf5-dev: usr/include/hdf5/serial/*.h usr/lib/x86_64-linux-gnu/hdf5/serial/include usr/lib/x86_64-linux-gnu/hdf5/serial/libhdf5.so usr/lib/x86_64-linux-gnu/libhdf5_serial.so
libhdf5-103-1 libaec0 libsz2 zlib1g zlib1g-dev
libcurl4 libbrotli1 libcom-err2 libffi8 libgmp10 libgnutls30 libgssapi-krb5-2 libhogweed6
libidn2-0 libk5crypto3 libkeyutils1 libkrb5-3 libkrb5support0 libldap-2.5-0 libnettle8
libnghttp2-14 libp11-kit0 libpsl5 librtmp1 libsasl2-2 libsasl2-modules-db libssh2-1 libssl3
libtasn1-6 libunistring2 libzstd1
# MPICH: compiler wrappers and mpiexec (hydra), the library, UCX and hwloc under it
mpich libmpich12 libhwloc15 libudev1 libslurm38 libucx0 libnuma1
libmpich-dev: usr/include/x86_64-linux-gnu/mpich/*.h usr/lib/x86_64-linux-gnu/libmpich.so usr/lib/x86_64-linux-gnu/libmpichcxx.so
# yaml-cpp, fmt, spdlog, nlohmann-json, CLI11, GoogleTest (static), Boost.Math (headers only)
libyaml-cpp-dev libyaml-cpp0.7 libfmt-dev libfmt9 libspdlog-dev libspdlog1.10
nlohmann-json3-dev libcli11-dev libgtest-dev
libboost1.74-dev: %boost-includes
EOF
}

deps="" fetch="" out="" steps=50 deadline=0 build_dir=build/cuda werror=1 with_dataset=0
configure_only=0 build_only=0 profile=0 cmake_args=()
while (( $# )); do
  case "$1" in
    --deps) deps=${2:?--deps DIR}; shift 2 ;;
    --fetch-debs) fetch=${2:?--fetch-debs DIR}; shift 2 ;;
    --with-dataset) with_dataset=1; shift ;;
    --out) out=${2:?--out DIR}; shift 2 ;;
    --steps) steps=${2:?--steps N}; shift 2 ;;
    --deadline) deadline=${2:?--deadline S}; shift 2 ;;
    --build-dir) build_dir=${2:?--build-dir DIR}; shift 2 ;;
    --no-werror) werror=0; shift ;;
    --configure-only) configure_only=1; shift ;;
    --build-only) build_only=1; shift ;;
    --profile) profile=1; shift ;;
    --) shift; cmake_args=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu-check.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

# --- --fetch-debs: download the package set -------------------------------------------------

# The Boost headers (paths under the unpacked package X) that the sources' Boost includes
# reach, with a margin of whole folders whose choice of files depends on the compiler.
boost_includes() {
  local x=$1 probe
  probe=$(mktemp --suffix=.cpp)
  grep -rhoE '^#include <boost/[^>]+>' src tests | sort -u >"$probe"
  [[ -s $probe ]] || { rm -f "$probe"; return 0; }
  (cd "$x" && ls -d usr/include/boost/{config,predef,detail,type_traits} \
     usr/lib/x86_64-linux-gnu/cmake/{Boost,boost_headers,BoostDetectToolset}-* 2>/dev/null)
  g++ -std=c++20 -M -MT probe -I "$x/usr/include" "$probe" | tr -s ' \\' '\n\n' |
    sed -n "s|^$x/\(usr/include/boost/.*\)|\1|p"
  local rc=${PIPESTATUS[0]}
  rm -f "$probe"
  return "$rc"
}

if [[ -n $fetch ]]; then
  command -v apt-get >/dev/null || die "--fetch-debs needs apt-get (a Debian 12 machine)"
  mkdir -p "$fetch" && fetch=$(cd "$fetch" && pwd)
  rm -f "$fetch"/*.deb "$fetch"/*_cut.tar.*  # one version of each package
  whole=() trimmed=() apt=(apt-get)
  [[ $(id -u) == 0 ]] && apt+=(-o APT::Sandbox::User=root)  # root downloads into any folder
  while read -r first rest; do
    [[ -z $first || $first == \#* ]] && continue
    if [[ $first == *: ]]; then trimmed+=("${first%:} $rest"); else read -ra more <<<"$rest"; whole+=("$first" "${more[@]}"); fi
  done < <(deb_set)
  (( with_dataset )) && whole+=(dataset-fashion-mnist)
  echo "gpu-check: downloading ${#whole[@]} packages whole and ${#trimmed[@]} cut into $fetch"
  (cd "$fetch" && "${apt[@]}" download "${whole[@]}" >/dev/null) || die "apt-get download failed"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  for entry in "${trimmed[@]}"; do
    read -r name patterns <<<"$entry"
    (cd "$tmp" && "${apt[@]}" download "$name" >/dev/null) || die "apt-get download $name failed"
    deb=$(ls "$tmp/${name}"_*.deb)
    x=$tmp/x-$name
    mkdir -p "$x" && dpkg-deb -x "$deb" "$x"
    if [[ $patterns == %boost-includes ]]; then
      if command -v g++ >/dev/null && boost_includes "$x" >"$tmp/list"; then :; else
        echo "gpu-check: no g++ to find the Boost headers used: keeping all of $name"
        mv "$deb" "$fetch/" && continue
      fi
    else
      (cd "$x" && for p in $patterns; do compgen -G "$p" || { echo "$name has no $p" >&2; exit 1; }; done) \
        >"$tmp/list" || die "the cut of $name is out of date"
    fi
    # folders stand for all they hold
    (cd "$x" && sort -u "$tmp/list" | while read -r p; do
       if [[ -d $p && ! -L $p ]]; then find "$p" ! -type d; else echo "$p"; fi
     done | sort -u) >"$tmp/files"
    tar -C "$x" -czf "$fetch/$(basename "$deb" .deb)_cut.tar.gz" --no-recursion -T "$tmp/files"
    echo "gpu-check: $name cut to $(wc -l <"$tmp/files") files"
    rm -rf "$x" "$deb"
  done
  echo "gpu-check: $(ls "$fetch" | wc -l) files, $(du -sh "$fetch" | cut -f1) in $fetch"
  exit 0
fi

# --- the log and the step table -------------------------------------------------------------

if [[ -n $out ]]; then
  mkdir -p "$out" && out=$(cd "$out" && pwd)
  exec > >(tee -a "$out/gpu-check.log") 2>&1
  tee_pid=$!
  trap 'exec 1>&- 2>&-; wait "$tee_pid" 2>/dev/null' EXIT
fi
summary=()
record() {  # NAME STATUS SECONDS
  summary+=("$(printf '%-32s %-26s %5ss' "$1" "$2" "$3")")
  [[ -n $out ]] && printf '%s\n' "${summary[@]}" >"$out/summary.txt"
  return 0
}
print_summary() {
  echo "== gpu-check steps ($(( SECONDS ))s in all) =="
  printf '%s\n' "${summary[@]}"
}
# The time limit for a step of at most CAP seconds; fails when too little time is left, unless
# the step has a floor of its own (min_limit=S, for short steps that read what others wrote).
min_limit=0
limit() {
  local cap=$1 left
  (( deadline > 0 )) || { echo "$cap"; return 0; }
  left=$(( deadline - SECONDS - 15 ))
  (( left < min_limit )) && left=$min_limit
  (( left >= 20 || min_limit > 0 )) || return 1
  echo $(( cap < left ? cap : left ))
}
# step NAME CAP FILE CMD...: runs CMD under a time limit of CAP seconds (cut to the deadline),
# its output also into $out/FILE (FILE -: not), and records NAME's exit status and time.
step() {
  local name=$1 cap=$2 file=$3 lim t0=$SECONDS rc status
  shift 3
  if ! lim=$(limit "$cap"); then
    echo "== $name: skipped, out of time =="
    record "$name" "skipped (out of time)" 0
    return 99
  fi
  echo "== $name (limit ${lim}s) =="
  if [[ -n $out && $file != - ]]; then
    timeout -k 10 "$lim" "$@" 2>&1 | tee "$out/$file"
    rc=${PIPESTATUS[0]}
  else
    timeout -k 10 "$lim" "$@" 2>&1
    rc=$?
  fi
  case $rc in
    0) status=ok ;;
    124|137) status="TIMEOUT (${lim}s)" ;;
    *) status="FAILED (exit $rc)" ;;
  esac
  (( rc != 0 )) && echo "gpu-check: $name: $status"
  record "$name" "$status" $(( SECONDS - t0 ))
  return "$rc"
}

echo "gpu-check: $(date -u +%FT%TZ) on $(uname -srm), $(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) CPUs"
for tool in nvidia-smi g++ gcc cmake ninja python3; do
  printf '  %-10s %s\n' "$tool" "$(command -v "$tool" >/dev/null && "$tool" --version 2>&1 | grep -m1 -v '^$' || echo missing)"
done
printf '  %-10s %s\n' /dev/shm "$(df -h /dev/shm 2>/dev/null | awk 'NR == 2 {print $2 " (" $4 " free)"}')"

# --- --deps: the unpacked packages ----------------------------------------------------------

arch=x86_64-linux-gnu
ldpath="" binpath="" extra=()
if [[ -n $deps ]]; then
  [[ -d $deps ]] || die "no folder $deps"
  deps=$(cd "$deps" && pwd)
  root=$here/.deps/root
  lib=$root/usr/lib/$arch
  key=$(cd "$deps" && ls -l --time-style=+%s -- *.deb *.tar.gz 2>/dev/null | md5sum | cut -c1-32)
  if [[ -f $root/.unpacked && $(cat "$root/.unpacked") == "$key" ]]; then
    echo "gpu-check: $root already holds the packages of $deps"
  else
    t0=$SECONDS
    rm -rf "$root" && mkdir -p "$root"
    n=0
    for f in "$deps"/*.deb "$deps"/*.tar.gz; do
      [[ -e $f ]] || continue
      case $f in
        *.tar.gz) tar -xzf "$f" -C "$root" ;;
        *) if command -v dpkg-deb >/dev/null; then dpkg-deb -x "$f" "$root"
           else (t=$(mktemp -d) && cd "$t" && ar x "$f" && tar -xf data.tar.* -C "$root"; rc=$?; rm -rf "$t"; exit $rc)
           fi ;;
      esac || die "could not unpack $f"
      n=$((n + 1))
    done
    (( n > 0 )) || die "no .deb or .tar.gz files in $deps"
    # Links to absolute paths (zlib's libz.so -> /lib/...): to the unpacked file instead.
    while IFS= read -r l; do
      t=$(readlink "$l")
      [[ -e $root$t ]] && ln -sfn "$root$t" "$l"
    done < <(find "$root" -type l -lname '/*')
    # What the packages' maintainer scripts would have made: the alternatives' links.
    ln -sfn openblas-pthread/libblas.so.3 "$lib/libblas.so.3"
    ln -sfn openblas-pthread/liblapack.so.3 "$lib/liblapack.so.3"
    ln -sfn libblas.so.3 "$lib/libblas.so"
    ln -sfn liblapack.so.3 "$lib/liblapack.so"
    ln -sfn mpiexec.hydra "$root/usr/bin/mpiexec"
    ln -sfn mpicxx.mpich "$root/usr/bin/mpicxx"
    ln -sfn mpicc.mpich "$root/usr/bin/mpicc"
    # Debian's Kokkos names <prefix>/lib/include as its include folder; its headers are in
    # include/trilinos.
    [[ -e $root/usr/lib/include ]] || ln -s ../include/trilinos "$root/usr/lib/include"
    # MPICH's wrappers name /usr: point them here (FindMPI reads `mpicxx -show`).
    sed -i -e "s|^prefix=/usr\$|prefix=$root/usr|" -e "s|^exec_prefix=/usr\$|exec_prefix=$root/usr|" \
           -e "s|^includedir=/usr/|includedir=$root/usr/|" -e "s|^libdir=/usr/|libdir=$root/usr/|" \
           "$root"/usr/bin/mpic{c,xx}.mpich
    # The CMake package files name files under /usr (KokkosKernels its BLAS and LAPACK): the
    # unpacked ones where they exist here; Kokkos' libdl.a is the C library's (or -ldl).
    while IFS= read -r f; do
      for p in $(grep -oE '/usr/[A-Za-z0-9_.+/-]*' "$f" | sort -u); do
        re=${p//./\\.} re=${re//+/\\+}
        if [[ -e $root$p ]]; then
          sed -i -E "s#([\";])$re([\";])#\1$root$p\2#g" "$f"
        elif [[ $p == */libdl.a && ! -e $p ]]; then
          sed -i -E "s#([\";])$re([\";])#\1dl\2#g" "$f"
        fi
      done
    done < <(grep -rl '/usr/' "$lib/cmake" "$root/usr/share/cmake" 2>/dev/null)
    echo "$key" >"$root/.unpacked"
    echo "gpu-check: unpacked $n packages into $root ($(du -sh "$root" | cut -f1), $((SECONDS - t0))s)"
  fi
  # Every library here must find what it links, from here or the machine.
  ldpath=$lib:$lib/openblas-pthread:$root/lib/$arch
  missing=$(for f in "$lib"/*.so.* "$root/lib/$arch"/*.so.* "$root"/usr/bin/{mpiexec.hydra,hydra_pmi_proxy}; do
              LD_LIBRARY_PATH=$ldpath ldd "$f" 2>/dev/null | sed -n "s|^\s*\(\S*\) => not found|\1 (of ${f##*/})|p"
            done | sort -u)
  [[ -z $missing ]] || echo "gpu-check: WARNING: libraries not found for .deps/root:"$'\n'"$missing"
  export CMAKE_PREFIX_PATH="$root/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  # -rpath-link: the linker finds the libraries that those the targets link need (OpenBLAS
  # under liblapack, UCX under MPICH, ...) here too.
  extra=(-DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$ldpath"
         -DMPI_CXX_COMPILER="$root/usr/bin/mpicxx.mpich" -DMPI_C_COMPILER="$root/usr/bin/mpicc.mpich"
         -DMPIEXEC_EXECUTABLE="$root/usr/bin/mpiexec.hydra"
         -DHDF5_C_INCLUDE_DIRS="$root/usr/include/hdf5/serial"
         -DHDF5_C_LIBRARIES="$lib/hdf5/serial/libhdf5.so")
  binpath=$root/usr/bin
  [[ -d $root/usr/share/datasets/fashion-mnist ]] && data_dir=$root/usr/share/datasets/fashion-mnist
fi
: "${data_dir:=/usr/share/datasets/fashion-mnist}"

# --- configure and build --------------------------------------------------------------------

cuda=${CUDA_HOME:-/usr/local/cuda}
[[ -x $cuda/bin/nvcc ]] || die "no nvcc in $cuda/bin (set CUDA_HOME)"
echo "gpu-check: $("$cuda/bin/nvcc" --version | tail -1) in $cuda"
archs=""
if command -v nvidia-smi >/dev/null && cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1) && [[ -n $cap ]]; then
  archs=${cap//./}
  echo "gpu-check: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1), sm_$archs"
fi
# cuDNN: the toolkit's, else the Python package's (nvidia-cudnn-cu*, as PyTorch installs it).
cudnn_lib=""
if ! compgen -G "$cuda/include/cudnn.h" >/dev/null && ! compgen -G "$cuda/targets/*/include/cudnn.h" >/dev/null &&
   [[ ! -f /usr/include/cudnn.h && -z ${CUDNN_ROOT:-} ]]; then
  for py in python3 /usr/bin/python3; do
    d=$("$py" -c 'import nvidia.cudnn as m, os; print(os.path.dirname(m.__file__) if m.__file__ else list(m.__path__)[0])' 2>/dev/null) || continue
    if [[ -f $d/include/cudnn.h ]] && so=$(compgen -G "$d/lib/libcudnn.so*" | sort | head -1); then
      echo "gpu-check: cuDNN from $d"
      extra+=(-DASGD_CUDNN_INCLUDE_DIR="$d/include" -DASGD_CUDNN_LIBRARY="$so")
      cudnn_lib=$d/lib
      break
    fi
  done
fi
# The check's own commands (asgd, test_gpu, mpiexec) run with these libraries and programs.
ldpath=$cuda/lib64${cudnn_lib:+:$cudnn_lib}${ldpath:+:$ldpath}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
run_env=(env LD_LIBRARY_PATH="$ldpath" PATH="${binpath:+$binpath:}$PATH")
(( werror )) || extra+=(-DASGD_ENABLE_WERROR=OFF)

t0=$SECONDS
if ! cmake --preset cuda -B "$build_dir" -DCMAKE_CUDA_COMPILER="$cuda/bin/nvcc" \
     ${archs:+-DCMAKE_CUDA_ARCHITECTURES="$archs"} "${extra[@]}" "${cmake_args[@]}"; then
  record configure FAILED $((SECONDS - t0))
  [[ -n $out ]] && for f in "$build_dir"/CMakeFiles/CMakeConfigureLog.yaml "$build_dir"/CMakeFiles/CMakeError.log; do
    [[ -f $f ]] && cp "$f" "$out/" && break
  done
  print_summary
  die "configure failed"
fi
record configure ok $((SECONDS - t0))
(( configure_only )) && { print_summary; exit 0; }

t0=$SECONDS
asgd=$build_dir/asgd
test_gpu=$build_dir/tests/test_gpu
rm -f "$asgd" "$test_gpu" && mkdir -p "$build_dir"
# -k 0: build what can be built, so that one compile error still leaves the other target
cmake --build "$build_dir" --target asgd test_gpu -j "$(nproc)" -- -k 0 2>&1 | tee "$build_dir/gpu-check-build.log"
rc=${PIPESTATUS[0]}
if (( rc != 0 )); then
  echo "== the build's first errors =="
  grep -E -m 40 'error|FAILED:' "$build_dir/gpu-check-build.log"
fi
built=()
for f in "$asgd" "$test_gpu"; do [[ -x $f ]] && built+=("${f##*/}"); done
record build "$( ((rc == 0)) && echo ok || echo "FAILED (built: ${built[*]:-none})")" $((SECONDS - t0))
(( ${#built[@]} )) || { print_summary; die "build failed"; }
echo "gpu-check: $build_dir built (${built[*]})"
(( build_only )) && { print_summary; exit 0; }

# --- measurements ---------------------------------------------------------------------------

[[ -x $asgd ]] && step "asgd info" 60 - "${run_env[@]}" "$asgd" info

if [[ -x $test_gpu ]]; then
  xml=()
  [[ -n $out ]] && xml=(--gtest_output="xml:$out/test_gpu.xml")
  step "GPU tests (test_gpu)" 180 - "${run_env[@]}" "$test_gpu" "${xml[@]}"
  if (( $? == 77 )); then
    echo "gpu-check: no GPU here: the tests were skipped, nothing was timed"
    print_summary
    exit 0
  fi
fi
[[ -x $asgd ]] || { print_summary; exit 1; }

step "gpu-bench (3 models)" 150 gpu-bench.txt "${run_env[@]}" "$asgd" gpu-bench \
  --models lenet cifar10-18pct alexnet --batch 64 --steps "$steps"

if (( profile )); then
  # Where a step's time goes: the rate against the batch (a per-step cost that does not grow
  # with the batch is host-side or launch-bound), then each kernel's GPU time over 3 lenet
  # steps at batch 64 from Nsight Compute, where the machine has it (after the small SGEMM
  # yardstick and 5 warm-up steps).
  for b in 256 1024; do
    step "gpu-bench lenet, batch $b" 60 - "${run_env[@]}" "$asgd" gpu-bench --models lenet cifar10-18pct \
      --batch "$b" --steps 20 --sgemm-size 1024
  done
  if command -v ncu >/dev/null; then
    step "ncu: lenet kernels, 3 steps" 150 profile.txt "${run_env[@]}" ncu --clock-control none \
      --section SpeedOfLight --print-summary per-kernel --launch-skip 150 --launch-count 120 \
      "$asgd" gpu-bench --models lenet --batch 64 --steps 3 --sgemm-size 256
  else
    echo "gpu-check: no ncu on this machine: kernel times not taken"
  fi
fi

runs=$(mktemp -d)
if [[ -f $data_dir/train-images-idx3-ubyte.gz || -f $data_dir/train-images-idx3-ubyte ]]; then
  data=(--dataset fashion-mnist --data-dir "$data_dir") data_name=Fashion-MNIST
else
  data=(--dataset synthetic --synthetic-size 28 --synthetic-channels 1 --synthetic-train 60000
        --synthetic-test 10000) data_name="synthetic 28x28 data"
fi
py=""
for p in python3 /usr/bin/python3; do
  command -v "$p" >/dev/null && "$p" -c 'import h5py' 2>/dev/null && { py=$p; break; }
done

# nsync with 2 learners and a server (3 ranks) on this GPU, 1000 local steps per learner at both
# n_sync: 2000 updates at n_sync 1, 20 at n_sync 100. Hydra reaches its proxies over TCP on the
# loopback interface: bring that up where it is down (as root).
if [[ $(id -u) == 0 ]] && command -v python3 >/dev/null; then
  python3 - <<'EOF' || true
import fcntl, socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, struct.pack("16sH", b"lo", 0)))[1]
if not flags & 1:
    fcntl.ioctl(s, 0x8914, struct.pack("16sH", b"lo", flags | 1))
    print("gpu-check: brought the loopback interface up")
EOF
fi
export HYDRA_LAUNCHER=${HYDRA_LAUNCHER:-fork} UCX_TLS=${UCX_TLS:-self,sm} UCX_WARN_UNUSED_ENV_VARS=n
for ns in 1 100; do
  step "MPI nsync n_sync=$ns, 2 learners" 120 - "${run_env[@]}" MPIEXEC_TIMEOUT=110 mpiexec -n 3 \
    "$asgd" train --device cuda --model lenet "${data[@]}" --learners 2 --protocol nsync \
    --n-sync "$ns" --max-steps $((2000 / ns)) --epochs 100 --eval-samples 2000 --checkpoint-every 0 \
    --stall-timeout 100 --results "$runs" --suite "nsync$ns" -q
done
if [[ -n $py ]]; then
  min_limit=15 step "staging share per learner" 60 staging.txt "$py" - "$runs" "${out:+$out/staging.csv}" <<'EOF'
import glob, sys, h5py
runs, csv = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "")
rows = []
for ns in (1, 100):
    files = sorted(glob.glob(f"{runs}/nsync{ns}/runs/*.h5"))
    if not files:
        print(f"n_sync {ns}: no results file")
        continue
    with h5py.File(files[0]) as h:
        print(f"n_sync {ns}: status {h.attrs.get('status', '?')}, {files[0].rsplit('/', 1)[-1]}")
        L = h["learners"]
        col = lambda k, i: float(L[k][i]) if k in L else float("nan")
        for i in range(len(L["learner"])):
            c, s, pu, pl, w = (col(k, i) for k in ("compute_s", "stage_s", "push_s", "pull_s", "wait_s"))
            cycle = c + s + pu + pl
            share = s / cycle if cycle > 0 else float("nan")
            rows.append((ns, int(L["learner"][i]), c, s, pu, pl, w, int(L["gradients"][i]), int(L["samples"][i]), share))
print(f"{'n_sync':>6} {'learner':>7} {'compute_s':>9} {'stage_s':>8} {'push_s':>7} {'pull_s':>7} "
      f"{'wait_s':>7} {'gradients':>9} {'samples':>8} {'stage share':>11}")
for r in rows:
    print(f"{r[0]:>6} {r[1]:>7} {r[2]:>9.3f} {r[3]:>8.3f} {r[4]:>7.3f} {r[5]:>7.3f} {r[6]:>7.3f} "
          f"{r[7]:>9} {r[8]:>8} {100 * r[9]:>10.2f}%")
print("stage share = stage_s / (compute_s + stage_s + push_s + pull_s), per learner")
if csv:
    with open(csv, "w") as f:
        f.write("n_sync,learner,compute_s,stage_s,push_s,pull_s,wait_s,gradients,samples,stage_share\n")
        for r in rows:
            f.write(",".join(str(v) for v in r) + "\n")
sys.exit(0 if len(rows) == 4 else 1)
EOF
else
  echo "gpu-check: no python3 with h5py: the nsync runs' files (/learners) are copied instead"
  record "staging share per learner" "no h5py" 0
  [[ -n $out ]] && for ns in 1 100; do
    f=$(ls "$runs/nsync$ns/runs/"*.h5 2>/dev/null | head -1) && [[ -n $f ]] && cp "$f" "$out/nsync$ns.h5"
  done
fi

step "lenet 1 epoch, 1 learner" 90 - "${run_env[@]}" "$asgd" train --device cuda \
  --model lenet "${data[@]}" --epochs 1 --checkpoint-every 0 --results "$runs" --suite single \
  --progress-every 5
rm -rf "$runs"

echo
for f in gpu-bench staging; do
  [[ -n $out && -f $out/$f.txt ]] && { echo "== $f =="; cat "$out/$f.txt"; }
done
print_summary
echo "gpu-check: done ($data_name)"
