// DC-ASGD (Zheng et al. 2017, the constant-lambda form): asynchronous, each
// gradient its own update (c = 1); the server keeps, per learner, the weights
// it last sent it (w_sent) and applies g + lambda g*g*(w - w_sent) in place of
// the delayed gradient g (elementwise), the first-order Taylor compensation of
// the delay with the diagonal g*g approximating the Hessian. lambda 0 is
// plain asynchronous SGD.
#include <cmath>

#include <fmt/format.h>

#include "protocol/protocols.hpp"
#include "protocol/views.hpp"

namespace asgd::protocol {
namespace {

constexpr double kDefaultLambda = 0.04;

class Dcasgd final : public Protocol {
 public:
  explicit Dcasgd(const Options& cfg) : lambda_(cfg.lambda_dc.value_or(kDefaultLambda)) {}
  const char* name() const override { return "dcasgd"; }
  int gradients_per_update() const override { return 1; }
  double delay_compensation() const override { return lambda_; }
  // out = g + lambda g*g*(w - w_sent), elementwise (Zheng et al. 2017, eq. 10
  // with the constant lambda): the delayed gradient moved to the current
  // weights by the first-order term with the diagonal g*g for the Hessian.
  bool compensate(Vec out, CVec g, CVec w, CVec w_sent) const override {
    const auto lambda = static_cast<real_t>(lambda_);
    const auto ov = view(out);
    const auto gv = view(g), wv = view(w), sent = view(w_sent);
    for_each("asgd::server::dc_compensate", out.size, KOKKOS_LAMBDA(index_t i) {
      const real_t gi = gv(i);
      ov(i) = gi + lambda * gi * gi * (wv(i) - sent(i));
    });
    return true;
  }
  std::string describe() const override { return fmt::format(" lambda={:g}", lambda_); }

 private:
  double lambda_;
};

void check_dcasgd(const Options& c, std::vector<std::string>& problems) {
  if (c.lambda_dc && !(*c.lambda_dc >= 0 && std::isfinite(*c.lambda_dc) && *c.lambda_dc <= 1e6))
    problems.push_back(fmt::format("--lambda-dc {} must be a number in [0, 1e6]", *c.lambda_dc));
}

}  // namespace

Entry<Protocol> dcasgd_entry() {
  return entry_of<Dcasgd>("dcasgd",
                         "delay-compensated ASGD: the server adds lambda g*g*(w - w_sent) to each gradient",
                         check_dcasgd, {"lambda_dc"});
}

}  // namespace asgd::protocol
