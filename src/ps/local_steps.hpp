#pragma once
// A learner's work between two exchanges with the servers, the same for the
// MPI learner and the virtual ones, on any engine: local_steps() minibatches
// on the engine's weights; with weight-delta pushes (nsync) a local SGD step
// after each, with the engine's own momentum at the schedule's rate for the
// learner's data epoch, and at the end the push payload params - fetched in
// the gradient buffer (the engine kept the fetched weights: keep_fetched()).
// EASGD also steps locally; its push is made by elastic(). Otherwise the
// gradient of the one minibatch is left in the gradient buffer.
// Ends synchronised.
#include <cstdint>
#include <vector>

#include "config/config.hpp"
#include "data/dataset.hpp"
#include "engine/engine.hpp"
#include "ps/protocol.hpp"

namespace asgd::ps {

struct LocalResult {
  double loss_sum = 0;
  std::int64_t wrong = 0, samples = 0;
  std::vector<float> errors;  // weight-delta pushes: each minibatch's training error, in order
};

class LocalSteps {
 public:
  LocalSteps(const TrainConfig& cfg, const UpdateRule& rule, const data::Dataset& train)
      : cfg_(cfg), rule_(rule), train_(train) {}
  // One minibatch of learner l: the next indices of sampler, dropout seed
  // mix(mix(seed, l), step), step counted up; the mean-loss gradient added
  // to the (zeroed) gradient buffer.
  engine::Loss gradient(engine::Engine& eng, data::Sampler& sampler, int l, std::int64_t& step);
  LocalResult run(engine::Engine& eng, data::Sampler& sampler, int l, std::int64_t& step);
  // EASGD's exchange on the host buffers: d = alpha (x - centre), x -= d, and
  // d into the gradient buffer (what is pushed).
  void elastic(engine::Engine& eng, const real_t* centre) const;

 private:
  const TrainConfig& cfg_;
  const UpdateRule& rule_;
  const data::Dataset& train_;
  std::vector<index_t> idx_;
};

}  // namespace asgd::ps
