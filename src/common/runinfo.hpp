#pragma once
// Facts about where and how a run happens, stored in every results file.
#include <string>

namespace asgd {

struct RunInfo {
  std::string git_commit, host, kokkos_version, blas;
  std::string slurm_job_id, slurm_array_job_id, slurm_array_task_id;
};

RunInfo collect_run_info();

}  // namespace asgd
