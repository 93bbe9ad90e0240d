// How a server shard merges a pushed change of weights d (nsync, GPU A-SGD)
// into its weights w. A type per rule, registered by name (registry.cpp):
//   sum        w += d                 every client's whole change (the server
//                                     adds what a client pushes)
//   mean       w += d / L             the mean over the L clients
//   server-sgd g = -d / (lr n_sync); v = m v + g; w -= lr_s v
//                                     the change read back as the client's mean
//                                     step per minibatch (its gradients through
//                                     its momentum), applied as one step of the
//                                     server's own rate and momentum, as
//                                     Downpour's server applies accumulated
//                                     gradients (Dean et al. 2012, section 4.1)
//   adagrad    g as above; G += g*g; w -= lr_s g / (sqrt(G) + 1e-8)
//                                     Downpour's AdaGrad server: a rate per
//                                     parameter
// lr is the run's scheduled rate (the clients' rate); lr_s the server's
// (server_lr, default lr, scheduled the same way); m the server's momentum
// (server_momentum, default the run's momentum). server-sgd with
// lr_s = lr n_sync and m = 0 is the sum; with lr_s = lr n_sync / L, the mean.
#include <fmt/format.h>

#include "protocol/protocols.hpp"

namespace asgd::protocol {

double MergeRule::add_scale(int /*learners*/) const { return 1.0; }

namespace {

class Sum final : public MergeRule {
 public:
  const char* name() const override { return "sum"; }
  MergeKind kind() const override { return MergeKind::add; }
};

class Mean final : public MergeRule {
 public:
  const char* name() const override { return "mean"; }
  MergeKind kind() const override { return MergeKind::add; }
  double add_scale(int learners) const override { return 1.0 / static_cast<double>(learners); }
};

class ServerSgd final : public MergeRule {
 public:
  const char* name() const override { return "server-sgd"; }
  MergeKind kind() const override { return MergeKind::server_sgd; }
};

class Adagrad final : public MergeRule {
 public:
  const char* name() const override { return "adagrad"; }
  MergeKind kind() const override { return MergeKind::adagrad; }
};

void check_merge(const Options& c, std::vector<std::string>& problems) {
  if (c.server_lr && !(*c.server_lr > 0 && *c.server_lr < 1e6))
    problems.push_back(fmt::format("--server-lr {} must be in (0, 1e6)", *c.server_lr));
  if (c.server_momentum && !(*c.server_momentum >= 0 && *c.server_momentum < 1))
    problems.push_back(fmt::format("--server-momentum {} must be in [0, 1)", *c.server_momentum));
}

template <class T>
Entry<MergeRule> rule(const char* name, const char* summary) {
  return {name, summary, check_merge,
          [](const Options&) -> std::unique_ptr<MergeRule> { return std::make_unique<T>(); }};
}

}  // namespace

Entry<MergeRule> sum_entry() { return rule<Sum>("sum", "w += d: every client's whole change (the default)"); }
Entry<MergeRule> mean_entry() { return rule<Mean>("mean", "w += d / L: the mean of the clients' changes"); }
Entry<MergeRule> server_sgd_entry() {
  return rule<ServerSgd>("server-sgd",
                         "one step of the mean minibatch step -d / (lr n_sync) with the server's rate and momentum");
}
Entry<MergeRule> adagrad_entry() {
  return rule<Adagrad>("adagrad", "the mean minibatch step -d / (lr n_sync) with an AdaGrad rate per parameter (server_lr)");
}

}  // namespace asgd::protocol
