#pragma once
// What the protocols, learning-rate policies and merge rules read of a run's
// configuration, as plain values: config/ fills it from a TrainConfig
// (protocol_options), so this part depends on nothing of the configuration's.
// An option absent is not given: the type's own default applies.
#include <optional>
#include <string>

#include "common/defaults.hpp"

namespace asgd::protocol {

// The merge rule of nsync when none is given (common/defaults.hpp).
using asgd::kDefaultMerge;

struct Options {
  std::string protocol;   // a registered protocol's name
  std::string lr_policy;  // a registered rate policy's name
  std::optional<std::string> merge;
  double lr = 0.01;      // the run's base rate (before its schedule)
  double momentum = 0;   // the run's (learners') momentum
  int learners = 1;
  int servers = 1;
  int softsync_n = 1;
  int n_sync = 1;
  std::optional<int> staleness;  // ssp
  std::optional<int> tau;        // easgd
  std::optional<double> alpha;   // easgd
  std::optional<double> lambda_dc;
  std::optional<double> server_lr;
  std::optional<double> server_momentum;

  std::string merge_rule() const { return merge.value_or(kDefaultMerge); }
};

}  // namespace asgd::protocol
