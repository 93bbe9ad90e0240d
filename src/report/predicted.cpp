#include "report/predicted.hpp"

#include <fmt/format.h>

#include <cmath>

#include "common/nesting.hpp"

namespace asgd::report::detail {

namespace {

// The fields that make a run virtual: what is left is the configuration
// the real and the virtual runs share.
constexpr const char* kVirtualFields[] = {"virtual", "timing", "compute_s", "compute_cv", "comm_s",
                                          "straggler", "straggler_factor", "profile"};

std::string shared_key(const RunInfo& r) {
  if (!r.config.is_object()) return "";
  json k = parse_json_bounded<json>(r.key);
  if (!k.is_object()) return "";
  for (const char* f : kVirtualFields) k.erase(f);
  return k.dump();
}

struct Pair {
  const ConfigGroup *real, *virt;
};

std::vector<Pair> pairs(const std::vector<ConfigGroup>& groups) {
  std::vector<Pair> out;
  for (const auto& v : groups) {
    if (v.rep().mode != RunMode::virtual_learners || v.samples_per_s.state != Agg::State::number) continue;
    const std::string key = shared_key(v.rep());
    if (key.empty()) continue;
    for (const auto& r : groups)
      if (r.rep().mode == RunMode::real && r.samples_per_s.state == Agg::State::number && shared_key(r.rep()) == key)
        out.push_back({&r, &v});
  }
  return out;
}

std::string tau(double t) { return std::isfinite(t) ? fmt::format("{:.3f}", t) : "–"; }

}  // namespace

std::string predicted_md(const std::vector<ConfigGroup>& groups) {
  const auto ps = pairs(groups);
  if (ps.empty()) return "";
  Table t;
  t.header = {"model", "protocol", "L", "n", "n_sync", "batch", "measured samples/s", "predicted (modelled)", "ratio",
              "measured mean tau", "predicted", "timing model"};
  for (const auto& p : ps) {
    const RunInfo& r = p.real->rep();
    const double m = p.real->samples_per_s.iv.mean, v = p.virt->samples_per_s.iv.mean;
    t.rows.push_back({r.model, r.protocol, std::to_string(r.learners), r.n, r.n_sync, r.batch,
                      fmt::format("{:.1f} (n={})", m, p.real->runs.size()), fmt::format("{:.1f}", v),
                      fmt::format("{:.3f}", v / m), tau(p.real->mean_tau), tau(p.virt->mean_tau),
                      p.virt->rep().timing_model});
  }
  return "## Predicted against measured\n\nConfigurations with both real runs and virtual runs: the virtual runs' "
         "samples/s and mean staleness are the performance model's prediction (modelled, with the timing model "
         "named); samples/s are `/summary/samples_per_s` means over the runs. Table: "
         "[predicted.csv](predicted.csv).\n\n" +
         to_markdown(t) + "\n";
}

Table predicted_csv(const std::vector<ConfigGroup>& groups) {
  Table t;
  t.header = {"real_config", "virtual_config", "measured_samples_per_s", "predicted_samples_per_s", "ratio",
              "measured_mean_tau", "predicted_mean_tau", "timing_model"};
  for (const auto& p : pairs(groups)) {
    const double m = p.real->samples_per_s.iv.mean, v = p.virt->samples_per_s.iv.mean;
    t.rows.push_back({p.real->id, p.virt->id, num(m), num(v), num(v / m), num(p.real->mean_tau),
                      num(p.virt->mean_tau), p.virt->rep().timing_model});
  }
  return t;
}

}  // namespace asgd::report::detail
