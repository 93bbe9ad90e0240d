// Asynchronous EASGD (Zhang, Choromanska and LeCun 2015, Algorithm 1): each
// learner keeps its own weights x and takes tau local SGD steps (with its own
// momentum); then it computes d = alpha (x - c) against the centre c it
// received at its last exchange, sets x -= d and pushes d; the server sets
// c += d (each push its own update) and replies with the centre. The centre
// is what is evaluated and checkpointed.
#include <cmath>

#include <fmt/format.h>

#include "protocol/protocols.hpp"
#include "protocol/views.hpp"

namespace asgd::protocol {
namespace {

constexpr int kDefaultTau = 10;
constexpr double kDefaultBeta = 0.9;  // the paper's beta = alpha * learners

class Easgd final : public Protocol {
 public:
  explicit Easgd(const Options& cfg)
      : tau_(cfg.tau.value_or(kDefaultTau)), alpha_(cfg.alpha.value_or(kDefaultBeta / cfg.learners)) {}
  const char* name() const override { return "easgd"; }
  int gradients_per_update() const override { return 1; }
  Push push() const override { return Push::elastic; }
  int local_steps() const override { return tau_; }
  double elastic_alpha() const override { return alpha_; }
  // d = alpha (x - c) against the centre c last received; x -= d (host).
  void exchange(Vec x, CVec centre, Vec d) const override {
    const auto alpha = static_cast<real_t>(alpha_);
    const auto xv = view<HostSpace>(x), dv = view<HostSpace>(d);
    const auto cv = view<HostSpace>(centre);
    for_each<HostSpace>("asgd::learner::elastic", x.size, KOKKOS_LAMBDA(index_t i) {
      dv(i) = alpha * (xv(i) - cv(i));
      xv(i) -= dv(i);
    });
    HostSpace().fence();
  }
  std::string describe() const override { return fmt::format(" tau={} alpha={:g}", tau_, alpha_); }

 private:
  int tau_;
  double alpha_;
};

void check_easgd(const Options& c, std::vector<std::string>& problems) {
  if (c.tau && (*c.tau < 1 || *c.tau > 1000000))
    problems.push_back(fmt::format("--tau {} must be in 1..1000000", *c.tau));
  if (c.alpha && !(*c.alpha > 0 && *c.alpha < 1))
    problems.push_back(fmt::format("--alpha {} must be in (0, 1)", *c.alpha));
}

}  // namespace

Entry<Protocol> easgd_entry() {
  return entry_of<Easgd>("easgd",
                         "asynchronous elastic averaging: tau local steps, then an elastic exchange with the centre",
                         check_easgd, {"tau", "alpha"});
}

}  // namespace asgd::protocol
