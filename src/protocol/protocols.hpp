#pragma once
// The registered types' entries (one function per file); registry.cpp lists them.
#include "protocol/registry.hpp"

namespace asgd::protocol {

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

}  // namespace asgd::protocol
