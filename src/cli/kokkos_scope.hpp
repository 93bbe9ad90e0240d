#pragma once
// Kokkos lives exactly as long as a KokkosScope (views must die before
// finalize). threads: --threads (common/blas_env.hpp: kokkos_threads).
#include <Kokkos_Core.hpp>

#include "common/blas_env.hpp"

namespace asgd::cli {

struct KokkosScope {
  explicit KokkosScope(int threads = 1) {
    Kokkos::InitArguments args;
    args.disable_warnings = true;
    args.num_threads = kokkos_threads(threads);
    Kokkos::initialize(args);
  }
  ~KokkosScope() { Kokkos::finalize(); }
  KokkosScope(const KokkosScope&) = delete;
  KokkosScope& operator=(const KokkosScope&) = delete;
};

}  // namespace asgd::cli
