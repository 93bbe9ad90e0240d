#pragma once
// The system BLAS under KokkosBlas, seen at run time. Debian's OpenBLAS reads
// its kernel choice (OPENBLAS_CORETYPE) once, when the library loads, and on
// CPUs it does not recognise falls back to a generic SSE3 kernel ("Prescott")
// at about a fifth of the machine's sgemm speed. ensure_blas_core() fixes that
// before anything runs by re-executing the program with OPENBLAS_CORETYPE set
// to the best kernel the CPU supports; a user's own setting always wins, and
// ASGD_BLAS_AUTOTUNE=0 turns this off.
#include <string>

#include "common/threads.hpp"

namespace asgd {

// Call first in main(), before MPI or Kokkos start. Returns only if no
// re-exec was needed (or possible).
void ensure_blas_core(int argc, char** argv);
// threads_per_rank(requested), for Kokkos::initialize. On an OpenMP build it
// also readies the OpenMP runtime for a pool of that size, which Kokkos 3.4
// cannot start otherwise ("pool already exists", exit 1): dynamic thread
// adjustment (OMP_DYNAMIC=true) is turned off, no active parallel level
// (OMP_MAX_ACTIVE_LEVELS=0) becomes one, and an OMP_THREAD_LIMIT below the
// count is refused (asgd::Error naming both).
int kokkos_threads(int requested);
// Sets OpenBLAS's thread count when OpenBLAS is the BLAS (no-op otherwise):
// on a Serial Kokkos to threads_per_rank(threads); on an OpenMP Kokkos to 1,
// because there the kernels split each GEMM over Kokkos' threads themselves
// (kernels/common.hpp: detail::gemm), one single-threaded BLAS call per thread.
void set_blas_threads(int threads);
// "OpenBLAS 0.3.21 ... (core SkylakeX)" or "system BLAS (not OpenBLAS)".
std::string blas_info();
// OpenBLAS's thread count now; 0 when the BLAS is not OpenBLAS.
int blas_threads();

}  // namespace asgd
