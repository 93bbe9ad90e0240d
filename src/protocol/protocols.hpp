#pragma once
// The registered types' entries (one function per file); registry.cpp lists them.
#include "protocol/registry.hpp"

namespace asgd::protocol {

// The entry of protocol type T (constructed from the configuration).
template <class T>
Entry<Protocol> entry_of(const char* name, const char* summary,
                         Check check, std::vector<OptionRead> reads = {}) {
  return {name, summary, check,
          [](const Options& cfg) -> std::unique_ptr<Protocol> { return std::make_unique<T>(cfg); },
          std::move(reads)};
}

Entry<Protocol> hardsync_entry();
Entry<Protocol> softsync_entry();
Entry<Protocol> nsync_entry();
Entry<Protocol> allreduce_entry();
Entry<Protocol> ssp_entry();
Entry<Protocol> easgd_entry();
Entry<Protocol> dcasgd_entry();

Entry<RatePolicy> constant_entry();
Entry<RatePolicy> staleness_entry();
Entry<RatePolicy> mean_staleness_entry();

// server_lr, read by the server-sgd and adagrad merge rules: its domain, and
// the server's rate now when the run's (scheduled) rate is lr.
void check_server_lr(const Options& c, std::vector<std::string>& problems);
double server_rate(const std::optional<double>& server_lr, double base_lr, double lr);

Entry<MergeRule> sum_entry();
Entry<MergeRule> mean_entry();
Entry<MergeRule> server_sgd_entry();
Entry<MergeRule> adagrad_entry();

}  // namespace asgd::protocol
