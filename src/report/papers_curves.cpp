// Claims about learning curves (papers_detail.hpp): Paine et al.'s training
// error of 8 clients against 1 at the same time, many clients slower early
// and steeper later, n_sync's order and the saw-tooth at a long interval.
// Times are each run's training clock: modelled for virtual runs.
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "common/defaults.hpp"
#include "report/papers_detail.hpp"

namespace asgd::report::detail {

std::string family_key(const ConfigGroup& g, const std::vector<const char*>& drop) {
  json c = g.rep().config;
  if (!c.is_object()) return g.key;
  for (const char* name : drop) c.erase(name);
  return config_key(c);
}

double end_time(const ConfigGroup& g) {
  double t = kNaN;
  for (const RunInfo* r : g.runs) {
    if (r->updates.empty() || !std::isfinite(r->updates.back().wall_s)) continue;
    t = std::isnan(t) ? r->updates.back().wall_s : std::min(t, r->updates.back().wall_s);
  }
  return t;
}

namespace {

// Smoothed (400-minibatch) training error at time t, over the group's seeds.
Agg error_at(const ConfigGroup& g, double t) {
  std::vector<Value> v;
  for (const RunInfo* r : g.runs) {
    const double e = smoothed_train_error_at(r->updates, t, 400, r->per_gradient);
    v.push_back(std::isnan(e) ? Value::of_state(Agg::State::blank) : Value::number(e));
  }
  return aggregate(v);
}

std::string pct(const Agg& a) {
  if (a.state != Agg::State::number) return a.text().empty() ? "–" : a.text();
  return fmt::format("{:.1f}%", 100 * a.iv.mean);
}

std::string clock_name(const ConfigGroup& g) {
  const RunInfo& r = g.rep();
  if (r.mode != RunMode::virtual_learners) return "measured time";
  return "modelled time" + (r.timing_model.empty() ? std::string() : ", " + r.timing_model);
}

// "nsync n_sync=100 merge=mean cold": a family's setting (learners varying).
std::string family_label(const ConfigGroup& g, bool with_learners, bool with_n_sync) {
  const RunInfo& r = g.rep();
  std::string s = r.protocol;
  if (with_learners) s += fmt::format(" L={}", r.learners);
  if (with_n_sync && !r.n_sync.empty()) s += " n_sync=" + r.n_sync;
  if (!r.batch.empty()) s += " batch=" + r.batch;
  s += " merge=" + (r.merge.empty() ? std::string(kDefaultMerge) : r.merge);
  return s + (r.warm ? " warm" : " cold");
}

// Groups by family (the key without `drop`), each family's groups in report order.
std::vector<Groups> families(const Groups& gs, const std::vector<const char*>& drop) {
  std::map<std::string, std::size_t> at;
  std::vector<Groups> out;
  for (const auto* g : gs) {
    const std::string k = family_key(*g, drop);
    const auto [it, fresh] = at.emplace(k, out.size());
    if (fresh) out.emplace_back();
    out[it->second].push_back(g);
  }
  return out;
}

bool nsync(const ConfigGroup& g) { return g.rep().protocol == "nsync"; }

}  // namespace

void train_error_rows(const json& claim, const Groups& all, ClaimRows& out) {
  const auto by = claim.find("values_by_learners");
  if (by == claim.end() || !by->is_object()) return out.add("ours: the claim has no values_by_learners", "", "");
  Groups many, ones;
  for (const auto* g : all) {
    const RunInfo& r = g->rep();
    if (!by->contains(std::to_string(r.learners)) || !warm_match(claim, r)) continue;
    if (r.learners == 1) ones.push_back(g);
    else if (value_match(claim, "n_sync", number_of(r.n_sync))) many.push_back(g);
  }
  for (const auto* g : many) {
    // the single learner most like it: same everything but learners, n_sync and merge
    const ConfigGroup* one = nullptr;
    const std::vector<const char*> drop{"learners", "n_sync", "merge", "server_lr", "server_momentum"};
    for (const auto* o : ones)
      if (!one || family_key(*o, drop) == family_key(*g, drop)) one = o;
    const double t = one ? std::min(end_time(*g), end_time(*one)) : end_time(*g);
    std::string ours = fmt::format("ours: smoothed training error at t = {:.3g} s ({}): ", t, clock_name(*g));
    if (one) ours += fmt::format("L=1 {}, ", pct(error_at(*one, t)));
    ours += fmt::format("L={} {}", g->rep().learners, pct(error_at(*g, t)));
    out.add(ours, data_of(*g), config_label(*g) + ", " + seeds_text(*g));
  }
  if (many.empty()) out.add("ours: no matching configuration in this suite", "", "");
}

void early_late_rows(const json& claim, const Groups& all, ClaimRows& out) {
  Groups gs, ones;
  for (const auto* g : all) {
    if (!nsync(*g) || !warm_match(claim, g->rep())) continue;
    (g->rep().learners == 1 ? ones : gs).push_back(g);
  }
  const std::vector<const char*> drop_one{"learners", "n_sync", "merge", "server_lr", "server_momentum"};
  for (Groups fam : families(gs, {"learners"})) {
    for (const auto* o : ones)  // the single learner of this setting
      if (family_key(*o, drop_one) == family_key(*fam.front(), drop_one)) {
        fam.insert(fam.begin(), o);
        break;
      }
    std::sort(fam.begin(), fam.end(), [](auto* a, auto* b) { return a->rep().learners < b->rep().learners; });
    double t = kNaN;
    for (const auto* g : fam) t = std::isnan(t) ? end_time(*g) : std::min(t, end_time(*g));
    if (fam.size() < 2 || !std::isfinite(t)) continue;
    std::string early, late;
    const ConfigGroup* slowest = nullptr;
    const ConfigGroup* steepest = nullptr;
    double worst = -1, drop_best = -1e9;
    for (const auto* g : fam) {
      const Agg e = error_at(*g, t / 10), mid = error_at(*g, t / 2), end = error_at(*g, t);
      early += fmt::format("{}L={} {}", early.empty() ? "" : ", ", g->rep().learners, pct(e));
      const bool both = mid.state == Agg::State::number && end.state == Agg::State::number;
      const double d = both ? 100 * (mid.iv.mean - end.iv.mean) : kNaN;
      late += fmt::format("{}L={} {}", late.empty() ? "" : ", ", g->rep().learners,
                          both ? fmt::format("{:.1f} pp", d) : std::string("–"));
      if (e.state == Agg::State::number && e.iv.mean > worst) worst = e.iv.mean, slowest = g;
      if (both && d > drop_best) drop_best = d, steepest = g;
    }
    std::string ours = fmt::format("ours ({}): smoothed training error early, at t = {:.3g} s: {}; fall from t = "
                                   "{:.3g} s to {:.3g} s: {}",
                                   clock_name(*fam.back()), t / 10, early, t / 2, t, late);
    if (slowest) ours += fmt::format(". Slowest early: L={}", slowest->rep().learners);
    if (steepest) ours += fmt::format("; steepest late: L={}", steepest->rep().learners);
    out.add(ours, data_of(*fam.back()), family_label(*fam.back(), false, true));
  }
  if (out.rows.empty()) out.add("ours: no nsync configurations at two or more learner counts", "", "");
}

void n_sync_order_rows(const Groups& all, ClaimRows& out) {
  Groups gs;
  for (const auto* g : all)
    if (nsync(*g) && g->rep().learners > 1) gs.push_back(g);
  for (Groups fam : families(gs, {"n_sync"})) {
    std::sort(fam.begin(), fam.end(),
              [](auto* a, auto* b) { return number_of(a->rep().n_sync) < number_of(b->rep().n_sync); });
    std::string ours;
    const ConfigGroup* best = nullptr;
    for (const auto* g : fam) {
      ours += fmt::format("{}n_sync {}: {}", ours.empty() ? "" : ", ", g->rep().n_sync, agg_md(g->final_error, true, 1));
      if (g->final_error.state == Agg::State::number && (!best || g->final_error.iv.mean < best->final_error.iv.mean))
        best = g;
    }
    if (best) ours += fmt::format("; best n_sync {}", best->rep().n_sync);
    out.add("ours: final test error " + ours, data_of(*fam.front()),
            family_label(*fam.front(), true, false) + ", " + seeds_text(*fam.front()));
  }
  if (gs.empty()) out.add("ours: no nsync configuration with more than one learner in this suite", "", "");
}

void saw_tooth_rows(const json& /*claim*/, const Groups& all, ClaimRows& out) {
  Groups gs;
  for (const auto* g : all)
    if (nsync(*g) && g->rep().learners > 1 && g->rep().per_gradient > 1) gs.push_back(g);
  for (Groups fam : families(gs, {"n_sync"})) {
    std::sort(fam.begin(), fam.end(),
              [](auto* a, auto* b) { return number_of(a->rep().n_sync) < number_of(b->rep().n_sync); });
    std::string ours;
    for (const auto* g : fam) {
      double a = 0, noise = 0;
      int n = 0;
      for (const RunInfo* r : g->runs)
        if (std::isfinite(r->sawtooth.amplitude)) a += r->sawtooth.amplitude, noise += r->sawtooth.noise, ++n;
      ours += fmt::format("{}n_sync {}: {}", ours.empty() ? "" : ", ", g->rep().n_sync,
                          n ? fmt::format("{:.2f} pp (noise {:.2f})", 100 * a / n, 100 * noise / n)
                            : std::string("no minibatch errors recorded"));
    }
    out.add("ours: amplitude of the periodic component at period n_sync of the minibatch training error "
            "(second half of training): " + ours,
            data_of(*fam.front()), family_label(*fam.front(), true, false) + ", " + seeds_text(*fam.front()));
  }
  if (gs.empty()) out.add("ours: no nsync configuration with more than one learner and n_sync > 1", "", "");
}

}  // namespace asgd::report::detail

namespace asgd::report::detail {

std::string throughput_table(const json& ref, const Groups& all) {
  // columns: one per clock (each profile of the modelled runs; measured)
  std::vector<std::string> clocks;
  std::map<int, std::map<std::string, const ConfigGroup*>> at;  // L -> clock -> group
  for (const auto* g : all) {
    const RunInfo& r = g->rep();
    const std::string c = r.mode == RunMode::virtual_learners ? "modelled, " + (r.timing_model.empty() ? "ideal clock" : r.timing_model)
                                              : "measured here (" + (r.cpu.empty() ? r.host : r.cpu) + ")";
    if (std::find(clocks.begin(), clocks.end(), c) == clocks.end()) clocks.push_back(c);
    at[r.learners].emplace(c, g);  // the first group of a learner count and clock
  }
  if (at.size() < 2) return "";
  Table t;
  t.header = {"learners", "paper", "paper's data"};
  for (const auto& c : clocks) t.header.push_back("ours, " + c);
  t.header.push_back("our data, model");
  for (const auto& [learners, by_clock] : at) {
    std::string paper, data;
    for (const json& claim : ref["claims"]) {
      if (!claim.is_object() || claim.value("kind", "") != "speedup") continue;
      std::string v;
      if (value_match(claim, "learners", learners) && claim.contains("value_range") && claim["value_range"].is_array() &&
          claim["value_range"].size() == 2 && claim["value_range"][0].is_number() && claim["value_range"][1].is_number())
        v = fmt::format("{:g}x–{:g}x at {}", claim["value_range"][0].get<double>(),
                        claim["value_range"][1].get<double>(), learners);
      else if (claim.contains("value_text") && claim["value_text"].is_string())
        v = claim["value_text"].get<std::string>() + " (up to 30)";
      if (!v.empty()) paper += (paper.empty() ? "" : "; ") + v;
      if (data.empty() && claim.contains("dataset") && claim["dataset"].is_string()) data = claim["dataset"].get<std::string>();
    }
    std::vector<std::string> row{std::to_string(learners), paper.empty() ? "–" : paper,
                                 data.empty() ? "CIFAR10, ImageNet" : data};
    std::string ours_data;
    for (const auto& c : clocks) {
      const auto it = by_clock.find(c);
      row.push_back(it == by_clock.end() ? "–" : learners == 1 ? "1 (baseline)" : agg_md(it->second->tp_speedup, false, 2));
      if (it != by_clock.end() && ours_data.empty()) ours_data = data_of(*it->second);
    }
    row.push_back(ours_data);
    t.rows.push_back(std::move(row));
  }
  return "### Throughput speedup against learners\n\nSamples/s of L learners over samples/s of one learner "
         "of the same suite and clock (a column per clock: modelled runs name their profile; measured runs "
         "the CPU they ran on).\n\n" + to_markdown(t) + "\n";
}

}  // namespace asgd::report::detail
