#pragma once
// The /virtual group of a checkpoint (io::VirtualState), inside io only.
#include <cstdint>

#include "io/h5_util.hpp"
#include "io/results.hpp"

namespace asgd::io {

void write_virtual_state(const h5::Loc& root, const VirtualState& v, std::int64_t n_params);
// Refuses (asgd::Error) arrays whose lengths do not agree with each other and
// with n_params, and non-finite or negative times.
VirtualState read_virtual_state(const h5::Loc& root, std::int64_t n_params);

}  // namespace asgd::io
