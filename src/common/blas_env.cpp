#include "common/blas_env.hpp"

#include "common/error.hpp"

#include <Kokkos_Core.hpp>  // KOKKOS_ENABLE_OPENMP
#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace asgd {

namespace {

template <class Fn>
Fn lookup(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

// The best OpenBLAS kernel family this CPU can run, or nullptr.
const char* best_core() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  // Cooperlake's sgemm kernels were 10-40% faster than SkylakeX's on this
  // project's GEMM shapes (measured with OpenBLAS 0.3.21 on a Sapphire Rapids).
  if (__builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512f")) return "Cooperlake";
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
  return nullptr;
}

bool is_generic(const char* core) {
  for (const char* slow : {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom",
                           "Katmai", "Coppermine", "Northwood", "Banias", "Unknown"})
    if (std::strcmp(core, slow) == 0) return true;
  return false;
}

}  // namespace

void ensure_blas_core(int /*argc*/, char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  if (const char* off = std::getenv("ASGD_BLAS_AUTOTUNE"); off && std::strcmp(off, "0") == 0)
    return;
  auto corename = lookup<char* (*)()>("openblas_get_corename");
  if (corename == nullptr) return;
  const char* now = corename();
  const char* best = best_core();
  if (now == nullptr || best == nullptr || !is_generic(now)) return;
  setenv("OPENBLAS_CORETYPE", best, 1);
  execv("/proc/self/exe", argv);
  // execv only returns on failure: carry on with the slow kernel.
}

int threads_per_rank(int requested) {
#if defined(KOKKOS_ENABLE_OPENMP)
  // OMP_NUM_THREADS, when set, must be whole numbers 1..kMaxThreadsPerRank
  // (a list for nested levels): libgomp ignores a bad value with a warning of
  // its own, and Kokkos' OpenMP backend crashes at start when the first level
  // is above its pool (512 in Kokkos 3.4: OpenMPExec::MAX_THREAD_COUNT),
  // whatever --threads asks for.
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    int first = 0;
    for (const char* at = env;;) {
      char* end = nullptr;
      errno = 0;
      const long t = std::strtol(at, &end, 10);
      if (end == at || *at == '-' || *at == '+' || errno != 0 || t < 1 || t > kMaxThreadsPerRank ||
          (*end != '\0' && *end != ','))
        throw Error(fmt::format("OMP_NUM_THREADS '{}': want whole numbers in 1..{} (threads per rank)", env,
                                kMaxThreadsPerRank));
      if (first == 0) first = static_cast<int>(t);
      if (*end == '\0') break;
      at = end + 1;
    }
    if (requested == 1) return first;
  }
#endif
  return requested;
}

void set_blas_threads(int threads) {
#if defined(KOKKOS_ENABLE_OPENMP)
  (void)threads;
  if (auto set = lookup<void (*)(int)>("openblas_set_num_threads")) set(1);
#else
  if (auto set = lookup<void (*)(int)>("openblas_set_num_threads")) set(threads);
#endif
}

std::string blas_info() {
  auto config = lookup<char* (*)()>("openblas_get_config");
  auto corename = lookup<char* (*)()>("openblas_get_corename");
  if (config == nullptr || corename == nullptr) return "system BLAS (not OpenBLAS)";
  return fmt::format("{} (core {})", config(), corename());
}

}  // namespace asgd
