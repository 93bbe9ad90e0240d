#pragma once
// The bodies of asgd's subcommands: run_commands.cpp (train, models, info,
// gpu-bench: Kokkos and MPI) and suite_commands.cpp (sweep, report).
#include <string>

#include "cli/gpu_bench.hpp"
#include "config/config.hpp"
#include "ps/trainer.hpp"

namespace asgd::cli {

inline constexpr int kExitBadInput = 2;
inline constexpr int kExitFailed = 1;

int world_rank();
int world_size();

int cmd_train(const TrainConfig& cfg, bool dry_run, const ps::TrainOptions& opt);
int cmd_models(const std::string& which, const std::string& dataset);
int cmd_info(bool as_json, int threads);
int cmd_gpu_bench(const GpuBenchOptions& o);

// Where the project's data files are: ASGD_SOURCE_DIR (env), else the source
// tree this binary was built from.
std::string source_dir();

struct SweepArgs {
  std::string suite, results = "results", site = "local", sites_dir, mpiexec = "mpiexec";
  int jobs = 1, cores = 0;
  bool dry_run = false, no_report = false;
};

int cmd_report(const std::string& dir, const std::string& out, bool plots, bool quiet);
// action: plan, run, submit or status.
int cmd_sweep(const std::string& action, const SweepArgs& a);

}  // namespace asgd::cli
