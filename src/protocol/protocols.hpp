#pragma once
// The registered types' entries (one function per file); registry.cpp lists them.
#include "protocol/registry.hpp"

namespace asgd::protocol {

// The entry of protocol type T (constructed from the configuration).
template <class T>
Entry<Protocol> entry_of(const char* name, const char* summary,
                         void (*check)(const Options&, std::vector<std::string>&)) {
  return {name, summary, check,
          [](const Options& cfg) -> std::unique_ptr<Protocol> { return std::make_unique<T>(cfg); }};
}
// For a type without options of its own.
inline void no_options(const Options&, std::vector<std::string>&) {}

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

Entry<MergeRule> sum_entry();
Entry<MergeRule> mean_entry();
Entry<MergeRule> server_sgd_entry();
Entry<MergeRule> adagrad_entry();

}  // namespace asgd::protocol
