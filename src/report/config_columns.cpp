#include "report/config_columns.hpp"

#include <fmt/format.h>

#include <map>
#include <set>

namespace asgd::report::detail {

std::vector<std::string> other_settings(const std::vector<ConfigGroup>& groups) {
  static const std::set<std::string> shown = {"model",   "protocol", "learners", "softsync_n", "n_sync", "lr_policy",
                                              "batch",   "seed",     "run_id",   "results_dir", "suite", "threads",
                                              "virtual"};
  // field -> its values; a field left at its default is absent from a config (counted as "")
  std::map<std::string, std::set<std::string>> values;
  std::map<std::string, std::size_t> present;
  std::size_t objects = 0;
  for (const auto& g : groups) {
    const json& c = g.rep().config;
    if (!c.is_object()) continue;
    ++objects;
    for (auto it = c.begin(); it != c.end(); ++it)
      if (!shown.count(it.key())) {
        values[it.key()].insert(it->dump());
        ++present[it.key()];
      }
  }
  for (auto& [key, seen] : values)
    if (present[key] < objects) seen.insert("");
  std::vector<std::string> out(groups.size());
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const json& c = groups[i].rep().config;
    if (!c.is_object()) continue;
    for (const auto& [key, seen] : values) {
      if (seen.size() < 2 || !c.contains(key)) continue;
      out[i] += (out[i].empty() ? "" : " ") + key + "=" + value_text(c[key]);
    }
  }
  return out;
}

namespace {

std::vector<std::string> md_config_cells(const ConfigGroup& g) {
  const RunInfo& r = g.rep();
  std::string seeds = std::to_string(g.runs.size());
  if (g.diverged || g.failed) seeds += fmt::format(" ({} diverged, {} failed)", g.diverged, g.failed);
  return {r.model, std::string(to_text(r.mode)), r.protocol, std::to_string(r.learners), r.n, r.n_sync, r.lr_policy, r.batch, seeds};
}
const std::vector<std::string> kMdConfigHeader = {"model", "mode", "protocol", "L", "n", "n_sync", "lr policy",
                                                  "batch", "seeds"};

}  // namespace

ConfigColumns::ConfigColumns(const std::vector<ConfigGroup>& groups) : other(other_settings(groups)) {
  for (const auto& o : other) any = any || !o.empty();
}

std::vector<std::string> ConfigColumns::header() const {
  auto h = kMdConfigHeader;
  if (any) h.push_back("other settings");
  return h;
}

std::vector<std::string> ConfigColumns::cells(const std::vector<ConfigGroup>& groups, std::size_t i) const {
  auto c = md_config_cells(groups[i]);
  if (any) c.push_back(other[i].empty() ? "–" : other[i]);
  return c;
}

}  // namespace asgd::report::detail
