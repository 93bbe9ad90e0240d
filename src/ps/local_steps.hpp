#pragma once
// A learner's work between two exchanges with the servers, the same for the
// MPI learner and the virtual ones: local_steps() minibatches on the
// learner's weights (the model's parameters); with weight-delta pushes
// (nsync) a local SGD step after each, with the learner's own momentum at the
// schedule's rate for the learner's data epoch, and at the end the push
// payload params - fetched in the gradient buffer. Otherwise the gradient of
// the one minibatch is left in the gradient buffer.
#include <cstdint>
#include <vector>

#include "config/config.hpp"
#include "data/dataset.hpp"
#include "gpu/gpu.hpp"
#include "nn/model.hpp"
#include "ps/protocol.hpp"

namespace asgd::ps {

struct LocalResult {
  double loss_sum = 0;
  std::int64_t wrong = 0, samples = 0;
};

class LocalSteps {
 public:
  LocalSteps(const TrainConfig& cfg, const UpdateRule& rule, const data::Dataset& train,
             index_t sample_size);
  // One minibatch of learner l: the next indices of sampler, dropout seed
  // mix(mix(seed, l), step), step counted up; the mean-loss gradient added
  // to the model's (zeroed) gradient buffer.
  // With net (--device cuda) the minibatch runs there instead.
  kernels::LossSum gradient(nn::Model& model, data::Sampler& sampler, int l, std::int64_t& step,
                            gpu::Net* net = nullptr);
  // The whole cycle. inc, fetched: the learner's local momentum and the
  // weights it fetched (used with weight-delta pushes only). With net the
  // cycle runs on the GPU (its own momentum and fetched copy) and ends
  // synchronised.
  LocalResult run(nn::Model& model, data::Sampler& sampler, int l, std::int64_t& step,
                  const nn::View& inc, const nn::View& fetched, gpu::Net* net = nullptr);

 private:
  const TrainConfig& cfg_;
  const UpdateRule& rule_;
  const data::Dataset& train_;
  nn::View x_;
  nn::IView y_;
  nn::View::HostMirror xh_;
  nn::IView::HostMirror yh_;
  std::vector<index_t> idx_;
};

}  // namespace asgd::ps
