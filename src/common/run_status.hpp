#pragma once
// How a run ended and whose clock timed it. Enums everywhere in the code; the
// words below are what results files, tables and messages hold, written and
// read only through to_text and parse_*.
#include <optional>
#include <string_view>

namespace asgd {

enum class RunStatus { completed, diverged, failed };
// real: ranks trained and the wall clock timed them; virtual_learners: the
// performance model's clock timed them (gradients still computed for real)
enum class RunMode { real, virtual_learners };

constexpr std::string_view to_text(RunStatus s) {
  switch (s) {
    case RunStatus::completed: return "completed";
    case RunStatus::diverged: return "diverged";
    case RunStatus::failed: return "failed";
  }
  return "failed";
}

constexpr std::string_view to_text(RunMode m) { return m == RunMode::real ? "real" : "virtual"; }

constexpr std::optional<RunStatus> parse_run_status(std::string_view s) {
  for (RunStatus v : {RunStatus::completed, RunStatus::diverged, RunStatus::failed})
    if (s == to_text(v)) return v;
  return std::nullopt;
}

constexpr std::optional<RunMode> parse_run_mode(std::string_view s) {
  for (RunMode v : {RunMode::real, RunMode::virtual_learners})
    if (s == to_text(v)) return v;
  return std::nullopt;
}

}  // namespace asgd
