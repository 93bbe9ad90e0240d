#pragma once
// Predicted beside measured: where a results folder holds real runs and
// virtual runs of one configuration (the same config but for the virtual
// clock's fields), the virtual runs' samples/s and mean staleness (the
// performance model's prediction, with its profile) beside the real runs'.
#include <string>
#include <vector>

#include "report/analysis.hpp"

namespace asgd::report::detail {

// The Markdown section ("" when no configuration has both), and its CSV.
std::string predicted_md(const std::vector<ConfigGroup>& groups);
Table predicted_csv(const std::vector<ConfigGroup>& groups);

}  // namespace asgd::report::detail
