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

// Each seed's smoothed (400-minibatch) training error at time t (seeds
// without a row that early left out).
std::vector<double> errors_at(const ConfigGroup& g, double t) {
  std::vector<double> v;
  for (const RunInfo* r : seed_runs(g)) {
    const double e = smoothed_train_error_at(r->updates, t, kSmoothingWindow, r->per_gradient);
    if (!std::isnan(e)) v.push_back(e);
  }
  return v;
}

// Each seed's fall of that error from t1 to t2 (seeds with both).
std::vector<double> falls(const ConfigGroup& g, double t1, double t2) {
  std::vector<double> v;
  for (const RunInfo* r : seed_runs(g)) {
    const double a = smoothed_train_error_at(r->updates, t1, kSmoothingWindow, r->per_gradient),
                 b = smoothed_train_error_at(r->updates, t2, kSmoothingWindow, r->per_gradient);
    if (!std::isnan(a) && !std::isnan(b)) v.push_back(a - b);
  }
  return v;
}

// "18.2% [17.9, 18.5]" of fractions, "–" when there are none.
std::string pct(const std::vector<double>& v) {
  if (v.empty()) return "–";
  Agg a;
  a.state = Agg::State::number;
  a.iv = mean_ci95(v);
  return agg_md(a, true, 1);
}

// "7.9 pp [-10.3, 26.2]" of fractions (a difference or an amplitude).
std::string pp(const std::vector<double>& v) {
  if (v.empty()) return "–";
  const Interval iv = mean_ci95(v);
  if (iv.n < 2) return fmt::format("{:.2f} pp (n=1)", 100 * iv.mean);
  return fmt::format("{:.2f} pp [{:.2f}, {:.2f}]", 100 * iv.mean, 100 * iv.lo, 100 * iv.hi);
}

// Merges of pushes per client landed by time t (update rows with wall_s <=
// t, over the learner count; the mean over seeds), and the time of the
// L-th merge (every client had pushed once by then when all start together).
std::string merges_by(const ConfigGroup& g, double t) {
  double per = 0, full = kNaN;
  int n = 0;
  const int L = std::max(1, g.rep().learners);
  for (const RunInfo* r : seed_runs(g)) {
    const auto landed = std::upper_bound(r->updates.begin(), r->updates.end(), t,
                                         [](double at, const io::UpdateRecord& u) { return at < u.wall_s; });
    per += static_cast<double>(landed - r->updates.begin()) / L, ++n;
    if (r->updates.size() >= static_cast<std::size_t>(L)) {
      const double at = r->updates[static_cast<std::size_t>(L) - 1].wall_s;
      full = std::isnan(full) ? at : std::max(full, at);
    }
  }
  if (n == 0) return "–";
  return fmt::format("L={} {:.2g}{}", L, per / n, std::isnan(full) ? "" : fmt::format(" (L-th merge at {:.3g} s)", full));
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

// The single learner most like g: the same settings but learners and the
// merge rule, else also another n_sync; null when none is.
const ConfigGroup* single_like(const ConfigGroup& g, const Groups& ones) {
  for (const std::vector<const char*>& drop :
       {std::vector<const char*>{"learners", "merge", "server_lr", "server_momentum"},
        std::vector<const char*>{"learners", "n_sync", "merge", "server_lr", "server_momentum"}})
    for (const auto* o : ones)
      if (family_key(*o, drop) == family_key(g, drop)) return o;
  return nullptr;
}

}  // namespace

void train_error_rows(const json& claim, const Groups& all, ClaimRows& out) {
  const auto by = claim.find("values_by_learners");
  if (by == claim.end() || !by->is_object()) return out.none("ours: the claim has no values_by_learners");
  Groups many, ones;
  for (const auto* g : all) {
    const RunInfo& r = g->rep();
    if (!by->contains(std::to_string(r.learners)) || !warm_match(claim, r)) continue;
    if (r.learners == 1) ones.push_back(g);
    else if (value_match(claim, "n_sync", number_of(r.n_sync))) many.push_back(g);
  }
  for (const auto* g : many) {
    const ConfigGroup* one = single_like(*g, ones);
    const double t = one ? std::min(end_time(*g), end_time(*one)) : end_time(*g);
    const auto mine = errors_at(*g, t), single = one ? errors_at(*one, t) : std::vector<double>{};
    std::string ours = fmt::format("ours: smoothed training error at t = {:.3g} s ({}): ", t, clock_name(*g));
    if (one) ours += fmt::format("L=1 {}, ", pct(single));
    ours += fmt::format("L={} {}", g->rep().learners, pct(mine));
    const Judged j = one ? positive(diff_ci95(single, mine),
                                    fmt::format("L=1 minus L={}", g->rep().learners), kPoints)
                         : Judged{Verdict::not_tested, "no single learner of this setting"};
    out.add(ours, j, data_of(*g), config_label(*g) + ", " + seeds_text(*g));
  }
  if (many.empty()) out.none("ours: no matching configuration in this suite");
}

namespace {

// The early error and late fall of each learner count of a family, the
// slowest early and the steepest late (by mean), and the merges landed by
// the early time.
std::string early_late_text(const Groups& fam, double t) {
  std::string early, late, merges;
  const ConfigGroup* slowest = nullptr;
  const ConfigGroup* steepest = nullptr;
  double worst = -1, drop_best = -1e9;
  for (const auto* g : fam) {
    const auto e = errors_at(*g, t / 10), d = falls(*g, t / 2, t);
    const int L = g->rep().learners;
    early += fmt::format("{}L={} {}", early.empty() ? "" : ", ", L, pct(e));
    late += fmt::format("{}L={} {}", late.empty() ? "" : ", ", L, pp(d));
    merges += (merges.empty() ? "" : ", ") + merges_by(*g, t / 10);
    if (!e.empty() && mean_ci95(e).mean > worst) worst = mean_ci95(e).mean, slowest = g;
    if (!d.empty() && mean_ci95(d).mean > drop_best) drop_best = mean_ci95(d).mean, steepest = g;
  }
  std::string ours = fmt::format("ours ({}): smoothed training error early, at t = {:.3g} s: {}; fall from t = "
                                 "{:.3g} s to {:.3g} s: {}; merges per client by the early time: {}",
                                 clock_name(*fam.back()), t / 10, early, t / 2, t, late, merges);
  if (slowest) ours += fmt::format(". Slowest early: L={}", slowest->rep().learners);
  if (steepest) ours += fmt::format("; steepest late: L={}", steepest->rep().learners);
  return ours;
}

// The early-error part of the cold-start claim: every seed of both must
// have a merge landed by the early time (a seed with none is itself a sign
// of being slow, so it is named rather than left out).
Judged early_verdict(const ConfigGroup& many, const ConfigGroup& few, double t, const std::string& who) {
  const auto a = errors_at(many, t), b = errors_at(few, t);
  const std::size_t na = seed_runs(many).size(), nb = seed_runs(few).size();
  if (a.size() < na || b.size() < nb)
    return {Verdict::undecided, fmt::format("no merge had landed by the early time in {} of {} seeds of L={} and {} of "
                                            "{} of L={}", na - a.size(), na, many.rep().learners, nb - b.size(), nb,
                                            few.rep().learners)};
  return positive(diff_ci95(a, b), "early error " + who, kPoints);
}

}  // namespace

void early_late_rows(const json& claim, const Groups& all, ClaimRows& out) {
  Groups gs, ones;
  for (const auto* g : all) {
    if (!nsync(*g) || !warm_match(claim, g->rep())) continue;
    (g->rep().learners == 1 ? ones : gs).push_back(g);
  }
  for (Groups fam : families(gs, {"learners"})) {
    if (const ConfigGroup* o = single_like(*fam.front(), ones)) fam.insert(fam.begin(), o);
    std::sort(fam.begin(), fam.end(), [](auto* a, auto* b) { return a->rep().learners < b->rep().learners; });
    double t = kNaN;
    for (const auto* g : fam) t = std::isnan(t) ? end_time(*g) : std::min(t, end_time(*g));
    if (fam.size() < 2 || !std::isfinite(t)) continue;
    // the claim: its learner count above the fewest early, and falling faster late
    const ConfigGroup* many = nullptr;
    for (const auto* g : fam)
      if (g != fam.front() && learners_match(claim, g->rep().learners)) many = g;
    const ConfigGroup& few = *fam.front();
    Judged j{Verdict::not_tested, "no run at the claimed learner count in this setting"};
    if (many) {
      const std::string who = fmt::format("L={} minus L={}", many->rep().learners, few.rep().learners);
      j = both(early_verdict(*many, few, t / 10, who),
               positive(diff_ci95(falls(*many, t / 2, t), falls(few, t / 2, t)), "late fall " + who, kPoints));
    }
    const ConfigGroup& shown = many ? *many : *fam.back();
    out.add(early_late_text(fam, t), j, data_of(shown), family_label(shown, false, true) + ", " + seeds_text(shown));
  }
  if (out.rows.empty()) out.none("ours: no nsync configurations at two or more learner counts");
}

namespace {

// The family member at n_sync v, else null.
const ConfigGroup* at_n_sync(const Groups& fam, double v) {
  for (const auto* g : fam)
    if (number_of(g->rep().n_sync) == v) return g;
  return nullptr;
}

double claimed_n_sync(const json& claim) {
  const auto it = claim.find("n_sync");
  return it != claim.end() && it->is_array() && !it->empty() && (*it)[0].is_number() ? (*it)[0].get<double>() : kNaN;
}

std::vector<double> amplitudes(const ConfigGroup& g, bool less_noise) {
  std::vector<double> v;
  for (const RunInfo* r : seed_runs(g))
    if (std::isfinite(r->sawtooth.amplitude))
      v.push_back(r->sawtooth.amplitude - (less_noise ? r->sawtooth.noise : 0));
  return v;
}

}  // namespace

void n_sync_order_rows(const json& claim, const Groups& all, ClaimRows& out) {
  Groups gs;
  for (const auto* g : all)
    if (nsync(*g) && g->rep().learners > 1) gs.push_back(g);
  const double best_claimed = claimed_n_sync(claim);
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
    if (best) ours += fmt::format("; lowest mean at n_sync {}", best->rep().n_sync);
    std::vector<Judged> parts;
    const ConfigGroup* claimed = at_n_sync(fam, best_claimed);
    for (const auto* g : fam) {
      if (!claimed || g == claimed || !value_match(claim, "n_sync", number_of(g->rep().n_sync))) continue;
      Judged p = positive(diff_ci95(final_errors(*g), final_errors(*claimed)),
                          fmt::format("n_sync {} minus {}", g->rep().n_sync, claimed->rep().n_sync), kPoints);
      for (const auto* d : {g, claimed})
        if (d->diverged > 0) p.why += fmt::format(" (n_sync {}: {} seeds diverged)", d->rep().n_sync, d->diverged);
      parts.push_back(p);
    }
    Judged j = all_of(parts);
    if (!claimed) j = {Verdict::not_tested, "no run at the claimed n_sync"};
    else if (parts.empty()) j = {Verdict::not_tested, "no other n_sync the claim names in this setting"};
    out.add("ours: final test error " + ours, j, data_of(*fam.front()),
            family_label(*fam.front(), true, false) + ", " + seeds_text(*fam.front()));
  }
  if (gs.empty()) out.none("ours: no nsync configuration with more than one learner in this suite");
}

void saw_tooth_rows(const json& claim, const Groups& all, ClaimRows& out) {
  Groups gs;
  for (const auto* g : all)
    if (nsync(*g) && g->rep().learners > 1 && g->rep().per_gradient > 1) gs.push_back(g);
  const double claimed_at = claimed_n_sync(claim);
  for (Groups fam : families(gs, {"n_sync"})) {
    std::sort(fam.begin(), fam.end(),
              [](auto* a, auto* b) { return number_of(a->rep().n_sync) < number_of(b->rep().n_sync); });
    std::string ours;
    for (const auto* g : fam) {
      const auto a = amplitudes(*g, false), noise_left = amplitudes(*g, true);
      ours += fmt::format("{}n_sync {}: {}", ours.empty() ? "" : ", ", g->rep().n_sync,
                          a.empty() ? std::string("no minibatch errors recorded")
                                    : fmt::format("{} (noise {:.2f} pp)", pp(a),
                                                  100 * (mean_ci95(a).mean - mean_ci95(noise_left).mean)));
    }
    const ConfigGroup* at = at_n_sync(fam, claimed_at);
    const ConfigGroup* low = fam.front();
    Judged j{Verdict::not_tested, "no run at the claimed n_sync and a shorter one"};
    if (at && at != low)
      j = both(positive(mean_ci95(amplitudes(*at, true)), "amplitude minus noise at n_sync " + at->rep().n_sync, kPoints),
               positive(diff_ci95(amplitudes(*at, false), amplitudes(*low, false)),
                        fmt::format("amplitude at n_sync {} minus {}", at->rep().n_sync, low->rep().n_sync), kPoints));
    out.add("ours: amplitude of the periodic component at period n_sync of the minibatch training error "
            "(second half of training): " + ours,
            j, data_of(*fam.front()), family_label(*fam.front(), true, false) + ", " + seeds_text(*fam.front()));
  }
  if (gs.empty()) out.none("ours: no nsync configuration with more than one learner and n_sync > 1");
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
      const auto kind = claim.is_object() ? claim.find("kind") : claim.end();
      if (!claim.is_object() || kind == claim.end() || !kind->is_string() || kind->get<std::string>() != "speedup") continue;
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
