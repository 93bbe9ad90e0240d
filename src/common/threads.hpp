#pragma once
// Threads per rank, from --threads and OMP_NUM_THREADS (no Kokkos, no BLAS:
// the local runner counts cores with it too).

namespace asgd {

// The most threads per rank: Kokkos 3.4's OpenMP backend holds at most 512
// (OpenMPExec::MAX_THREAD_COUNT) and crashes beyond; --threads, a suite's
// cpus_per_rank and OMP_NUM_THREADS are held to it on every build.
inline constexpr int kMaxThreadsPerRank = 512;

// Threads per rank for Kokkos and the BLAS together, from --threads: the
// requested count; --threads 1 (the default) defers to OMP_NUM_THREADS when
// that is set, so that `OMP_NUM_THREADS=T asgd ...` and the Slurm scripts
// (which set it from the suite's cpus_per_rank) use T threads: Kokkos' and
// the BLAS's on an OpenMP build, the BLAS's on a Serial one (whose kernels
// run on one thread). An OMP_NUM_THREADS that is not whole numbers in
// 1..kMaxThreadsPerRank is refused (asgd::Error naming it). The results'
// machine record holds this count (threads_per_rank); config.threads holds
// what was asked.
int threads_per_rank(int requested);

}  // namespace asgd
