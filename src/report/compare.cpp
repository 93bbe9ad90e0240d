// asgd compare (regressions between two result folders or two Google
// Benchmark JSON files) and asgd validate.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/text.hpp"
#include "report/bench.hpp"
#include "report/detail.hpp"
#include "report/report.hpp"

namespace asgd::report {

namespace fs = std::filesystem;
using namespace detail;

namespace {

struct Input {
  bool bench = false;
  std::vector<std::string> files;  // folder: the results files
  BenchFile file;                  // bench: the parsed JSON and its benchmarks
};

Input classify(const std::string& path) {
  std::error_code ec;
  if (path.empty()) throw Error("compare: empty path");
  if (!fs::exists(path, ec)) throw Error(path + ": no such file or folder");
  Input in;
  if (fs::is_directory(path, ec)) {
    const fs::path runs = fs::path(path) / "runs";
    in.files = list_h5(fs::is_directory(runs, ec) ? runs.string() : path);
    if (in.files.empty()) throw Error(path + ": no results files (runs/*.h5 or *.h5)");
    return in;
  }
  const std::string bytes = read_text_file(path, "results folder or benchmark JSON file", path);
  if (bytes.compare(0, 8, "\x89HDF\r\n\x1a\n") == 0) {
    throw Error(path + ": is an HDF5 file; compare takes a folder of results files (runs/*.h5) or a "
                       "Google Benchmark JSON file");
  }
  in.file = read_bench_file(bytes, path);
  if (!in.file.json_valid && in.file.problem == path + ": not valid JSON")
    throw Error(path + ": neither a results folder nor a Google Benchmark JSON file (not valid JSON)");
  if (!in.file.problem.empty()) throw Error(in.file.problem);
  if (!in.file.bad_entries.empty()) throw Error(in.file.bad_entries.front());
  in.bench = true;
  return in;
}

struct Row {
  std::string figure, baseline, candidate, change, p, verdict;
};

struct Verdicts {
  std::vector<Row> rows;
  int regressions = 0;
  bool threshold_only_used = false;
};

// Compares samples of one figure; higher_is_better decides the direction.
void compare_samples(Verdicts& out, const std::string& figure, const std::vector<double>& base,
                     const std::vector<double>& cand, bool higher_is_better, const CompareOptions& opt,
                     const std::function<std::string(double)>& show) {
  const double mb = median(base), mc = median(cand);
  Row row{figure, show(mb), show(mc), "", "", ""};
  if (base.size() > 1) row.baseline += fmt::format(" (n={})", base.size());
  if (cand.size() > 1) row.candidate += fmt::format(" (n={})", cand.size());
  if (!(mb != 0) || !std::isfinite(mb) || !std::isfinite(mc)) {
    row.verdict = "no comparison";
    out.rows.push_back(row);
    return;
  }
  const double change = (mc - mb) / std::fabs(mb);
  if (!std::isfinite(change)) {
    row.verdict = "no comparison";
    out.rows.push_back(row);
    return;
  }
  row.change = fmt::format("{:+.1f}%", 100 * change);
  const RankTest t = mann_whitney(cand, base);
  const bool threshold_only = !(t.min_p <= opt.alpha);
  row.p = fmt::format("{:.3g}{}", t.p, threshold_only ? "*" : "");
  out.threshold_only_used = out.threshold_only_used || threshold_only;
  const bool significant = threshold_only || t.p < opt.alpha;
  const double worse = higher_is_better ? -change : change;  // > 0: candidate worse
  if (worse > opt.threshold && significant) {
    row.verdict = "REGRESSION";
    ++out.regressions;
  } else if (-worse > opt.threshold && significant) {
    row.verdict = "improved";
  } else {
    row.verdict = "ok";
  }
  out.rows.push_back(row);
}

void print_table(const Verdicts& v) {
  const std::vector<std::string> header = {"figure", "baseline", "candidate", "change %", "p-value", "verdict"};
  std::vector<std::size_t> w(header.size());
  auto cells = [](const Row& r) { return std::vector<std::string>{r.figure, r.baseline, r.candidate, r.change, r.p, r.verdict}; };
  for (std::size_t i = 0; i < header.size(); ++i) w[i] = header[i].size();
  for (const auto& r : v.rows) {
    const auto c = cells(r);
    for (std::size_t i = 0; i < c.size(); ++i) w[i] = std::max(w[i], c[i].size());
  }
  auto line = [&](const std::vector<std::string>& c) {
    std::string s;
    for (std::size_t i = 0; i < c.size(); ++i) s += fmt::format("{:<{}}", c[i], i + 1 < c.size() ? w[i] + 2 : 0);
    while (!s.empty() && s.back() == ' ') s.pop_back();
    std::printf("%s\n", s.c_str());
  };
  line(header);
  for (const auto& r : v.rows) line(cells(r));
  std::printf("%s\n", fmt::format("{} figures, {} regression{}", v.rows.size(), v.regressions,
                                  v.regressions == 1 ? "" : "s").c_str());
  if (v.threshold_only_used) {
    std::printf("* too few repetitions for the rank test to reach alpha: verdict by the threshold alone\n");
  }
}

// ---- result folders ----

// Every results file of a side; a gate compares all of them or none: an
// unreadable file (the reader checks every figure) is refused, naming it,
// rather than dropped.
std::vector<RunInfo> load_all(const Input& in) {
  std::vector<RunInfo> runs = load_runs(in.files);
  for (const auto& r : runs) {
    if (!r.readable) throw Error(fmt::format("compare: {} (a gate compares every results file: remove or fix it)", r.error));
  }
  for (const auto& note : drop_copies(runs)) std::printf("note: %s\n", note.c_str());
  return runs;
}

// The config fields every run of both sides has (less kNonKeyFields), so
// that a field added by a newer build does not make every configuration "new".
std::set<std::string> shared_fields(const std::vector<RunInfo>& base, const std::vector<RunInfo>& cand) {
  std::set<std::string> shared;
  bool first = true;
  for (const auto* side : {&base, &cand}) {
    for (const auto& r : *side) {
      if (!r.config.is_object()) continue;
      std::set<std::string> keys;
      for (auto it = r.config.begin(); it != r.config.end(); ++it) keys.insert(it.key());
      if (first) {
        shared = keys;
        first = false;
      } else {
        std::set<std::string> both;
        std::set_intersection(shared.begin(), shared.end(), keys.begin(), keys.end(), std::inserter(both, both.end()));
        shared.swap(both);
      }
    }
  }
  for (const char* f : kNonKeyFields) shared.erase(f);
  return shared;
}

// Runs of both sides grouped by configuration (restricted to the shared
// fields), in order of their labels: the fields whose values differ.
struct Matched {
  std::map<std::string, std::vector<const RunInfo*>> base, cand;  // key -> runs
  std::vector<std::pair<std::string, std::string>> order;          // label, key
};

Matched match_configs(const std::vector<RunInfo>& base, const std::vector<RunInfo>& cand) {
  const std::set<std::string> shared = shared_fields(base, cand);
  auto restricted = [&](const RunInfo& r) {
    if (!r.config.is_object()) return json(r.key);
    json k = json::object();
    for (const auto& name : shared) k[name] = r.config[name];
    return k;
  };
  Matched m;
  std::map<std::string, json> configs;  // key -> restricted config
  for (const auto* side : {&base, &cand})
    for (const auto& r : *side) {
      const json k = restricted(r);
      configs[k.dump()] = k;
      (side == &base ? m.base : m.cand)[k.dump()].push_back(&r);
    }
  std::vector<std::string> varying;
  for (const auto& name : shared) {
    std::set<std::string> values;
    for (const auto& [k, c] : configs) values.insert(c.is_object() ? c[name].dump() : "");
    if (values.size() > 1) varying.push_back(name);
  }
  auto label = [&](const json& c) {
    if (!c.is_object()) return value_text(c);
    std::string s;
    for (const auto& name : varying) s += (s.empty() ? "" : " ") + name + "=" + value_text(c[name]);
    if (s.empty()) s = c.contains("model") ? value_text(c["model"]) : "all runs";
    return s;
  };
  for (const auto& [k, c] : configs) m.order.emplace_back(label(c), k);
  std::sort(m.order.begin(), m.order.end());
  return m;
}

// Throughput and final test error of one side's completed runs; bad: the others.
struct SideFigures {
  std::vector<double> rates, errors;
  int bad = 0;
};

SideFigures figures(const std::vector<const RunInfo*>& runs) {
  SideFigures f;
  for (const RunInfo* r : runs) {
    if (!r->completed()) {
      ++f.bad;
      continue;
    }
    if (r->summary.samples_per_s > 0) f.rates.push_back(r->summary.samples_per_s);
    if (std::isfinite(r->summary.final_test_error)) f.errors.push_back(r->summary.final_test_error);
  }
  return f;
}

// The rows of one configuration present on both sides.
void compare_config(Verdicts& v, const std::string& name, const std::vector<const RunInfo*>& bruns,
                    const std::vector<const RunInfo*>& cruns, const CompareOptions& opt) {
  auto pct = [](double x) { return std::isfinite(x) ? fmt::format("{:.2f}%", 100 * x) : std::string("–"); };
  auto rate = [](double x) { return std::isfinite(x) ? fmt::format("{:.1f}", x) : std::string("–"); };
  const SideFigures b = figures(bruns), c = figures(cruns);
  if (b.bad || c.bad) {
    const double fb = static_cast<double>(b.bad) / static_cast<double>(bruns.size());
    const double fc = static_cast<double>(c.bad) / static_cast<double>(cruns.size());
    Row row{name + ": diverged/failed runs", fmt::format("{}/{}", b.bad, bruns.size()),
            fmt::format("{}/{}", c.bad, cruns.size()), "", "", fc > fb ? "REGRESSION" : "ok"};
    v.regressions += fc > fb;
    v.rows.push_back(row);
  }
  if (!b.rates.empty() && !c.rates.empty()) compare_samples(v, name + ": samples/s", b.rates, c.rates, true, opt, rate);
  if (b.errors.empty() || c.errors.empty()) return;
  const double mb = mean_ci95(b.errors).mean, mc = mean_ci95(c.errors).mean;
  const double d = std::fabs(mc - mb) < 1e-12 ? 0.0 : mc - mb;  // no "-0.00 pp"
  Row row{name + ": final test error", pct(mb), pct(mc), fmt::format("{:+.2f} pp", 100 * d), "",
          d > opt.error_band ? "REGRESSION" : (d < -opt.error_band ? "improved" : "ok")};
  if (b.errors.size() > 1) row.baseline += fmt::format(" (mean of {})", b.errors.size());
  if (c.errors.size() > 1) row.candidate += fmt::format(" (mean of {})", c.errors.size());
  v.regressions += d > opt.error_band;
  v.rows.push_back(row);
}

Verdicts compare_folders(const Input& bin, const Input& cin, const CompareOptions& opt) {
  std::vector<RunInfo> base = load_all(bin), cand = load_all(cin);
  if (base.empty()) throw Error("compare: no results file in the baseline");
  if (cand.empty()) throw Error("compare: no results file in the candidate");
  check_same_machine(machines(base), machines(cand), opt);
  check_same_execution(executions(base), executions(cand), opt);
  const Matched m = match_configs(base, cand);
  Verdicts v;
  for (const auto& [name, k] : m.order) {
    const auto bi = m.base.find(k), ci = m.cand.find(k);
    if (bi == m.base.end() || ci == m.cand.end()) {
      const bool in_base = bi != m.base.end();
      const std::size_t n = in_base ? bi->second.size() : ci->second.size();
      v.rows.push_back({name, in_base ? fmt::format("{} runs", n) : "–", in_base ? "–" : fmt::format("{} runs", n), "",
                        "", in_base ? "missing in candidate" : "new in candidate"});
      continue;
    }
    compare_config(v, name, bi->second, ci->second, opt);
  }
  return v;
}

// ---- Google Benchmark JSON ----

// Each row's figure (GFLOP/s, or real_time in `unit`), else asgd::Error
// naming the file, the benchmark, the key and its value.
std::vector<double> bench_values(const std::vector<const json*>& rows, const std::string& path,
                                 const std::string& name, bool flops, const std::string& unit) {
  std::vector<double> out;
  for (const json* r : rows) {
    const BenchFigure f = bench_figure(*r, flops);
    if (!f.problem.empty()) throw Error(fmt::format("{}: benchmark {}: {}", path, shorten(name), f.problem));
    out.push_back(flops ? f.value : f.value / unit_ns(unit));
  }
  return out;
}

Verdicts compare_bench(const Input& bin, const std::string& bpath, const Input& cin, const std::string& cpath,
                       const CompareOptions& opt) {
  check_same_machine(machines(bin.file.doc), machines(cin.file.doc), opt);
  check_same_execution(executions(bin.file.doc), executions(cin.file.doc), opt);
  const auto& base = bin.file.series;
  const auto& cand = cin.file.series;
  const auto& berr = bin.file.errors;
  const auto& cerr = cin.file.errors;
  std::set<std::string> names;
  for (const auto* side : {&base, &cand})
    for (const auto& [n, s] : *side) names.insert(n);
  for (const auto* side : {&berr, &cerr})
    for (const auto& [n, s] : *side) names.insert(n);
  Verdicts v;
  for (const auto& name : names) {
    const auto bi = base.find(name), ci = cand.find(name);
    const auto be = berr.find(name), ce = cerr.find(name);
    const bool in_base = bi != base.end() || be != berr.end(), in_cand = ci != cand.end() || ce != cerr.end();
    if (!in_base || !in_cand) {
      v.rows.push_back({name, in_base ? "present" : "–", in_cand ? "present" : "–", "", "",
                        in_base ? "missing in candidate" : "new in candidate"});
      continue;
    }
    if (be != berr.end() || ce != cerr.end()) {
      const bool regress = ce != cerr.end() && be == berr.end();
      v.rows.push_back({name, be == berr.end() ? "ok" : "error: " + be->second,
                        ce == cerr.end() ? "ok" : "error: " + ce->second, "", "", regress ? "REGRESSION" : "error"});
      v.regressions += regress;
      continue;
    }
    const auto& bs = bi->second;
    const auto& cs = ci->second;
    const std::string fk = flops_key(*bs.front());
    const bool flops = !fk.empty() && !flops_key(*cs.front()).empty();
    std::string unit = "ns";
    if (!flops) {
      const json& tu = bs.front()->contains("time_unit") ? (*bs.front())["time_unit"] : json("ns");
      unit = tu.is_string() && !std::isnan(unit_ns(tu.get<std::string>())) ? tu.get<std::string>() : "ns";
    }
    const std::vector<double> bx = bench_values(bs, bpath, name, flops, unit),
                              cx = bench_values(cs, cpath, name, flops, unit);
    auto show = [&](double x) { return flops ? fmt::format("{:.4g} {}", x, fk) : fmt::format("{:.4g} {}", x, unit); };
    compare_samples(v, name + (flops ? " " + fk : " real_time"), bx, cx, flops, opt, show);
  }
  return v;
}

}  // namespace

int compare(const std::string& baseline, const std::string& candidate, const CompareOptions& opt) {
  if (!(opt.threshold >= 0) || !(opt.alpha > 0 && opt.alpha < 1) || !(opt.error_band >= 0)) {
    throw Error(fmt::format("compare: bad options (threshold {} must be >= 0, alpha {} in (0, 1), error band {} >= 0)",
                            opt.threshold, opt.alpha, opt.error_band));
  }
  const Input b = classify(baseline), c = classify(candidate);
  if (b.bench != c.bench) {
    throw Error(fmt::format("compare: {} is a {} but {} is a {}; compare like with like", baseline,
                            b.bench ? "benchmark JSON file" : "results folder", candidate,
                            c.bench ? "benchmark JSON file" : "results folder"));
  }
  const Verdicts v = b.bench ? compare_bench(b, baseline, c, candidate, opt) : compare_folders(b, c, opt);
  print_table(v);
  std::fflush(stdout);
  return v.regressions > 0 ? 1 : 0;
}

}  // namespace asgd::report
