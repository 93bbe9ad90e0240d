// The papers' published numbers beside ours, for suites that reproduce them.
// Reference files: results/reference/<paper>.json (fields documented in
// results/reference/README.md).
#include <algorithm>
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

std::string paper_value(const json& claim) {
  const std::string kind = str(claim, "kind");
  const bool approx = claim.value("approx", false);
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
  } else if (claim.contains("value_range") && claim["value_range"].is_array() && claim["value_range"].size() == 2) {
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
            data_of(*g), config_label(*g) + where + ", " + seeds_text(*g));
  }
  if (at.empty()) out.add("ours: no run with more than one learner", "", "");
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
  const std::string note = !policy.empty() && !policy_found ? fmt::format(" (no run with lr_policy {})", policy) : "";
  for (const auto* g : at)
    out.add("ours: final test error " + agg_md(g->final_error, true, 2), data_of(*g),
            config_label(*g) + note + ", " + seeds_text(*g));
  if (at.empty()) out.add("ours: no matching configuration in this suite", "", "");
}

// The setting as stated: learner count (lambda) and n both, when given.
void diverges_rows(const json& claim, const Groups& all, const std::string& policy, ClaimRows& out) {
  for (const auto* g : all) {
    const RunInfo& r = g->rep();
    if (r.protocol == "hardsync" || (!policy.empty() && r.lr_policy != policy)) continue;
    if (!learners_match(claim, r.learners) || !n_match(claim, r)) continue;
    std::string ours = fmt::format("ours: {} of {} seeds diverged", g->diverged, g->runs.size());
    if (g->final_error.state == Agg::State::number) ours += ", final test error " + agg_md(g->final_error, true, 2);
    out.add(ours, data_of(*g), config_label(*g));
  }
  if (out.rows.empty()) out.add("ours: no matching configuration in this suite", "", "");
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
  else if (kind == "n_sync_order") n_sync_order_rows(all, out);
  else if (kind == "train_error") train_error_rows(claim, all, out);
  else if (kind == "early_late") early_late_rows(claim, all, out);
  else if (kind == "saw_tooth") saw_tooth_rows(claim, all, out);
  else if (kind == "trend") out.add("ours: not compared automatically (see the error plots of this report)", "", "");
  else out.add("ours: (claim kind '" + kind + "' is not compared automatically)", "", "");
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
  t.header = {"paper's claim", "paper", "paper's data", "ours", "our data, model", "our configuration"};
  int max_learners = 0;
  for (const auto* g : all) max_learners = std::max(max_learners, g->rep().learners);
  for (const json& claim : ref["claims"]) {
    if (!claim.is_object()) continue;
    for (auto& r : claim_rows(claim, all, max_learners).rows) t.rows.push_back(std::move(r));
  }
  md += to_markdown(t) + "\n";
  if (std::string(paper) == "zhang2015") md += throughput_table(ref, all);
  return md;
}

}  // namespace asgd::report::detail
