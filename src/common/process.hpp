#pragma once
// Starting a child process without a shell, its output to a log file.
#include <sys/types.h>

#include <string>
#include <vector>

namespace asgd {

struct SpawnOptions {
  // The child leads a process group of its own (its pid), so that a signal
  // to -pid reaches everything it starts (mpiexec and its ranks).
  bool own_group = false;
  // The child gets SIGTERM from the kernel when this process dies, even by
  // kill -9 (PR_SET_PDEATHSIG, kept across exec).
  bool die_with_parent = false;
  // The child does not inherit what an MPI launcher (or MPI's singleton start) set for this
  // process: PMI_*, PMIX_*, ORTE_*, OPAL_*, HYDI_*, and OMPI_* other than the user's own
  // OMPI_MCA_ settings and OMPI_ALLOW_RUN_AS_ROOT*. An mpiexec started from an MPI process
  // would otherwise take itself for one of that process's ranks.
  bool without_launcher_env = false;
};

// Starts argv (argv[0] looked up in PATH) with stdin from /dev/null and
// stdout and stderr on out_fd (which the caller closes), SIGTERM and SIGINT
// at their defaults. Returns the child's pid once it has exec'd; throws
// asgd::Error "cannot start <argv[0]>: <reason>" when it cannot.
pid_t spawn_process(const std::vector<std::string>& argv, int out_fd, const SpawnOptions& opt = {});

// Runs argv (as spawn_process, without_launcher_env) with stdout and stderr to log_path, waiting up
// to timeout_s (then SIGKILL). Returns "" on exit status 0, else what went
// wrong ("exit status 1", "killed by signal 9", "cannot start ...: ...",
// "timed out after 60 s").
std::string run_process(const std::vector<std::string>& argv, const std::string& log_path, int timeout_s);

// This process's executable by its path (where /proc/self/exe points), "" where
// that is unknown or the file is gone (deleted or replaced since it started).
std::string own_executable();

}  // namespace asgd
