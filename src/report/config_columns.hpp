#pragma once
// The configuration columns of report.md's tables: model, mode, protocol,
// learners, n, n_sync, rate policy, batch, seeds, and an "other settings"
// column when configuration fields beyond them (a merge rule, warm steps, a
// data set) tell groups apart.
#include <string>
#include <vector>

#include "report/analysis.hpp"

namespace asgd::report::detail {

// "key=value ..." per group for the fields beyond the table's columns whose
// values differ between groups (a field left at its default counts as its
// own value); all empty when none differ.
std::vector<std::string> other_settings(const std::vector<ConfigGroup>& groups);

// A table's configuration header and cells.
struct ConfigColumns {
  std::vector<std::string> other;
  bool any = false;
  explicit ConfigColumns(const std::vector<ConfigGroup>& groups);
  std::vector<std::string> header() const;
  std::vector<std::string> cells(const std::vector<ConfigGroup>& groups, std::size_t i) const;
};

}  // namespace asgd::report::detail
