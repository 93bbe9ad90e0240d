#include "common/blas_env.hpp"

#include "common/error.hpp"
#include "common/process.hpp"

#include <Kokkos_Core.hpp>  // KOKKOS_ENABLE_OPENMP
#if defined(KOKKOS_ENABLE_OPENMP)
#include <omp.h>
#endif
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
  // The binary by its own path, so the process keeps its name (a process's
  // name is the file name it was executed by: "exe" through /proc/self/exe,
  // which ps, pkill and the cluster tests' look-up by name would see);
  // /proc/self/exe where the path is gone (the file deleted or replaced).
  const std::string self = own_executable();
  execv(self.empty() ? "/proc/self/exe" : self.c_str(), argv);
  // execv only returns on failure: carry on with the slow kernel.
}

int kokkos_threads(int requested) {
  const int threads = threads_per_rank(requested);
#if defined(KOKKOS_ENABLE_OPENMP)
  if (omp_get_thread_limit() < threads)
    throw Error(fmt::format("OMP_THREAD_LIMIT {} is below the {} threads per rank asked for (--threads or "
                            "OMP_NUM_THREADS)",
                            omp_get_thread_limit(), threads));
  omp_set_dynamic(0);
  if (omp_get_max_active_levels() < 1) omp_set_max_active_levels(1);
#endif
  return threads;
}

void set_blas_threads(int threads) {
#if defined(KOKKOS_ENABLE_OPENMP)
  (void)threads;
  if (auto set = lookup<void (*)(int)>("openblas_set_num_threads")) set(1);
#else
  if (auto set = lookup<void (*)(int)>("openblas_set_num_threads")) set(threads_per_rank(threads));
#endif
}

int blas_threads() {
  auto get = lookup<int (*)()>("openblas_get_num_threads");
  return get == nullptr ? 0 : get();
}

std::string blas_info() {
  auto config = lookup<char* (*)()>("openblas_get_config");
  auto corename = lookup<char* (*)()>("openblas_get_corename");
  if (config == nullptr || corename == nullptr) return "system BLAS (not OpenBLAS)";
  return fmt::format("{} (core {})", config(), corename());
}

}  // namespace asgd
