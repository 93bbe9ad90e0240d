// The adagrad merge rule, Downpour's AdaGrad server (Dean et al. 2012): the
// change d read back as the client's mean step per minibatch,
// g = -d / (lr n_sync), applied with a rate per parameter,
//   G += g*g;  w -= lr_s g / (sqrt(G) + 1e-8),
// lr the run's scheduled rate, lr_s the server's (server_lr, default lr,
// scheduled the same way); G lives in the shard's state.
#include <cmath>
#include <optional>

#include "protocol/protocols.hpp"
#include "protocol/views.hpp"

namespace asgd::protocol {
namespace {

class Adagrad final : public MergeRule {
 public:
  explicit Adagrad(const Options& o) : server_lr_(o.server_lr), base_lr_(o.lr) {}
  const char* name() const override { return "adagrad"; }
  double merge(const MergeStep& step, Vec w, Vec state, CVec d) const override {
    const double lr_s = server_rate(server_lr_, base_lr_, step.lr);
    const auto inv = static_cast<real_t>(1.0 / (step.lr * step.local_steps)), rate = static_cast<real_t>(lr_s);
    const auto wv = view(w), sum_sq = view(state);
    const auto dv = view(d);
    for_each("asgd::server::merge_adagrad", w.size, KOKKOS_LAMBDA(index_t i) {
      const real_t g = -dv(i) * inv;
      sum_sq(i) += g * g;
      wv(i) -= rate * g / (std::sqrt(sum_sq(i)) + real_t(1e-8));
    });
    return lr_s;
  }

 private:
  std::optional<double> server_lr_;
  double base_lr_;
};

}  // namespace

Entry<MergeRule> adagrad_entry() {
  return {"adagrad", "the mean minibatch step -d / (lr n_sync) with an AdaGrad rate per parameter (server_lr)",
          check_server_lr,
          [](const Options& o) -> std::unique_ptr<MergeRule> { return std::make_unique<Adagrad>(o); },
          {{"server_lr", check_server_lr}}};
}

}  // namespace asgd::protocol
