#pragma once
// A suite's runs grouped into configurations (runs that differ only in the
// seed) with the aggregated figures of the report tables.
#include <string>
#include <vector>

#include "report/detail.hpp"

namespace asgd::report::detail {

struct ConfigGroup {
  std::string key, id;
  std::vector<const RunInfo*> runs;  // one per seed, sorted by seed
  int completed = 0, diverged = 0, failed = 0;
  const RunInfo& rep() const { return *runs.front(); }

  // speedup against the 1-learner baseline of each seed
  // time to target: test error at the evaluations (tt), smoothed training
  // error at every update (train_tt)
  Agg tt_speedup, train_tt_speedup, tp_speedup;
  Agg time_to_target, time_to_train_target, samples_per_s;
  std::vector<std::string> baselines;  // run ids of the baselines used
  std::string speedup_note;

  // convergence
  Agg final_error, best_error, smoothed_error;
  Agg gap;                              // mean final error minus hardsync's
  const ConfigGroup* hardsync = nullptr;
  double mean_tau = kNaN;               // mean over runs of each run's mean tau
  std::vector<std::int64_t> histogram;  // summed over runs
};

// "softsync L=8 n=4 lr=staleness batch=64" (fields that are set).
std::string config_label(const ConfigGroup& g);

// Groups readable runs by configuration key and computes every figure.
// Groups are ordered by model, mode, dataset, protocol, lr policy, batch, n,
// n_sync, learners.
std::vector<ConfigGroup> analyse(const std::vector<RunInfo>& runs);

// The reference file of the paper a suite reproduces (its name starts with
// the paper's id): reference_dir/<paper>.json when that file exists, else "".
std::string paper_reference(const std::string& suite, const std::string& reference_dir);

// The "beside the papers" section of report.md for a suite whose name
// starts with a paper's id (paine2013, zhang2015); "" otherwise. Problems
// with the reference files go to warnings and into the section.
std::string papers_section(const std::vector<ConfigGroup>& groups, const std::string& suite,
                           const std::string& reference_dir, std::vector<std::string>& warnings);

}  // namespace asgd::report::detail
