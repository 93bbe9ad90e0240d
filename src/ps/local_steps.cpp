#include "ps/local_steps.hpp"

#include <KokkosBlas1_axpby.hpp>

#include "common/hash.hpp"
#include "ps/trainer.hpp"

namespace asgd::ps {

LocalSteps::LocalSteps(const TrainConfig& cfg, const UpdateRule& rule, const data::Dataset& train,
                       index_t sample_size)
    : cfg_(cfg), rule_(rule), train_(train), x_("asgd::x", cfg.batch * sample_size),
      y_("asgd::y", cfg.batch), xh_(Kokkos::create_mirror_view(x_)),
      yh_(Kokkos::create_mirror_view(y_)) {}

kernels::LossSum LocalSteps::gradient(nn::Model& model, data::Sampler& sampler, int l,
                                      std::int64_t& step, gpu::Net* net) {
  sampler.next(idx_);
  data::gather_batch(train_, idx_, xh_.data(), yh_.data());
  const std::uint64_t seed =
      mix(mix(cfg_.seed, static_cast<std::uint64_t>(l)), static_cast<std::uint64_t>(step++));
  if (net) {
    net->zero_grads();
    const gpu::Loss s = net->forward_backward(cfg_.batch, xh_.data(), yh_.data(), true, seed, true);
    return {s.loss, s.wrong};
  }
  Kokkos::deep_copy(x_, xh_);
  Kokkos::deep_copy(y_, yh_);
  model.zero_grads();
  return model.forward_backward(cfg_.batch, x_, y_, nn::Context{true, seed}, true);
}

LocalResult LocalSteps::run(nn::Model& model, data::Sampler& sampler, int l, std::int64_t& step,
                            const nn::View& inc, const nn::View& fetched, gpu::Net* net) {
  LocalResult r;
  const double bpe = static_cast<double>(sampler.batches_per_epoch());
  for (int i = 0; i < rule_.local_steps(); ++i) {
    const auto st = sampler.state();
    const auto s = gradient(model, sampler, l, step, net);
    r.loss_sum += s.loss;
    r.wrong += s.wrong;
    r.samples += cfg_.batch;
    if (!rule_.delta()) continue;
    const double epoch = static_cast<double>(st.epoch) + static_cast<double>(st.batch) / bpe;
    const auto lr = static_cast<real_t>(scheduled_lr(cfg_, epoch));
    const auto momentum = static_cast<real_t>(cfg_.momentum);
    const auto wd = static_cast<real_t>(cfg_.weight_decay);
    if (net)
      net->sgd_update(lr, momentum, wd);
    else
      kernels::sgd_update<nn::Space>(model.n_params(), lr, momentum, wd, model.grads(), inc,
                                     model.params());
  }
  if (net) {
    if (rule_.delta()) net->delta_to_grads();
    net->synchronize();
    return r;
  }
  if (rule_.delta()) {  // push the accumulated change: local minus fetched
    Kokkos::deep_copy(model.grads(), model.params());
    KokkosBlas::axpy(real_t(-1), fetched, model.grads());
  }
  Kokkos::fence();
  return r;
}

}  // namespace asgd::ps
