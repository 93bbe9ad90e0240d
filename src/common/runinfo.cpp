#include "common/runinfo.hpp"

#include <Kokkos_Core.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>

#include "common/blas_env.hpp"

#ifndef ASGD_GIT_COMMIT
#define ASGD_GIT_COMMIT "unknown"
#endif

namespace asgd {

namespace {
std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}
}  // namespace

RunInfo collect_run_info() {
  RunInfo r;
  r.git_commit = ASGD_GIT_COMMIT;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) r.host = host;
  r.kokkos_version = fmt::format("{}.{}.{} ({})", KOKKOS_VERSION / 10000, KOKKOS_VERSION / 100 % 100,
                                 KOKKOS_VERSION % 100, Kokkos::DefaultExecutionSpace::name());
  r.blas = blas_info();
  r.slurm_job_id = env("SLURM_JOB_ID");
  r.slurm_array_job_id = env("SLURM_ARRAY_JOB_ID");
  r.slurm_array_task_id = env("SLURM_ARRAY_TASK_ID");
  return r;
}

}  // namespace asgd
