// The papers' published numbers beside ours, for suites that reproduce them.
// Reference files: results/reference/<paper>.json (fields documented in
// results/reference/README.md).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/error.hpp"
#include "common/nesting.hpp"
#include "report/papers_detail.hpp"

namespace asgd::report::detail {

// A number from a config field's text ("15", "0.5"); NaN if it is not one.
double number_of(const std::string& text) {
  if (text.empty()) return std::nan("");
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  return end && *end == '\0' ? v : std::nan("");
}

// Whether a value is one the claim is about, by the claim's list field
// `name` or its inclusive range field `name`_range; a claim with neither
// field is about every value.
bool value_match(const json& claim, const std::string& name, double value) {
  const auto list = claim.find(name);
  if (list != claim.end()) {
    if (!list->is_array() || std::isnan(value)) return false;
    return std::any_of(list->begin(), list->end(),
                       [&](const json& v) { return v.is_number() && v.get<double>() == value; });
  }
  const auto range = claim.find(name + "_range");
  if (range != claim.end()) {
    return range->is_array() && range->size() == 2 && (*range)[0].is_number() && (*range)[1].is_number() &&
           value >= (*range)[0].get<double>() && value <= (*range)[1].get<double>();
  }
  return true;
}

// Whether learner count L (the papers' lambda, Paine's GPU clients) is one
// the claim is about.
bool learners_match(const json& claim, int learners) { return value_match(claim, "learners", learners); }

// Whether the claim's n-softsync setting covers this configuration: a claim
// with `n` / `n_range` is about softsync runs with that n only.
bool n_match(const json& claim, const RunInfo& r) {
  if (!claim.contains("n") && !claim.contains("n_range")) return true;
  return r.protocol == "softsync" && value_match(claim, "n", number_of(r.n));
}

// warm_start: true -> runs with warm_steps > 0; false -> without; absent: any.
bool warm_match(const json& claim, const RunInfo& r) {
  const auto it = claim.find("warm_start");
  if (it == claim.end() || !it->is_boolean()) return true;
  return r.warm == it->get<bool>();
}

std::string seeds_text(const ConfigGroup& g) {
  return g.runs.size() == 1 ? "1 seed" : fmt::format("{} seeds", g.runs.size());
}

std::vector<const RunInfo*> seed_runs(const ConfigGroup& g) {
  std::vector<const RunInfo*> out;
  std::set<std::string> seen;
  for (const RunInfo* r : g.runs)
    if (seen.insert(r->seed).second) out.push_back(r);
  return out;
}

std::vector<double> final_errors(const ConfigGroup& g) {
  std::vector<double> out;
  for (const RunInfo* r : seed_runs(g))
    if (r->completed() && std::isfinite(r->summary.final_test_error)) out.push_back(r->summary.final_test_error);
  return out;
}

std::string data_of(const ConfigGroup& g) {
  const RunInfo& r = g.rep();
  return (r.dataset.empty() ? std::string("data set not recorded") : r.dataset) + ", " + r.model;
}

namespace {

namespace fs = std::filesystem;

constexpr const char* kPapers[] = {"paine2013", "zhang2015"};

// shown: how messages name the file (see display_path).
json load_reference(const std::string& path, const std::string& shown) {
  std::ifstream in(path);
  if (!in) throw Error(shown + ": cannot open the paper's reference file");
  json j = parse_json_bounded<json>(std::string(std::istreambuf_iterator<char>(in), {}));
  if (j.is_discarded() || !j.is_object()) throw Error(shown + ": not a JSON object");
  if (!j.contains("claims") || !j["claims"].is_array()) throw Error(shown + ": no \"claims\" array");
  return j;
}

std::string str(const json& j, const char* name, const std::string& fallback = "") {
  const auto it = j.find(name);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

// A claim's boolean field; false when absent or not a boolean.
bool flag(const json& claim, const char* name) {
  const auto it = claim.find(name);
  return it != claim.end() && it->is_boolean() && it->get<bool>();
}

std::string paper_value(const json& claim) {
  const std::string kind = str(claim, "kind");
  const bool approx = flag(claim, "approx");
  const std::string about = approx ? "about " : "";
  auto fmt_one = [&](double v) {
    if (kind == "speedup") return fmt::format("{:g}x", v);
    if (kind == "test_error") return fmt::format("{:g}%", 100 * v);
    return fmt::format("{:g}", v);
  };
  std::string out;
  if (const std::string t = str(claim, "value_text"); !t.empty()) {
    out = t;
  } else if (claim.contains("values_by_learners") && claim["values_by_learners"].is_object()) {
    for (const auto& [l, v] : claim["values_by_learners"].items()) {
      if (!v.is_number()) continue;
      out += fmt::format("{}{:g}% at L={}", out.empty() ? "" : ", ", 100 * v.get<double>(), l);
    }
  } else if (claim.contains("value") && claim["value"].is_number()) {
    out = about + fmt_one(claim["value"].get<double>());
  } else if (claim.contains("value_range") && claim["value_range"].is_array() && claim["value_range"].size() == 2 &&
             claim["value_range"][0].is_number() && claim["value_range"][1].is_number()) {
    out = fmt_one(claim["value_range"][0].get<double>()) + "–" + fmt_one(claim["value_range"][1].get<double>());
  } else if (kind == "diverges") {
    out = "does not converge";
  } else if (kind == "n_sync_order" && claim.contains("n_sync") && claim["n_sync"].is_array() &&
             !claim["n_sync"].empty()) {
    out = "best n_sync: " + claim["n_sync"][0].dump();
  }
  return out;
}

std::string ours_of(const std::vector<const ConfigGroup*>& gs) {
  std::set<std::string> ds, models;
  for (const auto* g : gs) {
    ds.insert(g->rep().dataset.empty() ? "dataset not recorded" : g->rep().dataset);
    models.insert(g->rep().model);
  }
  std::string out;
  for (const auto& d : ds) out += (out.empty() ? "" : ", ") + d;
  out += "; model ";
  std::string m;
  for (const auto& x : models) m += (m.empty() ? "" : ", ") + x;
  return out + m;
}

// How the report names a reference file: relative to the repository
// (results/reference/<paper>.json) when the folder is the repository's
// results/reference, else as given if relative, else by its file name -- never
// an absolute path of the machine that wrote the report.
std::string display_path(const std::string& reference_dir, const std::string& file) {
  const fs::path dir = fs::path(reference_dir).lexically_normal();
  std::vector<std::string> parts;
  for (const auto& c : dir) parts.push_back(c.string());
  while (!parts.empty() && parts.back().empty()) parts.pop_back();  // trailing '/'
  const std::size_t k = parts.size();
  if (k >= 2 && parts[k - 2] == "results" && parts[k - 1] == "reference") return "results/reference/" + file;
  if (dir.is_relative()) return (dir / file).string();
  return file + " (in the reference folder)";
}

// Half a unit of the last digit a stated number was given to (3.2 -> 0.05,
// 22 -> 0.5): a paper's "3.2x" stands for anything that rounds to it.
double half_unit(double v) {
  const std::string t = fmt::format("{}", v);
  const auto dot = t.find('.');
  if (dot == std::string::npos || t.find('e') != std::string::npos) return 0.5;
  return 0.5 * std::pow(10.0, -static_cast<double>(t.size() - dot - 1));
}

// The speedup a claim states, judged on ours: a time-to-target speedup
// (claims with at_test_error: the smoothed training error at every update,
// the finer of our two readings) or else throughput; "close to linear" is
// taken as at least 70% of linear (the paper's own 22x at 30 learners is 73%).
Judged speedup_verdict(const json& claim, const ConfigGroup& g) {
  const bool tt = claim.contains("at_test_error");
  const Agg& a = tt ? g.train_tt_speedup : g.tp_speedup;
  const std::string what = tt ? "time-to-target speedup (training error)" : "throughput speedup";
  if (a.state == Agg::State::blank)
    return {Verdict::not_tested, tt ? "no time-to-target speedup (no single-learner baseline, or the target not reached)"
                                    : "no single-learner baseline in this suite to divide by"};
  if (a.state != Agg::State::number) return {Verdict::undecided, what + ": " + a.text()};
  if (seed_runs(g).size() < 2) return {Verdict::undecided, what + " from one seed: no interval"};
  if (claim.contains("value") && claim["value"].is_number()) {
    const double v = claim["value"].get<double>();
    return overlaps(a.iv, v - half_unit(v), v + half_unit(v), what, kTimes);
  }
  const auto range = claim.find("value_range");
  if (range != claim.end() && range->is_array() && range->size() == 2 && (*range)[0].is_number() &&
      (*range)[1].is_number())
    return overlaps(a.iv, (*range)[0].get<double>() - half_unit((*range)[0].get<double>()),
                    (*range)[1].get<double>() + half_unit((*range)[1].get<double>()), what, kTimes);
  if (str(claim, "value_text") == "close to linear")
    return overlaps(a.iv, 0.7 * g.rep().learners, INFINITY, what + " (70% of linear or more)", kTimes);
  return {Verdict::not_tested, "the claim states no value to compare"};
}

void speedup_rows(const json& claim, const Groups& all, int max_learners, ClaimRows& out) {
  Groups at;
  for (const auto* g : all)
    if (claim.contains("learners") && learners_match(claim, g->rep().learners)) at.push_back(g);
  std::string where;
  if (at.empty()) {
    for (const auto* g : all)
      if (g->rep().learners == max_learners && max_learners > 1) at.push_back(g);
    if (!at.empty()) where = fmt::format(" (our largest learner count, L={})", max_learners);
  }
  for (const auto* g : at) {
    const RunInfo& r = g->rep();
    const std::string clock = r.mode != RunMode::virtual_learners ? "" : " (modelled, " + (r.timing_model.empty() ? std::string("ideal clock") : r.timing_model) + ")";
    out.add(fmt::format("ours: time-to-target {} (test error, at the evaluations), {} (smoothed training error, "
                        "at every update), throughput {}{}",
                        agg_md(g->tt_speedup, false, 2), agg_md(g->train_tt_speedup, false, 2),
                        agg_md(g->tp_speedup, false, 2), clock),
            speedup_verdict(claim, *g), data_of(*g), config_label(*g) + where + ", " + seeds_text(*g));
  }
  if (at.empty()) out.none("ours: no run with more than one learner");
}

bool same_data(const json& claim, const RunInfo& r) {
  std::string a = str(claim, "dataset"), b = r.dataset;
  for (auto* s : {&a, &b}) {
    std::transform(s->begin(), s->end(), s->begin(), [](unsigned char c) { return std::tolower(c); });
    s->erase(std::remove(s->begin(), s->end(), '-'), s->end());
  }
  return !a.empty() && a == b;
}

// A claim that the error is the same for every n (a list or range of n):
// each n's final error against the smallest n of the same setting. "The
// same" needs a margin: +-10% of the paper's error when it says "about",
// else +-1 point. Reproduced when the interval of the difference lies
// within the margin, not reproduced when it lies wholly outside it.
Judged flat_verdict(const json& claim, const ConfigGroup& g, const Groups& at) {
  const ConfigGroup* base = nullptr;
  for (const auto* o : at)
    if (family_key(*o, {"softsync_n"}) == family_key(g, {"softsync_n"}) &&
        (!base || number_of(o->rep().n) < number_of(base->rep().n)))
      base = o;
  if (!base || base == &g) return {Verdict::not_tested, "the reference of the rows below (smallest n)"};
  const std::string what = fmt::format("final error minus n={}'s", base->rep().n);
  const bool approx = flag(claim, "approx") && claim.contains("value") && claim["value"].is_number();
  const double m = approx ? 0.1 * claim["value"].get<double>() : 0.01;
  return within(diff_ci95(final_errors(g), final_errors(*base)), m, what, kPoints);
}

Judged value_verdict(const json& claim, const ConfigGroup& g) {
  if (!same_data(claim, g.rep()))
    return {Verdict::not_tested, fmt::format("the paper's data set ({}) is not ours: an error rate is not compared "
                                             "across data sets", str(claim, "dataset", "not named"))};
  if (!claim.contains("value") || !claim["value"].is_number()) return {Verdict::not_tested, "no value stated"};
  const double v = claim["value"].get<double>(), tol = flag(claim, "approx") ? 0.1 * v : half_unit(v);
  return overlaps(g.final_error.iv, v - tol, v + tol, "final error", kPoints);
}

void test_error_rows(const json& claim, const Groups& all, const std::string& policy, ClaimRows& out) {
  Groups at;
  bool policy_found = false;
  for (const auto* g : all) policy_found = policy_found || g->rep().lr_policy == policy;
  for (const auto* g : all) {
    if (!learners_match(claim, g->rep().learners) || !n_match(claim, g->rep())) continue;
    if (!policy.empty() && policy_found && g->rep().lr_policy != policy) continue;
    at.push_back(g);
  }
  const bool flat = claim.contains("n_range") || (claim.contains("n") && claim["n"].is_array() && claim["n"].size() > 1);
  const std::string note = !policy.empty() && !policy_found ? fmt::format(" (no run with lr_policy {})", policy) : "";
  for (const auto* g : at)
    out.add("ours: final test error " + agg_md(g->final_error, true, 2),
            flat ? flat_verdict(claim, *g, at) : value_verdict(claim, *g), data_of(*g),
            config_label(*g) + note + ", " + seeds_text(*g));
  if (at.empty()) out.none("ours: no matching configuration in this suite");
}

// "Fails to converge": a seed that diverged or ends at 80% test error or
// more (chance is 90% on ten classes); every seed must, and at least two.
Judged diverges_verdict(const ConfigGroup& g) {
  int failing = 0, seen = 0;
  for (const RunInfo* r : seed_runs(g)) {
    const bool high = r->completed() && std::isfinite(r->summary.final_test_error) && r->summary.final_test_error >= 0.8;
    if (!r->diverged() && !(r->completed() && std::isfinite(r->summary.final_test_error))) continue;
    ++seen;
    failing += r->diverged() || high;
  }
  if (seen == 0) return {Verdict::undecided, "no seed diverged or ended with a test error"};
  const std::string why = fmt::format("{} of {} seeds diverged or ended at 80% error or more", failing, seen);
  if (seen < 2) return {Verdict::undecided, why + " (one seed)"};
  if (failing == seen) return {Verdict::reproduced, why};
  if (failing == 0) return {Verdict::not_reproduced, why};
  return {Verdict::undecided, why};
}

// The setting as stated: learner count (lambda) and n both, when given.
void diverges_rows(const json& claim, const Groups& all, const std::string& policy, ClaimRows& out) {
  for (const auto* g : all) {
    const RunInfo& r = g->rep();
    if (r.protocol == "hardsync" || (!policy.empty() && r.lr_policy != policy)) continue;
    if (!learners_match(claim, r.learners) || !n_match(claim, r)) continue;
    std::string ours = fmt::format("ours: {} of {} seeds diverged", g->diverged, g->runs.size());
    if (g->final_error.state == Agg::State::number) ours += ", final test error " + agg_md(g->final_error, true, 2);
    out.add(ours, diverges_verdict(*g), data_of(*g), config_label(*g));
  }
  if (out.rows.empty()) out.none("ours: no matching configuration in this suite");
}

// "- speedup_8_gpus: 2 reproduced, 1 undecided (of 3 configurations)".
std::string verdict_summary(const std::string& id, const std::vector<Verdict>& vs) {
  std::string counts;
  int compared = 0;
  for (Verdict v : {Verdict::reproduced, Verdict::not_reproduced, Verdict::undecided}) {
    const auto k = std::count(vs.begin(), vs.end(), v);
    compared += static_cast<int>(k);
    if (k) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", k, verdict_word(v));
  }
  if (compared == 0) return fmt::format("- {}: not tested by this suite\n", id);
  return fmt::format("- {}: {} (of {} compared)\n", id, counts, compared);
}

ClaimRows claim_rows(const json& claim, const Groups& all, int max_learners) {
  const std::string kind = str(claim, "kind"), source = str(claim, "source");
  ClaimRows out;
  out.text = str(claim, "text", str(claim, "id")) + " — " + (source.empty() ? std::string("location not given") : source);
  out.pv = "paper: " + paper_value(claim);
  out.paper_data = str(claim, "dataset", "not named");
  const std::string policy = str(claim, "lr_policy");
  if (kind == "speedup") speedup_rows(claim, all, max_learners, out);
  else if (kind == "test_error") test_error_rows(claim, all, policy, out);
  else if (kind == "diverges") diverges_rows(claim, all, policy, out);
  else if (kind == "n_sync_order") n_sync_order_rows(claim, all, out);
  else if (kind == "train_error") train_error_rows(claim, all, out);
  else if (kind == "early_late") early_late_rows(claim, all, out);
  else if (kind == "saw_tooth") saw_tooth_rows(claim, all, out);
  else if (kind == "trend") out.none("ours: not compared automatically (see the error plots of this report)");
  else out.none("ours: (claim kind '" + kind + "' is not compared automatically)");
  return out;
}

}  // namespace

std::string paper_reference(const std::string& suite, const std::string& reference_dir) {
  if (reference_dir.empty()) return "";
  for (const char* p : kPapers) {
    if (suite.rfind(p, 0) != 0) continue;
    const fs::path path = fs::path(reference_dir) / (std::string(p) + ".json");
    std::error_code ec;
    return fs::is_regular_file(path, ec) ? path.string() : "";
  }
  return "";
}

std::string papers_section(const std::vector<ConfigGroup>& groups, const std::string& suite,
                           const std::string& reference_dir, std::vector<std::string>& warnings) {
  const char* paper = nullptr;
  for (const char* p : kPapers)
    if (suite.rfind(p, 0) == 0) paper = p;
  if (!paper) return "";

  std::string md = fmt::format("## Beside the paper ({})\n\n", paper);
  if (reference_dir.empty()) {
    warnings.push_back(fmt::format("suite {} reproduces {}, but no reference folder was given", suite, paper));
    return md + "The suite reproduces this paper, but no reference folder (results/reference) was given.\n\n";
  }
  const std::string path = (fs::path(reference_dir) / (std::string(paper) + ".json")).string();
  const std::string shown = display_path(reference_dir, std::string(paper) + ".json");
  json ref;
  try {
    ref = load_reference(path, shown);
  } catch (const Error& e) {
    warnings.push_back(e.what());
    return md + fmt::format("The paper's numbers could not be read: {}\n\n", e.what());
  }

  std::vector<const ConfigGroup*> all;
  for (const auto& g : groups) all.push_back(&g);
  md = fmt::format("## Beside the paper: {} (arXiv {})\n\n", str(ref, "citation", paper), str(ref, "arxiv", "?"));
  md += fmt::format(
      "Numbers labelled **paper** are the published ones ({}; source: `{}`, each claim with where the paper "
      "states it); numbers labelled **ours** come from this suite, trained on **{}** — not the paper's data set, "
      "model or hardware. Compare trends (speedup with learners, error flat in n, which settings diverge), not "
      "absolute values. A claim is matched to our configurations by its setting (learner count, n, n_sync, rate "
      "policy), never by data set.\n\n",
      str(ref, "method", paper), shown,
      all.empty() ? "no runs" : ours_of(all));
  if (const std::string t = str(ref, "source_text"); !t.empty()) md += "Text checked: " + t + "\n\n";

  Table t;
  t.header = {"paper's claim", "paper", "paper's data", "ours", "verdict", "our data, model", "our configuration"};
  int max_learners = 0;
  for (const auto* g : all) max_learners = std::max(max_learners, g->rep().learners);
  std::string summary;
  for (const json& claim : ref["claims"]) {
    if (!claim.is_object()) continue;
    ClaimRows rows = claim_rows(claim, all, max_learners);
    summary += verdict_summary(str(claim, "id", "(no id)"), rows.verdicts);
    for (auto& r : rows.rows) t.rows.push_back(std::move(r));
  }
  md += to_markdown(t) + "\n";
  md += "Verdicts by claim (each row's verdict is decided by its seeds, never by one value: a claimed direction is "
        "reproduced when the 95% interval of the difference excludes 0 on its side; a claimed value or range when "
        "our 95% interval overlaps it; a failure to converge when every seed fails; one seed stays undecided; "
        "results/reference/README.md gives the rule of each kind):\n\n" +
        summary + "\n";
  if (std::string(paper) == "zhang2015") md += throughput_table(ref, all);
  return md;
}

}  // namespace asgd::report::detail
