#pragma once
// Kokkos lives exactly as long as a KokkosScope (views must die before
// finalize). threads: --threads (common/blas_env.hpp: kokkos_threads).
#include <Kokkos_Core.hpp>
#include <fmt/format.h>

#include <cstdlib>
#include <exception>
#include <string>

#include "common/blas_env.hpp"
#include "common/error.hpp"
#include "common/text.hpp"

namespace asgd::cli {

// Kokkos reads KOKKOS_* variables of its own (KOKKOS_NUM_THREADS,
// KOKKOS_DEVICE_ID, ...) and throws a runtime_error of several lines on a bad
// one; asgd sets the threads itself. Either is bad input: one line, exit 2.
struct KokkosScope {
  explicit KokkosScope(int threads = 1) {
    Kokkos::InitArguments args;
    args.disable_warnings = true;
    args.num_threads = kokkos_threads(threads);
    if (const char* env = std::getenv("KOKKOS_NUM_THREADS"); env != nullptr && *env != '\0' &&
                                                               std::string(env) != std::to_string(args.num_threads))
      throw Error(fmt::format("KOKKOS_NUM_THREADS='{}': asgd sets Kokkos' threads from --threads or "
                              "OMP_NUM_THREADS ({} here); unset KOKKOS_NUM_THREADS",
                              shorten(env), args.num_threads));
    try {
      Kokkos::initialize(args);
    } catch (const std::exception& e) {
      std::string what = e.what();
      what = what.substr(0, what.find('\n'));
      if (const auto at = what.find(" Raised by"); at != std::string::npos) what.resize(at);
      if (what.rfind("Error: ", 0) == 0) what.erase(0, 7);
      throw Error("Kokkos refused its settings (KOKKOS_* environment variables): " + shorten(what));
    }
  }
  ~KokkosScope() { Kokkos::finalize(); }
  KokkosScope(const KokkosScope&) = delete;
  KokkosScope& operator=(const KokkosScope&) = delete;
};

}  // namespace asgd::cli
