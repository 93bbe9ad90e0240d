#include "report/analysis.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "common/defaults.hpp"

namespace asgd::report::detail {

namespace {

// Numbers sort as numbers, text after them, absent fields last.
struct SortField {
  double number;
  std::string text;
  auto operator<=>(const SortField&) const = default;
};
SortField sort_field(const std::string& s) {
  if (s.empty()) return {HUGE_VAL, "\x7f"};
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end && *end == '\0') return {v, ""};
  return {HUGE_VAL, s};
}

auto sort_key(const RunInfo& r) {
  return std::make_tuple(r.model, r.mode, r.dataset, r.protocol, r.lr_policy, sort_field(r.batch), sort_field(r.n),
                         sort_field(r.n_sync), r.learners, r.key);
}

// Top-level config fields a and b have in common (same value), skipping the
// fields named in skip and those that never make a configuration.
int common_fields(const json& a, const json& b, std::initializer_list<const char*> skip) {
  if (!a.is_object() || !b.is_object()) return 0;
  int n = 0;
  for (auto it = a.begin(); it != a.end(); ++it) {
    const std::string& k = it.key();
    bool skipped = std::any_of(std::begin(kNonKeyFields), std::end(kNonKeyFields), [&](const char* f) { return k == f; });
    skipped = skipped || std::any_of(skip.begin(), skip.end(), [&](const char* f) { return k == f; });
    if (skipped) continue;
    const auto jt = b.find(k);
    if (jt != b.end() && *jt == it.value()) ++n;
  }
  return n;
}

Value state_of(const RunInfo& r) {
  return Value::of_state(r.diverged() ? Agg::State::diverged : Agg::State::failed);
}

// A run's own figure: the number when it completed, else why there is none.
Value run_value(const RunInfo& r, double x) { return r.completed() ? Value::number(x) : state_of(r); }

// A modelled (virtual) time is never divided by a measured one: the mode is part of the key.
std::string index_key(const RunInfo& r) {
  return r.suite + '\x1f' + r.model + '\x1f' + r.seed + '\x1f' + std::string(to_text(r.mode));
}

}  // namespace

std::string config_label(const ConfigGroup& g) {
  const RunInfo& r = g.rep();
  std::string s = fmt::format("{} L={}", r.protocol, r.learners);
  if (r.protocol == "softsync" && !r.n.empty()) s += " n=" + r.n;
  if (r.protocol == "nsync" && !r.n_sync.empty()) s += " n_sync=" + r.n_sync;
  if (!r.lr_policy.empty()) s += " lr=" + r.lr_policy;
  if (!r.batch.empty()) s += " batch=" + r.batch;
  if (!r.merge.empty() && r.merge != kDefaultMerge) s += " merge=" + r.merge;
  if (r.warm) s += " warm";
  return s;
}

namespace {

using Index = std::map<std::string, std::vector<const RunInfo*>>;  // suite, model, seed, mode -> 1-learner runs

// Readable runs grouped by configuration key, runs by seed, groups in report order.
std::vector<ConfigGroup> group_runs(const std::vector<RunInfo>& runs, Index& one_learner) {
  std::map<std::string, std::vector<const RunInfo*>> by_key;
  for (const auto& r : runs) {
    if (!r.readable) continue;
    by_key[r.key].push_back(&r);
    if (r.learners == 1) one_learner[index_key(r)].push_back(&r);
  }
  std::vector<ConfigGroup> groups;
  groups.reserve(by_key.size());
  for (auto& [key, members] : by_key) {
    ConfigGroup g;
    g.key = key;
    g.id = members.front()->config_id;
    g.runs = members;
    std::stable_sort(g.runs.begin(), g.runs.end(),
                     [](const RunInfo* a, const RunInfo* b) { return sort_field(a->seed) < sort_field(b->seed); });
    groups.push_back(std::move(g));
  }
  std::sort(groups.begin(), groups.end(),
            [](const ConfigGroup& a, const ConfigGroup& b) { return sort_key(a.rep()) < sort_key(b.rep()); });
  return groups;
}

// Baseline: a 1-learner run of the same suite, model, seed and mode; a completed
// one first (a diverged run is no baseline while another exists), then the
// same protocol, then the most config fields in common; ties go to the first
// file. nullptr: none.
const RunInfo* baseline_of(const RunInfo& r, const Index& one_learner) {
  const RunInfo* base = nullptr;
  std::tuple<bool, bool, int> base_score{};
  if (auto it = one_learner.find(index_key(r)); it != one_learner.end()) {
    for (const RunInfo* c : it->second) {
      const std::tuple<bool, bool, int> score{c->completed(), c->protocol == r.protocol,
                                              common_fields(r.config, c->config, {"learners", "protocol"})};
      if (!base || score > base_score) {
        base = c;
        base_score = score;
      }
    }
  }
  return base;
}

// t1 / tl when both are finite and tl > 0; blank otherwise.
Value ratio(double t1, double tl) {
  return std::isfinite(t1) && std::isfinite(tl) && tl > 0 ? Value::number(t1 / tl) : Value{};
}

// What a group's speedups stand on, where not every seed has a completed baseline.
std::string speedup_note(const ConfigGroup& g, std::size_t missing_baseline, bool baseline_not_completed) {
  std::vector<std::string> notes;
  if (missing_baseline > 0 && missing_baseline == static_cast<std::size_t>(g.completed))
    notes.push_back("no 1-learner baseline");
  else if (missing_baseline > 0)  // the figure stands on the seeds that have one
    notes.push_back(fmt::format("{} of {} seeds without a 1-learner baseline", missing_baseline, g.runs.size()));
  if (baseline_not_completed) notes.push_back("1-learner baseline diverged or failed");
  if (g.diverged > 0 && g.completed > 0) notes.push_back(fmt::format("{} of {} seeds diverged", g.diverged, g.runs.size()));
  std::string out;
  for (const auto& n : notes) out += (out.empty() ? "" : "; ") + n;
  return out;
}

// One group's aggregates over its runs, speedups against their baselines.
void summarise(ConfigGroup& g, const Index& one_learner) {
  std::vector<Value> tt, trt, tp, ttt, ttr, sps, fin, best, smooth;
  std::vector<double> taus;
  std::size_t missing_baseline = 0;  // completed runs without a baseline
  bool baseline_not_completed = false;
  for (const RunInfo* rp : g.runs) {
    const RunInfo& r = *rp;
    g.completed += r.completed();
    g.diverged += r.diverged();
    g.failed += r.failed();
    fin.push_back(run_value(r, r.summary.final_test_error));
    best.push_back(run_value(r, r.summary.best_test_error));
    smooth.push_back(run_value(r, r.smoothed_train_error));
    ttt.push_back(run_value(r, r.summary.time_to_target_s));
    ttr.push_back(run_value(r, r.time_to_train_target));
    sps.push_back(run_value(r, r.summary.samples_per_s > 0 ? r.summary.samples_per_s : kNaN));
    if (std::isfinite(r.mean_tau)) taus.push_back(r.mean_tau);
    if (g.histogram.size() < r.histogram.size()) g.histogram.resize(r.histogram.size(), 0);
    for (std::size_t t = 0; t < r.histogram.size(); ++t) g.histogram[t] += r.histogram[t];

    const RunInfo* base = baseline_of(r, one_learner);
    Value speed_tt, speed_trt, speed_tp;  // blank unless computed below
    if (!r.completed()) {
      speed_tt = speed_trt = speed_tp = state_of(r);
    } else if (!base) {
      ++missing_baseline;
    } else {
      if (std::find(g.baselines.begin(), g.baselines.end(), base->run_id) == g.baselines.end())
        g.baselines.push_back(base->run_id);
      if (!base->completed()) {
        baseline_not_completed = true;
        speed_tt = speed_trt = speed_tp = state_of(*base);
      } else {
        speed_tt = ratio(base->summary.time_to_target_s, r.summary.time_to_target_s);
        speed_trt = ratio(base->time_to_train_target, r.time_to_train_target);
        const double p1 = base->summary.samples_per_s, pl = r.summary.samples_per_s;
        if (std::isfinite(p1) && std::isfinite(pl) && p1 > 0 && pl > 0) speed_tp = Value::number(pl / p1);
      }
    }
    tt.push_back(speed_tt);
    trt.push_back(speed_trt);
    tp.push_back(speed_tp);
  }
  g.tt_speedup = aggregate(tt);
  g.train_tt_speedup = aggregate(trt);
  g.time_to_train_target = aggregate(ttr);
  g.tp_speedup = aggregate(tp);
  g.time_to_target = aggregate(ttt);
  g.samples_per_s = aggregate(sps);
  g.final_error = aggregate(fin);
  g.best_error = aggregate(best);
  g.smoothed_error = aggregate(smooth);
  if (!taus.empty()) g.mean_tau = mean_ci95(taus).mean;
  const std::string note = speedup_note(g, missing_baseline, baseline_not_completed);
  if (!note.empty()) g.speedup_note += (g.speedup_note.empty() ? "" : "; ") + note;
}

// Gap to hardsync at the same model, mode and learner count; among several
// hardsync configurations the one with the most config fields in common.
void hardsync_gaps(std::vector<ConfigGroup>& groups) {
  std::map<std::string, std::vector<const ConfigGroup*>> hardsync;
  auto hs_key = [](const RunInfo& r) {
    return r.model + '\x1f' + std::string(to_text(r.mode)) + '\x1f' + std::to_string(r.learners);
  };
  for (const auto& g : groups)
    if (g.rep().protocol == "hardsync") hardsync[hs_key(g.rep())].push_back(&g);
  for (auto& g : groups) {
    const auto it = hardsync.find(hs_key(g.rep()));
    if (it == hardsync.end()) continue;
    int best_score = -1;
    for (const ConfigGroup* h : it->second) {
      const int score = &g == h ? 1 << 20
                                : common_fields(g.rep().config, h->rep().config,
                                                {"learners", "protocol", "softsync_n", "n_sync"});
      if (score > best_score) {
        best_score = score;
        g.hardsync = h;
      }
    }
    const Agg& mine = g.final_error;
    const Agg& theirs = g.hardsync->final_error;
    if (mine.state == Agg::State::number && theirs.state == Agg::State::number) {
      g.gap.state = Agg::State::number;
      g.gap.iv.mean = mine.iv.mean - theirs.iv.mean;
      g.gap.iv.n = 1;  // a difference of means: no interval
    } else if (mine.state != Agg::State::number && mine.state != Agg::State::blank) {
      g.gap.state = mine.state;
    } else if (theirs.state != Agg::State::number && theirs.state != Agg::State::blank) {
      g.gap.state = theirs.state;
    }
  }
}

}  // namespace

std::vector<ConfigGroup> analyse(const std::vector<RunInfo>& runs) {
  Index one_learner;
  std::vector<ConfigGroup> groups = group_runs(runs, one_learner);
  for (auto& g : groups) summarise(g, one_learner);
  hardsync_gaps(groups);
  return groups;
}

}  // namespace asgd::report::detail
