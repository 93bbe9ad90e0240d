#pragma once
// Facts about where and how a run happens, stored in every results file:
// the build (commit, Kokkos, BLAS), the batch system's ids, and the machine
// (CPU model and the instruction sets that matter for speed, cores, memory,
// load when the run started, kernel and OS). A figure is only as good as
// the conditions it was taken under, and users compare figures across
// machines and months (MLPerf's system description and ReFrame's
// system/partition records are the models).
#include <string>
#include <vector>

#include "common/cpu_name.hpp"

namespace asgd {

struct RunInfo {
  std::string git_commit, host, kokkos_version, blas;
  std::string slurm_job_id, slurm_array_job_id, slurm_array_task_id, slurm_nodelist;
  // the machine
  std::string cpu_model;               // /proc/cpuinfo "model name"
  std::vector<std::string> cpu_flags;  // of those that matter: avx2, fma, avx512*, amx*
  int cpus_online = 0;                 // sysconf(_SC_NPROCESSORS_ONLN)
  int cpus_allowed = 0;                // this process's affinity mask
  double mem_total_bytes = 0, mem_available_bytes = 0;
  double load1 = 0, load5 = 0, load15 = 0;  // /proc/loadavg when collected
  std::string kernel, os;
  std::string kokkos_backend;
  int kokkos_concurrency = 1;
};

RunInfo collect_run_info();

// How a run uses the machine, for machine_json().
struct RunShape {
  int ranks = 1;             // processes of the run (1 for single and virtual)
  int threads_per_rank = 1;  // --threads
  std::vector<std::string> nodes;  // host names of every rank (deduplicated)
  std::string mpi;           // MPI library version, or what stands in for it
  std::string gpu;           // the GPU and driver where used, else ""
};

// The `machine` record of a results file and of `asgd info --json`: one JSON
// object (keys in results/README.md), compact.
std::string machine_json(const RunInfo& info, const RunShape& shape);

// Seconds since the Unix epoch (wall clock), for run intervals.
double unix_now();

// The CPU seconds every processor of this machine has spent busy since boot
// (user, nice, system, irq, softirq: /proc/stat), and this boot's id
// (/proc/sys/kernel/random/boot_id: the same in every namespace of one
// machine); -1 and "" where they cannot be read.
double machine_busy_seconds();
std::string machine_boot_id();

}  // namespace asgd
