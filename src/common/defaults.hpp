#pragma once
// Defaults that readers of stored configurations need besides the
// configuration's own field table: a stored configuration leaves out what was
// not given, and the report, which reads results files, links nothing of the
// configuration or the protocols. Spelled here once for all of them.
namespace asgd {

// nsync's merge rule when none is given (protocol::Options::merge_rule()).
inline constexpr const char* kDefaultMerge = "sum";

}  // namespace asgd
