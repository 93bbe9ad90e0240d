#pragma once
// The timing model of virtual learners: per-learner minibatch compute times
// drawn from a distribution (fixed, normal, lognormal) and one push + pull
// time per exchange, with an optional straggler. Deterministic: one
// mt19937_64 per learner, normals by Box-Muller. Its generator states can be
// saved and restored (checkpoints of virtual runs).
#include <cstdint>
#include <random>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "config/config.hpp"

namespace asgd::sim {

class Timing {
 public:
  Timing(const TrainConfig& cfg, double compute_s, double comm_s);
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
  double compute_s_, comm_s_;
  std::vector<std::mt19937_64> rng_;
};

}  // namespace asgd::sim
