#pragma once
// The system BLAS under KokkosBlas, seen at run time. Debian's OpenBLAS reads
// its kernel choice (OPENBLAS_CORETYPE) once, when the library loads, and on
// CPUs it does not recognise falls back to a generic SSE3 kernel ("Prescott")
// at about a fifth of the machine's sgemm speed. ensure_blas_core() fixes that
// before anything runs by re-executing the program with OPENBLAS_CORETYPE set
// to the best kernel the CPU supports; a user's own setting always wins, and
// ASGD_BLAS_AUTOTUNE=0 turns this off.
#include <string>

namespace asgd {

// Call first in main(), before MPI or Kokkos start. Returns only if no
// re-exec was needed (or possible).
void ensure_blas_core(int argc, char** argv);
// Threads per rank for Kokkos and the BLAS together, from --threads: the
// requested count; on a Kokkos whose host backend is OpenMP, --threads 1 (the
// default) defers to OMP_NUM_THREADS when that is set, so that
// `OMP_NUM_THREADS=T asgd ...` and the Slurm scripts (which set it from the
// suite's cpus_per_rank) use T threads. A Serial build always gets `requested`.
// On an OpenMP build an OMP_NUM_THREADS that is not whole numbers in
// 1..kMaxThreadsPerRank is refused (asgd::Error naming it).
int threads_per_rank(int requested);
// The most threads per rank: Kokkos 3.4's OpenMP backend holds at most 512
// (OpenMPExec::MAX_THREAD_COUNT) and crashes beyond; --threads, a suite's
// cpus_per_rank and OMP_NUM_THREADS are held to it on every build.
inline constexpr int kMaxThreadsPerRank = 512;
// Sets OpenBLAS's thread count when OpenBLAS is the BLAS (no-op otherwise):
// on a Serial Kokkos to threads_per_rank(threads); on an OpenMP Kokkos to 1,
// because there the kernels split each GEMM over Kokkos' threads themselves
// (kernels/common.hpp: detail::gemm), one single-threaded BLAS call per thread.
void set_blas_threads(int threads);
// "OpenBLAS 0.3.21 ... (core SkylakeX)" or "system BLAS (not OpenBLAS)".
std::string blas_info();

}  // namespace asgd
