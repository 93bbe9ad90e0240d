// The learning-rate policies (Zhang et al. 2015, section 3): constant;
// staleness-dependent, alpha0 / tau for each gradient of staleness tau > 0;
// mean-staleness, alpha0 / max(1, mean tau) for the whole update.
#include <algorithm>

#include "protocol/protocols.hpp"

namespace asgd::protocol {

double RatePolicy::final_scale(const std::int64_t* /*taus*/, std::size_t n) const {
  return n == 0 ? 1.0 : 1.0 / static_cast<double>(n);
}

namespace {

void no_checks(const Options&, std::vector<std::string>&) {}

class Constant final : public RatePolicy {
 public:
  const char* name() const override { return "constant"; }
};

class Staleness final : public RatePolicy {
 public:
  const char* name() const override { return "staleness"; }
  double factor(std::int64_t tau) const override {
    return tau > 0 ? 1.0 / static_cast<double>(tau) : 1.0;
  }
};

class MeanStaleness final : public RatePolicy {
 public:
  const char* name() const override { return "mean-staleness"; }
  double final_scale(const std::int64_t* taus, std::size_t n) const override {
    double scale = RatePolicy::final_scale(taus, n);
    if (n == 0) return scale;
    double sum = 0;
    for (std::size_t i = 0; i < n; ++i) sum += static_cast<double>(taus[i]);
    // max(1, mean): a mean between 0 and 1 (one stale gradient among fresh
    // ones) must not raise the rate above alpha0.
    return scale / std::max(1.0, sum / static_cast<double>(n));
  }
};

template <class T>
Entry<RatePolicy> policy(const char* name, const char* summary) {
  return {name, summary, no_checks,
          [](const Options&) -> std::unique_ptr<RatePolicy> { return std::make_unique<T>(); },
          {}};
}

}  // namespace

Entry<RatePolicy> constant_entry() { return policy<Constant>("constant", "alpha0 for every gradient"); }
Entry<RatePolicy> staleness_entry() {
  return policy<Staleness>("staleness", "alpha0 / tau for a gradient of staleness tau > 0");
}
Entry<RatePolicy> mean_staleness_entry() {
  return policy<MeanStaleness>("mean-staleness", "alpha0 / max(1, mean tau) for the whole update");
}

}  // namespace asgd::protocol
