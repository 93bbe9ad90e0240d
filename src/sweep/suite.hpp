#pragma once
// Suite files (YAML): a base config, sweep axes (cartesian, plus zipped axes
// that move together), exclusions, seeds, target error and resources,
// expanded into runs with stable ids. The format is documented in
// suites/README.md.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"

namespace asgd::sweep {

struct Resources {
  int servers = 1;               // parameter-server ranks per run (real mode)
  int gpus_per_learner = 0;      // 0: CPU learners
  std::string time_limit = "01:00:00";  // Slurm --time of one run, HH:MM:SS or D-HH:MM:SS
  int cpus_per_rank = 1;
  bool exclusive = false;        // Slurm: whole nodes for each task (#SBATCH --exclusive)
  // Slurm: at most this many tasks of an array at once (--array=...%K); -1:
  // the site's max_parallel_tasks, 0: no limit. Timing runs that share a node
  // share its cores and memory bandwidth, and their figures say less.
  int max_parallel_tasks = -1;
};

struct Run {
  std::string run_id;     // stable: "<suite>-<axis values>-<hash8 of the resolved config>"
  TrainConfig config;     // fully resolved (suite, run_id, results_dir set)
  std::map<std::string, std::string> point;  // axis name -> value for this run (incl. "seed")
  int ranks = 1;          // MPI ranks: servers + learners (1 for a single learner or virtual)
  std::string shape;      // resource shape key, e.g. "ranks3-gpu0-01:00:00"
};

// What a suite's runs are: trainings timed by the wall clock, virtual
// learners on the performance model, or the kernel micro-benchmarks. In a
// suite file: `mode: real | virtual | micro`.
enum class SuiteMode { real, virtual_learners, micro };
constexpr std::string_view to_text(SuiteMode m) {
  return m == SuiteMode::real ? "real" : m == SuiteMode::micro ? "micro" : "virtual";
}
constexpr std::optional<SuiteMode> parse_suite_mode(std::string_view s) {
  for (SuiteMode v : {SuiteMode::real, SuiteMode::virtual_learners, SuiteMode::micro})
    if (s == to_text(v)) return v;
  return std::nullopt;
}

struct Suite {
  std::string name, description, path;
  SuiteMode mode = SuiteMode::real;
  std::string bench_filter;   // micro: --benchmark_filter (empty: all)
  int bench_repetitions = 1;  // micro: --benchmark_repetitions
  double target_error = 0.1;
  Resources resources;
  std::vector<std::string> axes;  // axis names in file order (zip members included)
  std::vector<Run> runs;          // in a deterministic order
};

// Loads and expands a suite file. results_dir is where runs will write
// (the run configs' results_dir). Every problem in the file is collected and
// reported at once in one asgd::Error whose message lists them all
// ("<file>:<line>: unknown key 'lerners' (did you mean 'learners'?)", wrong
// types, zip lists of unequal length, exclusions naming unknown axes,
// impossible runs such as n > learners, a dataset whose files are missing).
Suite load_suite(const std::string& path, const std::string& results_dir);

// Runs grouped by resource shape, groups in order of first appearance.
std::vector<std::vector<const Run*>> group_by_shape(const Suite& s);

}  // namespace asgd::sweep
