#pragma once
// The server's rule for a run: its protocol and learning-rate policy (the
// registered types of src/protocol, built once from the configuration), used
// by the MPI server, the MPI learner and the virtual ones alike.
//
// g = final_scale(taus) * sum_l factor(tau_l) * grad_l, r = final_scale(taus) *
// sum_l factor(tau_l) (the update's mean rate factor), then
// inc = momentum*inc - alpha0*(g + r*wd*w); w += inc: each learner's step of the
// regularised objective, weight decay included, is scaled by its rate.
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "config/config.hpp"
#include "protocol/protocol.hpp"

namespace asgd::ps {

class UpdateRule {
 public:
  explicit UpdateRule(const TrainConfig& cfg);
  explicit UpdateRule(const protocol::Options& options);
  UpdateRule(UpdateRule&&) noexcept = default;
  ~UpdateRule();
  // c: hardsync lambda, softsync floor(lambda / n), nsync 1 (each delta applies alone).
  int gradients_per_update() const { return c_; }
  bool barrier() const { return barrier_; }
  // The server adds each push to its weights (nsync's weight deltas, EASGD's
  // elastic differences) instead of applying it as a gradient.
  bool delta() const { return delta_; }
  // Learners take local SGD steps with their own momentum (nsync, EASGD).
  bool local_sgd() const { return delta_; }
  // Pushes are the change of the weights: local minus fetched (nsync).
  bool weights_delta() const { return push_ == protocol::Push::weights_delta; }
  // EASGD's alpha (0: not elastic): learners keep their own weights.
  double elastic_alpha() const { return alpha_; }
  // DC-ASGD's lambda (0: no compensation).
  double delay_compensation() const { return lambda_; }
  bool uses_servers() const { return servers_; }
  bool may_reply(std::int64_t learner_clock, std::int64_t slowest) const {
    return protocol_->may_reply(learner_clock, slowest);
  }
  int local_steps() const { return local_steps_; }
  // Whether a learner of a run with `learners` learners may read the weights
  // where its shards keep them (shared windows) instead of copying them: it
  // pushes a gradient of one minibatch (no local steps, no elastic exchange,
  // its weights are only ever the shards'), and no shard changes its weights
  // while the learner computes: it is the only learner, or every update takes
  // one gradient of each learner behind a barrier (hardsync).
  bool weights_read_in_place(int learners) const {
    return push_ == protocol::Push::gradient && !delta_ && alpha_ == 0 && local_steps_ == 1 &&
           (learners == 1 || (barrier_ && c_ == learners));
  }
  // Per-gradient factor rate(tau)/alpha0: staleness -> 1/tau for tau > 0, else 1.
  double factor(std::int64_t tau) const { return policy_->factor(tau); }
  // 1/c, and for mean-staleness also 1/mean(tau) when that mean is > 0.
  double final_scale(std::span<const std::int64_t> taus) const {
    return policy_->final_scale(taus.data(), taus.size());
  }
  // An update of gradients with staleness taus: the scale of their sum,
  // final_scale(taus), and the rate factor of the whole step, that scale
  // times the sum of factor(tau) (weight decay is scaled by it too: it is the
  // gradient of the L2 term of the same objective, so a staleness-scaled run,
  // with n times the updates per epoch, does not decay weights n times as
  // hard). Constant rates: 1/c and 1. The shards and allreduce both ask it.
  struct Scales {
    double gradient = 1, rate = 1;
  };
  Scales scales(std::span<const std::int64_t> taus) const {
    double factor_sum = 0;
    for (auto t : taus) factor_sum += factor(t);
    const double scale = final_scale(taus);
    return {scale, scale * factor_sum};
  }
  const protocol::Protocol& protocol() const { return *protocol_; }
  // How the server merges a pushed delta: nsync's weights delta by the run's
  // merge rule, EASGD's elastic difference by the sum.
  const protocol::MergeRule& merge() const { return *merge_; }

 private:
  std::unique_ptr<protocol::Protocol> protocol_;
  std::unique_ptr<protocol::RatePolicy> policy_;
  std::unique_ptr<protocol::MergeRule> merge_;
  int c_ = 1, local_steps_ = 1;
  bool barrier_ = false, delta_ = false, servers_ = true;
  protocol::Push push_ = protocol::Push::gradient;
  double alpha_ = 0, lambda_ = 0;
};

}  // namespace asgd::ps
