// asgd history: per-figure series over commits from results files and Google
// Benchmark JSON (a CI job's stored outputs), steps found by binary
// segmentation with a rank test and a minimum effect, tables and plots.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include <fmt/format.h>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/process.hpp"
#include "common/cpu_name.hpp"
#include "report/detail.hpp"
#include "report/report.hpp"

namespace asgd::report {

namespace fs = std::filesystem;
using namespace detail;

// ---- step detection ----

namespace {

std::vector<double> pooled(const std::vector<std::vector<double>>& points, std::size_t lo, std::size_t hi) {
  std::vector<double> out;
  for (std::size_t i = lo; i < hi; ++i) out.insert(out.end(), points[i].begin(), points[i].end());
  return out;
}

double effect_of(double before, double after, bool relative) {
  if (!std::isfinite(before) || !std::isfinite(after)) return kNaN;
  if (!relative) return after - before;
  return before != 0 ? (after - before) / std::fabs(before) : kNaN;
}

struct Split {
  bool found = false;
  std::size_t at = 0;
  double p = 1, effect = 0, before = kNaN, after = kNaN;
  std::size_t candidates = 0;  // splits with enough samples on both sides (the Bonferroni factor)
};

std::size_t count(const std::vector<std::vector<double>>& points, std::size_t lo, std::size_t hi) {
  std::size_t n = 0;
  for (std::size_t i = lo; i < hi; ++i) n += points[i].size();
  return n;
}

// Tests a split of [lo, hi) at k; fills effect and p (unadjusted) when the
// effect is large enough, else leaves p = 1.
Split test_split(const std::vector<std::vector<double>>& points, std::size_t lo, std::size_t k, std::size_t hi,
                 const StepOptions& opt) {
  Split s;
  s.at = k;
  const std::vector<double> left = pooled(points, lo, k), right = pooled(points, k, hi);
  s.before = median(left);
  s.after = median(right);
  s.effect = effect_of(s.before, s.after, opt.relative);
  if (!(std::fabs(s.effect) >= opt.min_effect)) return s;
  const RankTest t = mann_whitney(right, left);
  if (std::isfinite(t.p)) {
    s.p = t.p;
    s.found = true;
  }
  return s;
}

bool enough(const std::vector<std::vector<double>>& points, std::size_t lo, std::size_t k, std::size_t hi,
            const StepOptions& opt) {
  const auto min = static_cast<std::size_t>(std::max(1, opt.min_samples));
  return count(points, lo, k) >= min && count(points, k, hi) >= min;
}

Split best_split(const std::vector<std::vector<double>>& points, std::size_t lo, std::size_t hi,
                 const StepOptions& opt) {
  Split best;
  std::size_t candidates = 0;
  for (std::size_t k = lo + 1; k < hi; ++k) {
    if (!enough(points, lo, k, hi, opt)) continue;
    ++candidates;
    const Split s = test_split(points, lo, k, hi, opt);
    if (!s.found) continue;
    if (!best.found || s.p < best.p || (s.p == best.p && std::fabs(s.effect) > std::fabs(best.effect))) best = s;
  }
  best.candidates = candidates;
  return best;
}

bool significant(const Split& s, const StepOptions& opt) {
  return s.found && s.p * static_cast<double>(s.candidates) <= opt.alpha;
}

void segment(const std::vector<std::vector<double>>& points, std::size_t lo, std::size_t hi, const StepOptions& opt,
             std::vector<std::size_t>& out) {
  if (hi - lo < 2) return;
  const Split s = best_split(points, lo, hi, opt);
  if (!significant(s, opt)) return;
  segment(points, lo, s.at, opt, out);
  out.push_back(s.at);
  segment(points, s.at, hi, opt, out);
}

// A step between its neighbours: the split at k of [lo, hi), with the
// Bonferroni factor of a search over [lo, hi).
Split retest(const std::vector<std::vector<double>>& points, std::size_t lo, std::size_t k, std::size_t hi,
             const StepOptions& opt) {
  Split s = test_split(points, lo, k, hi, opt);
  for (std::size_t j = lo + 1; j < hi; ++j) s.candidates += enough(points, lo, j, hi, opt);
  return s;
}

}  // namespace

std::vector<Step> detect_steps(const std::vector<std::vector<double>>& points, const StepOptions& opt) {
  if (!(opt.min_effect >= 0) || !(opt.alpha > 0 && opt.alpha < 1))
    throw Error(fmt::format("history: bad step options (min effect {} must be >= 0, alpha {} in (0, 1))",
                            opt.min_effect, opt.alpha));
  std::vector<std::vector<double>> clean(points.size());  // non-finite samples dropped
  for (std::size_t i = 0; i < points.size(); ++i)
    for (double v : points[i])
      if (std::isfinite(v)) clean[i].push_back(v);
  std::vector<std::size_t> at;
  segment(clean, 0, clean.size(), opt, at);

  // Prune: each step again between its neighbours; drop the weakest failing one, repeat.
  for (;;) {
    std::size_t worst = at.size();
    double worst_p = -1;
    for (std::size_t j = 0; j < at.size(); ++j) {
      const std::size_t lo = j == 0 ? 0 : at[j - 1], hi = j + 1 == at.size() ? clean.size() : at[j + 1];
      const Split s = retest(clean, lo, at[j], hi, opt);
      if (significant(s, opt)) continue;
      const double adj = s.found ? s.p * static_cast<double>(s.candidates) : 2;  // no effect: weakest
      if (adj > worst_p) {
        worst_p = adj;
        worst = j;
      }
    }
    if (worst == at.size()) break;
    at.erase(at.begin() + static_cast<std::ptrdiff_t>(worst));
  }

  std::vector<Step> steps;
  for (std::size_t j = 0; j < at.size(); ++j) {
    const std::size_t lo = j == 0 ? 0 : at[j - 1], hi = j + 1 == at.size() ? clean.size() : at[j + 1];
    const Split s = retest(clean, lo, at[j], hi, opt);
    Step st;
    st.at = at[j];
    st.before = s.before;
    st.after = s.after;
    st.change = s.effect;
    st.p = std::min(1.0, s.p * static_cast<double>(s.candidates));
    steps.push_back(st);
  }
  return steps;
}

// ---- inputs ----

namespace {

// One measurement of one figure.
struct Sample {
  std::string figure, unit, machine, commit;
  bool higher_is_better = true;
  bool absolute = false;  // test error: steps by an absolute band
  double time = kNaN;     // Unix seconds
  double value = kNaN;
  std::size_t input = 0;  // index of the command-line input it came from
};

struct Inputs {
  std::vector<Sample> samples;
  std::vector<std::string> skipped;  // "file: why"
  std::size_t files = 0;
};

double file_mtime(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return kNaN;
  return static_cast<double>(st.st_mtim.tv_sec) + 1e-9 * static_cast<double>(st.st_mtim.tv_nsec);
}

// "2026-11-30T12:34:56+01:00", "...Z", "...(.fff)", or Google Benchmark's old
// "2019/11/14-12:05:48" (local time). NaN when not understood.
double parse_time(const std::string& text) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  char sep1 = 0, sep2 = 0, t = 0;
  int used = 0;
  if (std::sscanf(text.c_str(), "%4d%c%2d%c%2d%c%2d:%2d:%2d%n", &y, &sep1, &mo, &sep2, &d, &t, &h, &mi, &s, &used) != 9)
    return kNaN;
  if (sep1 != sep2 || (sep1 != '-' && sep1 != '/') || (t != 'T' && t != ' ' && t != '-')) return kNaN;
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  std::string rest = text.substr(static_cast<std::size_t>(used));
  if (!rest.empty() && rest[0] == '.') {
    std::size_t i = 1;
    while (i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i]))) ++i;
    rest.erase(0, i);
  }
  if (rest.empty()) {  // no zone: local time
    tm.tm_isdst = -1;
    const std::time_t local = std::mktime(&tm);
    return local == static_cast<std::time_t>(-1) ? kNaN : static_cast<double>(local);
  }
  const double utc = static_cast<double>(::timegm(&tm));
  if (rest == "Z") return utc;
  int oh = 0, om = 0;
  if ((rest[0] == '+' || rest[0] == '-') && std::sscanf(rest.c_str() + 1, "%2d:%2d", &oh, &om) == 2) {
    const double off = 3600.0 * oh + 60.0 * om;
    return rest[0] == '+' ? utc - off : utc + off;
  }
  return kNaN;
}

std::string iso_utc(double t) {
  if (!std::isfinite(t)) return "";
  const auto secs = static_cast<std::time_t>(std::floor(t));
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string machine_text(const std::string& cpu, const std::string& kernel) {
  if (cpu.empty()) return "unknown machine";
  return fmt::format("{} (BLAS kernel {})", cpu, kernel.empty() ? "unknown" : kernel);
}

std::string commit_text(const std::string& c) { return c.empty() ? "unknown" : c; }

// Folders of a suite that hold no measurements (or copies of them).
bool skip_folder(const fs::path& p) {
  const std::string n = p.filename().string();
  return n.empty() || n[0] == '.' || n == "checkpoints" || n == "configs" || n == "logs" || n == "slurm" ||
         n == "report";
}

double unit_ns(const std::string& unit) {
  if (unit == "ns" || unit.empty()) return 1;
  if (unit == "us") return 1e3;
  if (unit == "ms") return 1e6;
  if (unit == "s") return 1e9;
  return kNaN;
}

// Google Benchmark JSON: per benchmark, its iteration rows (or the median /
// mean aggregate when a file holds aggregates only); GFLOP/s where the row
// has it, else real_time. Returns false when the JSON is not a benchmark file.
bool read_bench(const std::string& path, const json& doc, std::size_t input, Inputs& in) {
  if (!doc.is_object() || !doc.contains("benchmarks") || !doc["benchmarks"].is_array()) return false;
  const json ctx = doc.contains("context") && doc["context"].is_object() ? doc["context"] : json::object();
  auto text = [&](const char* k) { return ctx.contains(k) && ctx[k].is_string() ? ctx[k].get<std::string>() : ""; };
  const std::string commit = commit_text(text("asgd_commit"));
  const std::string machine = machine_text(text("asgd_cpu_model"), text("asgd_blas_kernel"));
  double time = parse_time(text("date"));
  if (!std::isfinite(time)) time = file_mtime(path);
  std::map<std::string, std::vector<const json*>> iterations;
  std::map<std::string, std::map<std::string, const json*>> aggregates;
  int errors = 0;
  for (const json& b : doc["benchmarks"]) {
    if (!b.is_object() || !b.contains("name") || !b["name"].is_string()) {
      in.skipped.push_back(path + ": a benchmark entry without a name (entry skipped)");
      continue;
    }
    if (b.value("error_occurred", false)) {
      ++errors;
      continue;
    }
    const std::string name = b.contains("run_name") && b["run_name"].is_string() ? b["run_name"].get<std::string>()
                                                                                 : b["name"].get<std::string>();
    if (b.value("run_type", std::string("iteration")) == "aggregate")
      aggregates[name][b.value("aggregate_name", std::string())] = &b;
    else
      iterations[name].push_back(&b);
  }
  for (const auto& [name, aggs] : aggregates) {
    if (iterations.count(name)) continue;
    for (const char* a : {"median", "mean"})
      if (aggs.count(a)) {
        iterations[name].push_back(aggs.at(a));
        break;
      }
  }
  if (errors) in.skipped.push_back(fmt::format("{}: {} benchmark{} reported an error (skipped)", path, errors,
                                               errors == 1 ? "" : "s"));
  for (const auto& [name, rows] : iterations) {
    for (const json* r : rows) {
      Sample s;
      s.machine = machine;
      s.commit = commit;
      s.time = time;
      s.input = input;
      const std::string fk = flops_key(*r);
      if (!fk.empty()) {
        s.figure = name + " " + fk;
        s.unit = fk;
        s.value = (*r)[fk].get<double>();
      } else if (r->contains("real_time") && (*r)["real_time"].is_number()) {
        const double scale = unit_ns(r->value("time_unit", std::string("ns")));
        if (!std::isfinite(scale)) continue;
        s.figure = name + " real_time";
        s.unit = "ns";
        s.value = (*r)["real_time"].get<double>() * scale;
        s.higher_is_better = false;
      } else {
        continue;
      }
      if (std::isfinite(s.value)) in.samples.push_back(std::move(s));
    }
  }
  return true;
}

struct ResultRun {
  std::string file, suite, commit, machine, mode, status;
  json config;
  double time = kNaN, samples_per_s = kNaN, final_test_error = kNaN;
  std::size_t input = 0;
};

bool read_result(const std::string& path, std::size_t input, std::vector<ResultRun>& runs, Inputs& in) {
  io::RunResult r;
  try {
    r = io::read_results(path);
  } catch (const std::exception& e) {
    std::string why = e.what();
    if (why.rfind(path + ": ", 0) == 0) why.erase(0, path.size() + 2);
    in.skipped.push_back(fmt::format("{}: {}", path, why));
    return false;
  }
  ResultRun run;
  run.file = path;
  run.suite = r.suite;
  run.commit = commit_text(r.git_commit);
  run.mode = r.mode;
  run.status = r.status;
  run.input = input;
  run.config = json::parse(r.config_json, nullptr, false);
  if (!run.config.is_object()) run.config = json::object();
  const json m = json::parse(r.machine_json, nullptr, false);
  std::string cpu, blas;
  if (m.is_object() && m.contains("cpu_model") && m["cpu_model"].is_string()) cpu = m["cpu_model"].get<std::string>();
  if (m.is_object() && m.contains("blas") && m["blas"].is_string()) blas = asgd::blas_kernel(m["blas"].get<std::string>());
  run.machine = machine_text(cpu, blas);
  // io::RunResult does not carry the `created` attribute; the end of training
  // is written in the same call (then its start, then the file's time).
  run.time = std::isfinite(r.train_finished) ? r.train_finished
             : std::isfinite(r.train_started) ? r.train_started
                                              : file_mtime(path);
  run.samples_per_s = r.summary.samples_per_s;
  run.final_test_error = r.summary.final_test_error;
  if (r.status != "completed") {
    in.skipped.push_back(fmt::format("{}: status {} (no figures)", path, r.status));
    return false;
  }
  runs.push_back(std::move(run));
  return true;
}

std::string value_text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// Figures of results files: per suite, a configuration is named by the config
// fields (shared by every run of the suite, minus seeds and bookkeeping) whose
// values differ between its runs, so that a field added by a newer build does
// not start a new series.
void result_samples(const std::vector<ResultRun>& runs, Inputs& in) {
  std::map<std::string, std::vector<const ResultRun*>> by_suite;
  for (const auto& r : runs) by_suite[r.suite].push_back(&r);
  for (const auto& [suite, list] : by_suite) {
    std::set<std::string> shared;
    bool first = true;
    for (const ResultRun* r : list) {
      std::set<std::string> keys;
      for (auto it = r->config.begin(); it != r->config.end(); ++it) keys.insert(it.key());
      if (first) {
        shared = keys;
        first = false;
      } else {
        std::set<std::string> both;
        std::set_intersection(shared.begin(), shared.end(), keys.begin(), keys.end(),
                              std::inserter(both, both.end()));
        shared.swap(both);
      }
    }
    for (const char* f : kNonKeyFields) shared.erase(f);
    std::vector<std::string> varying;
    for (const auto& name : shared) {
      std::set<std::string> values;
      for (const ResultRun* r : list) values.insert(r->config[name].dump());
      if (values.size() > 1) varying.push_back(name);
    }
    for (const ResultRun* r : list) {
      std::string label;
      for (const auto& name : varying) label += (label.empty() ? "" : " ") + name + "=" + value_text(r->config[name]);
      if (label.empty()) label = r->config.contains("model") ? value_text(r->config["model"]) : "all runs";
      const std::string base = suite + " " + label;
      Sample s;
      s.machine = r->machine;
      s.commit = r->commit;
      s.time = r->time;
      s.input = r->input;
      if (r->mode == "real" && r->samples_per_s > 0 && std::isfinite(r->samples_per_s)) {
        s.figure = base + ": samples/s";
        s.unit = "samples/s";
        s.value = r->samples_per_s;
        in.samples.push_back(s);
      }
      if (std::isfinite(r->final_test_error)) {
        s.figure = base + ": final test error";
        s.unit = "error";
        s.value = r->final_test_error;
        s.higher_is_better = false;
        s.absolute = true;
        in.samples.push_back(s);
      }
    }
  }
}

Inputs read_inputs(const std::vector<std::string>& inputs) {
  Inputs in;
  std::vector<ResultRun> runs;
  auto read_json = [&](const std::string& path, std::size_t input, bool given) {
    std::ifstream f(path, std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
    if (!f && !f.eof()) throw Error(path + ": cannot read");
    const json doc = json::parse(bytes, nullptr, false);
    const bool ok = !doc.is_discarded() && read_bench(path, doc, input, in);
    if (!ok && given)
      throw Error(path + ": not a Google Benchmark JSON file (no \"benchmarks\" array" +
                  std::string(doc.is_discarded() ? ", not valid JSON)" : ")"));
    if (ok) ++in.files;
  };
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::string& arg = inputs[i];
    std::error_code ec;
    if (arg.empty()) throw Error("history: empty path");
    if (!fs::exists(arg, ec)) throw Error(arg + ": no such file or folder");
    if (!fs::is_directory(arg, ec)) {
      const std::string ext = fs::path(arg).extension().string();
      if (ext == ".h5") {
        in.files += read_result(arg, i, runs, in);
      } else if (ext == ".json") {
        read_json(arg, i, true);
      } else {
        throw Error(arg + ": expected a results file (.h5), a Google Benchmark JSON file (.json) or a folder");
      }
      continue;
    }
    std::vector<std::string> files;
    fs::recursive_directory_iterator it(arg, fs::directory_options::skip_permission_denied, ec), end;
    if (ec) throw Error(arg + ": cannot read folder: " + ec.message());
    for (; it != end; it.increment(ec)) {
      if (ec) throw Error(arg + ": cannot read folder: " + ec.message());
      if (it->is_directory(ec)) {
        if (skip_folder(it->path())) it.disable_recursion_pending();
        continue;
      }
      const std::string ext = it->path().extension().string();
      if (ext == ".h5" || ext == ".json") files.push_back(it->path().string());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      if (fs::path(f).extension() == ".h5") in.files += read_result(f, i, runs, in);
      else read_json(f, i, false);
    }
  }
  result_samples(runs, in);
  return in;
}

// ---- series ----

struct Point {
  std::string commit, label;  // label: the commit, or the input when by_input
  double time = kNaN;
  std::vector<double> samples;
};

struct Series {
  std::string figure, unit, machine;
  bool higher_is_better = true, absolute = false;
  std::vector<Point> points;
  std::vector<Step> steps;
  double median_all = kNaN;
  bool regression(const Step& s) const { return higher_is_better ? s.after < s.before : s.after > s.before; }
};

std::vector<Series> build_series(const Inputs& in, const HistoryOptions& opt) {
  std::map<std::pair<std::string, std::string>, Series> by_key;  // (figure, machine)
  std::map<std::pair<std::string, std::string>, std::map<std::string, Point>> points;
  for (const Sample& s : in.samples) {
    const auto key = std::make_pair(s.figure, s.machine);
    Series& se = by_key[key];
    se.figure = s.figure;
    se.unit = s.unit;
    se.machine = s.machine;
    se.higher_is_better = s.higher_is_better;
    se.absolute = s.absolute;
    const std::string label = opt.by_input ? fmt::format("{}@{}", s.commit, opt.inputs[s.input]) : s.commit;
    Point& p = points[key][label];
    p.commit = s.commit;
    p.label = label;
    if (!(p.time <= s.time)) p.time = s.time;  // the earliest sample (NaN replaced)
    p.samples.push_back(s.value);
  }
  std::vector<Series> out;
  for (auto& [key, se] : by_key) {
    for (auto& [label, p] : points[key]) se.points.push_back(std::move(p));
    std::stable_sort(se.points.begin(), se.points.end(), [](const Point& a, const Point& b) {
      const bool fa = std::isfinite(a.time), fb = std::isfinite(b.time);
      if (fa != fb) return fa;  // unknown times last
      return fa && a.time < b.time;
    });
    std::vector<double> all;
    std::vector<std::vector<double>> values;
    for (const auto& p : se.points) {
      all.insert(all.end(), p.samples.begin(), p.samples.end());
      values.push_back(p.samples);
    }
    se.median_all = median(all);
    StepOptions so;
    so.relative = !se.absolute;
    so.min_effect = se.absolute ? opt.error_band : opt.min_effect;
    so.alpha = opt.alpha;
    so.min_samples = opt.min_samples;
    se.steps = detect_steps(values, so);
    out.push_back(std::move(se));
  }
  return out;
}

std::string short_commit(const std::string& c) { return c.size() > 12 ? c.substr(0, 12) : c; }

// A value for tables: the figure's unit (ns shown in the largest unit that keeps it >= 1).
std::string show(const Series& se, double v) {
  if (!std::isfinite(v)) return "";
  if (se.unit == "error") return fmt::format("{:.2f}%", 100 * v);
  if (se.unit == "ns") {
    if (v >= 1e9) return fmt::format("{:.4g} s", v / 1e9);
    if (v >= 1e6) return fmt::format("{:.4g} ms", v / 1e6);
    if (v >= 1e3) return fmt::format("{:.4g} us", v / 1e3);
    return fmt::format("{:.4g} ns", v);
  }
  return fmt::format("{:.4g} {}", v, se.unit);
}

std::string show_change(const Series& se, double change) {
  return se.absolute ? fmt::format("{:+.2f} pp", 100 * change) : fmt::format("{:+.1f}%", 100 * change);
}

constexpr int kPlotTimeoutS = 600;

}  // namespace

HistorySummary history(const HistoryOptions& opt) {
  if (opt.inputs.empty()) throw Error("history: no inputs given");
  if (!(opt.min_effect >= 0) || !(opt.error_band >= 0) || !(opt.alpha > 0 && opt.alpha < 1) || opt.min_samples < 1)
    throw Error(fmt::format("history: bad options (min effect {} and error band {} must be >= 0, alpha {} in (0, 1), "
                            "min samples {} >= 1)",
                            opt.min_effect, opt.error_band, opt.alpha, opt.min_samples));
  const Inputs in = read_inputs(opt.inputs);
  if (in.samples.empty())
    throw Error(fmt::format("history: no measurements in {} (completed results files runs/*.h5 or Google Benchmark "
                            "JSON files){}",
                            opt.inputs.size() == 1 ? opt.inputs.front() : fmt::format("{} inputs", opt.inputs.size()),
                            in.skipped.empty() ? "" : fmt::format("; {} skipped, first: {}", in.skipped.size(),
                                                                  in.skipped.front())));
  std::vector<Series> series = build_series(in, opt);

  std::error_code ec;
  fs::create_directories(opt.out_dir, ec);
  if (ec || !fs::is_directory(opt.out_dir, ec))
    throw Error(fmt::format("{}: cannot create the history folder: {}", opt.out_dir, ec ? ec.message() : "not a folder"));
  auto out = [&](const std::string& name) { return (fs::path(opt.out_dir) / name).string(); };

  HistorySummary sum;
  std::set<std::string> commits, machines;
  Table hist{{"figure", "machine", "unit", "better", "point", "commit", "label", "time", "n", "median", "min", "max",
              "normalised", "level", "step"},
             {}};
  Table steps{{"figure", "machine", "unit", "better", "commit_before", "commit", "time", "before", "after", "change",
               "p_adjusted", "verdict"},
              {}};
  std::string steps_md_rows, series_md_rows;
  std::vector<std::string> lines;  // printed at the end
  for (const Series& se : series) machines.insert(se.machine);
  for (const Series& se : series) {
    ++sum.series;
    sum.points += static_cast<int>(se.points.size());
    // segment level of each point: the median of its segment's samples
    std::vector<double> level(se.points.size(), kNaN);
    std::vector<std::string> step_at(se.points.size());
    std::size_t lo = 0;
    for (std::size_t j = 0; j <= se.steps.size(); ++j) {
      const std::size_t hi = j < se.steps.size() ? se.steps[j].at : se.points.size();
      std::vector<double> seg;
      for (std::size_t i = lo; i < hi; ++i) seg.insert(seg.end(), se.points[i].samples.begin(), se.points[i].samples.end());
      const double m = median(seg);
      for (std::size_t i = lo; i < hi; ++i) level[i] = m;
      lo = hi;
    }
    for (const Step& st : se.steps) {
      const bool reg = se.regression(st);
      step_at[st.at] = reg ? "regression" : "improvement";
      ++sum.steps;
      sum.regressions += reg;
      sum.latest_regressions += reg && st.at + 1 == se.points.size();
      const Point& before = se.points[st.at - 1];
      const Point& at = se.points[st.at];
      steps.rows.push_back({se.figure, se.machine, se.unit, se.higher_is_better ? "higher" : "lower", before.label,
                            at.label, iso_utc(at.time), num(st.before), num(st.after), num(st.change), num(st.p),
                            reg ? "regression" : "improvement"});
      lines.push_back(fmt::format("{}: {} at {} ({} -> {}, {}, p {:.2g}){}", reg ? "REGRESSION" : "improvement",
                                  se.figure, at.label, show(se, st.before), show(se, st.after),
                                  show_change(se, st.change), st.p,
                                  machines.size() > 1 ? " on " + se.machine : std::string()));
      steps_md_rows += fmt::format("| {} | `{}` → `{}` | {} | {} → {} | {} | {:.2g} | {} |\n", se.figure,
                                   short_commit(before.label), short_commit(at.label), iso_utc(at.time),
                                   show(se, st.before), show(se, st.after), show_change(se, st.change), st.p,
                                   reg ? "**regression**" : "improvement");
    }
    for (std::size_t i = 0; i < se.points.size(); ++i) {
      const Point& p = se.points[i];
      commits.insert(p.commit);
      const auto [mn, mx] = std::minmax_element(p.samples.begin(), p.samples.end());
      const double med = median(p.samples);
      const double norm = se.median_all != 0 ? med / se.median_all : kNaN;
      const double lvl = se.median_all != 0 ? level[i] / se.median_all : kNaN;
      hist.rows.push_back({se.figure, se.machine, se.unit, se.higher_is_better ? "higher" : "lower",
                           std::to_string(i), p.commit, p.label, iso_utc(p.time), std::to_string(p.samples.size()),
                           num(med), num(*mn), num(*mx), num(norm), num(lvl), step_at[i]});
    }
    const double first = median(se.points.front().samples), last = median(se.points.back().samples);
    std::string steps_text;
    for (const Step& st : se.steps)
      steps_text += fmt::format("{}{} at `{}`", steps_text.empty() ? "" : ", ", show_change(se, st.change),
                                short_commit(se.points[st.at].label));
    series_md_rows += fmt::format("| {} | {} | {} | {} | {} | {} |\n", se.figure, se.points.size(), show(se, first),
                                  show(se, last),
                                  se.points.size() > 1 ? show_change(se, effect_of(first, last, !se.absolute)) : "",
                                  steps_text.empty() ? "none" : steps_text);
  }
  write_file_atomic(out("history.csv"), to_csv(hist));
  write_file_atomic(out("steps.csv"), to_csv(steps));

  std::string plot_problem;
  std::vector<std::string> pngs;
  if (!opt.plot_script.empty()) {
    for (const auto& entry : fs::directory_iterator(opt.out_dir, ec)) {
      const std::string n = entry.path().filename().string();
      if (n.rfind("history-", 0) == 0 && entry.path().extension() == ".png") fs::remove(entry.path(), ec);
    }
    const std::string log = out("plot.log");
    const std::string err = run_process({opt.python, opt.plot_script, opt.out_dir}, log, kPlotTimeoutS);
    if (err.empty()) {
      fs::remove(log, ec);
    } else {
      plot_problem = fmt::format("`{} {}` failed ({}); its output is in `plot.log`", opt.python, opt.plot_script, err);
      const std::string tail = tail_lines(log, 1);
      std::fprintf(stderr, "warning: plot script failed (%s)%s\n", err.c_str(), tail.empty() ? "" : (": " + tail).c_str());
    }
    for (const auto& entry : fs::directory_iterator(opt.out_dir, ec)) {
      const std::string n = entry.path().filename().string();
      if (n.rfind("history-", 0) == 0 && entry.path().extension() == ".png") pngs.push_back(n);
    }
    std::sort(pngs.begin(), pngs.end());
  }

  double t0 = kNaN, t1 = kNaN;
  for (const Series& se : series)
    for (const Point& p : se.points) {
      if (!(t0 <= p.time)) t0 = p.time;
      if (!(t1 >= p.time)) t1 = p.time;
    }
  std::string md = "# Benchmark history\n\n";
  md += fmt::format("{} files ({} samples) from {} input{}: {} series over {} commit{}{}, {} to {}.\n\n", in.files,
                    in.samples.size(), opt.inputs.size(), opt.inputs.size() == 1 ? "" : "s", sum.series,
                    commits.size(), commits.size() == 1 ? "" : "s",
                    opt.by_input ? " (one point per input)" : " (one point per commit)", iso_utc(t0), iso_utc(t1));
  md += "Machines: " + fmt::format("{}", [&] {
    std::string s;
    for (const auto& m : machines) s += (s.empty() ? "" : "; ") + m;
    return s;
  }()) + ". A series is one figure on one machine.\n\n";
  md += fmt::format(
      "**Method.** Points in time order (a commit's time: its earliest sample; results files: the end of "
      "training, benchmark files: their `date`). Binary segmentation: within a segment every split with at least "
      "{} sample{} on each side is a candidate; a split counts only if the medians of its two sides differ by at "
      "least {} ({}); the candidate with the smallest two-sided Mann-Whitney p-value is a step if that p-value "
      "times the number of candidates (Bonferroni) is at most {}; both sides are searched again, and each step is "
      "re-tested between its neighbours. Values below are medians.\n\n",
      opt.min_samples, opt.min_samples == 1 ? "" : "s", fmt::format("{:g}%", 100 * opt.min_effect),
      fmt::format("relative, throughput and time; test error: {:g} percentage points absolute", 100 * opt.error_band), opt.alpha);
  md += fmt::format("## Steps\n\n{} step{} ({} regression{}, {} at the newest point of its series). Table: "
                    "[steps.csv](steps.csv).\n\n",
                    sum.steps, sum.steps == 1 ? "" : "s", sum.regressions, sum.regressions == 1 ? "" : "s",
                    sum.latest_regressions);
  if (!steps_md_rows.empty())
    md += "| figure | commits | time | median before → after | change | p (adjusted) | verdict |\n"
          "|---|---|---|---|---|---|---|\n" +
          steps_md_rows + "\n";
  md += "## Series\n\nPer point: [history.csv](history.csv) (median, min, max, normalised to the series median, "
        "segment level).\n\n| figure | points | first | latest | latest vs first | steps |\n|---|---|---|---|---|---|\n" +
        series_md_rows + "\n";
  md += "## Plots\n\n";
  if (opt.plot_script.empty()) md += "Not made (no plot script given).\n";
  if (!plot_problem.empty()) md += "**The plot script failed:** " + plot_problem + ".\n";
  for (const auto& p : pngs) md += fmt::format("![{0}]({0})\n", p);
  md += "\n";
  if (!in.skipped.empty()) {
    md += "## Skipped\n\n";
    for (const auto& s : in.skipped) md += "- " + s + "\n";
    md += "\n";
  }
  write_file_atomic(out("history.md"), md);

  if (!opt.quiet) {
    for (const auto& l : lines) std::printf("%s\n", l.c_str());
    std::printf("%s\n", fmt::format("history: {} series, {} points over {} commits: {} steps ({} regressions, {} at "
                                    "the newest point) -> {}",
                                    sum.series, sum.points, commits.size(), sum.steps, sum.regressions,
                                    sum.latest_regressions, out("history.md")).c_str());
    if (!in.skipped.empty()) std::printf("%s\n", fmt::format("{} files or entries skipped (listed in history.md)", in.skipped.size()).c_str());
    std::fflush(stdout);
  }
  return sum;
}

}  // namespace asgd::report
