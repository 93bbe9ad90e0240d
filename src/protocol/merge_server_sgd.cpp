// The server-sgd merge rule: the change d read back as the client's mean step
// per minibatch, g = -d / (lr n_sync) (its gradients through its momentum),
// applied as one step of the server's own rate and momentum,
//   v = m v + g;  w -= lr_s v,
// as Downpour's server applies accumulated gradients (Dean et al. 2012,
// section 4.1). lr is the run's scheduled rate (the clients'); lr_s the
// server's (server_lr, default lr, scheduled the same way); m the server's
// momentum (server_momentum, default the run's momentum); v lives in the
// shard's state. With lr_s = lr n_sync and m = 0 it is the sum; with
// lr_s = lr n_sync / L, the mean.
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "protocol/protocols.hpp"
#include "protocol/views.hpp"

namespace asgd::protocol {

// lr_s: the server's rate now, scheduled as the run's rate lr is.
double server_rate(const std::optional<double>& server_lr, double base_lr, double lr) {
  return server_lr ? lr * *server_lr / base_lr : lr;
}

void check_server_lr(const Options& c, std::vector<std::string>& problems) {
  if (c.server_lr && !(*c.server_lr > 0 && *c.server_lr < 1e6))
    problems.push_back(fmt::format("--server-lr {} must be in (0, 1e6)", *c.server_lr));
}

namespace {

class ServerSgd final : public MergeRule {
 public:
  explicit ServerSgd(const Options& o)
      : server_lr_(o.server_lr), base_lr_(o.lr), momentum_(o.server_momentum.value_or(o.momentum)) {}
  const char* name() const override { return "server-sgd"; }
  double merge(const MergeStep& step, Vec w, Vec state, CVec d) const override {
    const double lr_s = server_rate(server_lr_, base_lr_, step.lr);
    const auto inv = static_cast<real_t>(1.0 / (step.lr * step.local_steps)), rate = static_cast<real_t>(lr_s);
    const auto mom = static_cast<real_t>(momentum_);
    const auto wv = view(w), v = view(state);
    const auto dv = view(d);
    for_each("asgd::server::merge_sgd", w.size, KOKKOS_LAMBDA(index_t i) {
      v(i) = mom * v(i) - dv(i) * inv;
      wv(i) -= rate * v(i);
    });
    return lr_s;
  }

 private:
  std::optional<double> server_lr_;
  double base_lr_, momentum_;
};

void check_server_momentum(const Options& c, std::vector<std::string>& problems) {
  if (c.server_momentum && !(*c.server_momentum >= 0 && *c.server_momentum < 1))
    problems.push_back(fmt::format("--server-momentum {} must be in [0, 1)", *c.server_momentum));
}

void check_server_sgd(const Options& c, std::vector<std::string>& problems) {
  check_server_lr(c, problems);
  check_server_momentum(c, problems);
}

}  // namespace

Entry<MergeRule> server_sgd_entry() {
  return {"server-sgd", "one step of the mean minibatch step -d / (lr n_sync) with the server's rate and momentum",
          check_server_sgd,
          [](const Options& o) -> std::unique_ptr<MergeRule> { return std::make_unique<ServerSgd>(o); },
          {{"server_lr", check_server_lr}, {"server_momentum", check_server_momentum}}};
}

}  // namespace asgd::protocol
