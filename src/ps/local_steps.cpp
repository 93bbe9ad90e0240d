#include "ps/local_steps.hpp"

#include "common/hash.hpp"
#include "ps/trainer.hpp"

namespace asgd::ps {

engine::Loss LocalSteps::gradient(engine::Engine& eng, data::Sampler& sampler, int l,
                                  std::int64_t& step) {
  sampler.next(idx_);
  data::gather_batch(train_, idx_, eng.batch_x(), eng.batch_labels());
  const std::uint64_t seed =
      mix(mix(cfg_.seed, static_cast<std::uint64_t>(l)), static_cast<std::uint64_t>(step++));
  eng.zero_grads();
  return eng.forward_backward(cfg_.batch, true, seed, true);
}

LocalResult LocalSteps::run(engine::Engine& eng, data::Sampler& sampler, int l, std::int64_t& step) {
  LocalResult r;
  const double bpe = static_cast<double>(sampler.batches_per_epoch());
  for (int i = 0; i < rule_.local_steps(); ++i) {
    const auto st = sampler.state();
    const auto s = gradient(eng, sampler, l, step);
    r.loss_sum += s.loss;
    r.wrong += s.wrong;
    r.samples += cfg_.batch;
    if (rule_.weights_delta())  // nsync's per-minibatch series; the other rules push one minibatch
      r.errors.push_back(static_cast<float>(static_cast<double>(s.wrong) / static_cast<double>(cfg_.batch)));
    if (!rule_.local_sgd()) continue;
    const double epoch = static_cast<double>(st.epoch) + static_cast<double>(st.batch) / bpe;
    eng.sgd_update(static_cast<real_t>(scheduled_lr(cfg_, epoch)), static_cast<real_t>(cfg_.momentum),
                   static_cast<real_t>(cfg_.weight_decay));
  }
  if (rule_.weights_delta()) eng.delta_to_grads();  // push the accumulated change: local minus fetched
  eng.synchronize();
  return r;
}

void LocalSteps::elastic(engine::Engine& eng, const real_t* centre) const {
  eng.params_to_host();
  const index_t n = eng.n_params();
  rule_.protocol().exchange({eng.params(), n}, {centre, n}, {eng.grads(), n});
  eng.params_changed();
}

}  // namespace asgd::ps
