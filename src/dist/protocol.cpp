#include "dist/protocol.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.hpp"

namespace asgd::dist {

UpdateRule::UpdateRule(const TrainConfig& cfg) : protocol_(cfg.protocol), policy_(cfg.lr_policy) {
  if (protocol_ == "hardsync") {
    c_ = cfg.learners;
    barrier_ = true;
  } else if (protocol_ == "softsync") {
    if (cfg.softsync_n < 1 || cfg.softsync_n > cfg.learners)
      throw Error(fmt::format("softsync n {} must be in 1..{}", cfg.softsync_n, cfg.learners));
    c_ = cfg.learners / cfg.softsync_n;
  } else if (protocol_ == "nsync") {
    c_ = 1;
    delta_ = true;
  } else {
    throw Error(fmt::format("protocol '{}' unknown", protocol_));
  }
}

double UpdateRule::factor(std::int64_t tau) const {
  if (policy_ == "staleness" && tau > 0) return 1.0 / static_cast<double>(tau);
  return 1.0;
}

double UpdateRule::final_scale(std::span<const std::int64_t> taus) const {
  double scale = taus.empty() ? 1.0 : 1.0 / static_cast<double>(taus.size());
  if (policy_ == "mean-staleness" && !taus.empty()) {
    double sum = 0;
    for (auto t : taus) sum += static_cast<double>(t);
    const double mean = sum / static_cast<double>(taus.size());
    // Divide by max(1, mean): a mean between 0 and 1 (one stale gradient among
    // fresh ones) must not raise the rate above alpha0.
    scale /= std::max(1.0, mean);
  }
  return scale;
}

}  // namespace asgd::dist
