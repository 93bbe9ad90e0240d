#pragma once
// The server's rule for each protocol, independent of the transport: how many
// gradients make an update (c), whether replies wait for the update (the
// hardsync barrier), whether pushes are weight deltas (nsync), and the
// learning-rate factor of each gradient from its staleness. Used by the MPI
// server and (later) the virtual one, so both apply identical numerics.
//
// g = final_scale(taus) * sum_l factor(tau_l) * grad_l, r = final_scale(taus) *
// sum_l factor(tau_l) (the update's mean rate factor), then
// inc = momentum*inc - alpha0*(g + r*wd*w); w += inc: each learner's step of the
// regularised objective, weight decay included, is scaled by its rate.
#include <cstdint>
#include <span>
#include <string>

#include "common/config.hpp"

namespace asgd::dist {

class UpdateRule {
 public:
  explicit UpdateRule(const TrainConfig& cfg);
  // c: hardsync lambda, softsync floor(lambda / n), nsync 1 (each delta applies alone).
  int gradients_per_update() const { return c_; }
  bool barrier() const { return barrier_; }
  bool delta() const { return delta_; }
  // Per-gradient factor rate(tau)/alpha0: staleness -> 1/tau for tau > 0, else 1.
  double factor(std::int64_t tau) const;
  // 1/c, and for mean-staleness also 1/mean(tau) when that mean is > 0.
  double final_scale(std::span<const std::int64_t> taus) const;
  const std::string& protocol() const { return protocol_; }

 private:
  std::string protocol_, policy_;
  int c_ = 1;
  bool barrier_ = false, delta_ = false;
};

}  // namespace asgd::dist
