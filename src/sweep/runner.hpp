#pragma once
// Running a suite: here with mpiexec (asgd sweep run), or on a cluster as one
// Slurm array per resource shape plus a report job (asgd sweep submit); and
// what is done, running and failed (asgd sweep status).
#include <string>
#include <vector>

#include "sweep/suite.hpp"

namespace asgd::sweep {

// Files of a suite under <results>/<suite>/:
//   configs/<run-id>.json   resolved config each run is started from
//   logs/<run-id>.log       output of the run; logs/<run-id>.failed holds its exit code
//   runs/, checkpoints/     written by asgd train
//   slurm/                  sbatch scripts and run lists
//   report/                 asgd report
struct SuitePaths {
  std::string root, configs, logs, runs, checkpoints, slurm;
};
SuitePaths suite_paths(const Suite& s, const std::string& results_dir);

// Writes every run's config JSON (atomically); returns the paths by run order.
std::vector<std::string> write_configs(const Suite& s, const SuitePaths& p);

// A micro suite's one run: asgd_micro (beside `self`) writing Google
// Benchmark JSON to runs/<run-id>.json, which `asgd compare` reads.
std::vector<std::string> micro_command(const Suite& s, const std::string& self,
                                       const std::string& out_json);
std::string micro_output(const Run& r, const SuitePaths& p);

// running: a trainer holds the run's lock (io::RunLock) right now.
enum class RunState { done, diverged, failed, interrupted, pending, running };
const char* to_string(RunState s);
RunState run_state(const Run& r, const SuitePaths& p);

struct LocalOptions {
  int jobs = 1;             // runs side by side
  int cores = 0;            // ranks that may run at once (0: the machine's cores)
  std::string self;         // the asgd executable
  std::string mpiexec = "mpiexec";
  bool dry_run = false;     // print the commands only
};
// Runs what is not finished; prints progress and a summary. Returns the
// number of failed runs.
int run_local(const Suite& s, const std::string& results_dir, const LocalOptions& opt);

struct SubmitOptions {
  std::string site = "local";  // slurm/sites/<site>.yaml
  std::string sites_dir;       // folder of site files
  std::string self;            // the asgd executable, as the compute nodes see it
  bool dry_run = false;        // write the scripts, do not call sbatch
};
// Writes one sbatch array script per resource shape (unfinished runs only)
// and a report job that depends on all of them; submits unless dry_run.
// Returns the number of runs submitted.
int submit(const Suite& s, const std::string& results_dir, const SubmitOptions& opt);

// Prints each run's state (and Slurm's view of its array task when squeue is
// there); returns the number of failed runs.
int status(const Suite& s, const std::string& results_dir);

}  // namespace asgd::sweep
