#pragma once
// Single-learner training: SGD with momentum and weight decay on one rank,
// step schedule, evaluation off the training clock, progress lines,
// checkpoints every k updates with exact resume, results as one HDF5 file.
#include <cstdint>
#include <string>

#include "config/config.hpp"
#include "io/results.hpp"

namespace asgd::ps {

struct RunPaths {
  std::string results;     // <results_dir>/<suite>/runs/<run-id>.h5
  std::string checkpoint;  // <results_dir>/<suite>/checkpoints/<run-id>.h5
};

// Creates the folders and checks they are writable; throws asgd::Error naming
// the folder otherwise (before any training starts).
RunPaths prepare_paths(const TrainConfig& cfg);

struct TrainOutcome {
  io::RunResult result;
  RunPaths paths;
  bool skipped = false;   // the results file already existed: nothing was run
  bool resumed = false;   // continued from a checkpoint
};

struct TrainOptions {
  bool quiet = false;          // no progress lines
  double progress_every_s = 2;  // seconds between progress lines
  // Tests only: stop abruptly after this many updates in this process, writing
  // nothing more (what kill -9 leaves behind). 0: off.
  std::int64_t abort_after = 0;
  // The watchdog of MPI runs: a rank whose wait completes nothing for this
  // many seconds ends the run (status failed, exit 1), naming itself and
  // what it waited for. 0: off.
  double stall_timeout_s = 600;
};

// Thrown when TrainOptions::abort_after fires (RunSession::count_update).
struct Aborted : Error {
  using Error::Error;
};

TrainOutcome train_single(const TrainConfig& cfg, const TrainOptions& opt = {});

// Learning rate at a given epoch: lr * gamma^(number of lr_steps <= epoch).
double scheduled_lr(const TrainConfig& cfg, double epoch);

// A run of updates has its end: its samples make cfg.epochs epochs of n_train,
// or its updates reach cfg.max_steps (when set).
bool run_done(const TrainConfig& cfg, std::int64_t samples, std::int64_t updates, index_t n_train);

// Fills summary fields (final/best error, time to target) from the series.
void summarise(io::RunResult& r, double target_error);

}  // namespace asgd::ps
