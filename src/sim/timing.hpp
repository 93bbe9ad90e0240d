#pragma once
// The timing model of virtual learners: per-learner minibatch compute times
// drawn from a distribution (fixed, normal, lognormal) and one push + pull
// time per exchange, with an optional straggler. Deterministic: one
// mt19937_64 per learner, normals by Box-Muller. Its generator states can be
// saved and restored (checkpoints of virtual runs).
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "config/config.hpp"

namespace asgd::sim {

// The figures of the timing model: given, calibrated (a measured minibatch,
// and a memory copy of the parameters each way as push + pull), from a
// profile, or, on a resume, the ones the run started with.
struct TimingFigures {
  double compute_s = 0, comm_s = 0;
  bool calibrated = false;
};
// The figures a results' or checkpoint's timing_model JSON holds; throws
// asgd::Error naming `where` when it holds none.
TimingFigures figures_from_json(const std::string& json, const std::string& where);

class Timing {
 public:
  // cv < 0: the config's compute_cv (a profile gives its own).
  Timing(const TrainConfig& cfg, double compute_s, double comm_s, double cv = -1);
  // One minibatch of learner l (draws from l's generator).
  double compute(int l);
  double comm() const { return comm_s_; }
  double compute_mean() const { return compute_s_; }
  nlohmann::json describe(bool calibrated) const;
  // The generators' states as words, and back (throws asgd::Error when the
  // words are not states of this many learners).
  std::vector<std::uint64_t> save() const;
  void restore(const std::vector<std::uint64_t>& words);

 private:
  enum class Kind { fixed, normal, lognormal };
  double normal(int l);
  const TrainConfig& cfg_;
  Kind kind_;
  double compute_s_, comm_s_, cv_;
  std::vector<std::mt19937_64> rng_;
};

}  // namespace asgd::sim
