// asgd history's inputs: Google Benchmark JSON rows and completed results
// files, as samples of figures (throughput, time, test error) per commit and
// machine.
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

#include "common/cpu_name.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "common/nesting.hpp"
#include "common/text.hpp"
#include "report/bench.hpp"
#include "report/history_detail.hpp"

namespace asgd::report::detail {

namespace fs = std::filesystem;

namespace {


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

}  // namespace


std::string iso_utc(double t) {
  if (!std::isfinite(t)) return "";
  const auto secs = static_cast<std::time_t>(std::floor(t));
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

namespace {


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

// Google Benchmark JSON: per benchmark, its rows (bench.hpp); GFLOP/s where
// the row has it, else real_time.
void read_bench(const std::string& path, const BenchFile& f, std::size_t input, Inputs& in) {
  const json& doc = f.doc;
  const json ctx = doc.contains("context") && doc["context"].is_object() ? doc["context"] : json::object();
  auto text = [&](const char* k) { return ctx.contains(k) && ctx[k].is_string() ? ctx[k].get<std::string>() : ""; };
  const std::string commit = commit_text(text("asgd_commit"));
  const std::string machine = machine_text(text("asgd_cpu_model"), text("asgd_blas_kernel"));
  double time = parse_time(text("date"));
  if (!std::isfinite(time)) {
    time = file_mtime(path);
    if (!text("date").empty())
      in.skipped.push_back(fmt::format("{}: context.date '{}' is not a date (the file's time used)", path,
                                       shorten(text("date"))));
  }
  for (const auto& b : f.bad_entries) in.skipped.push_back(b + " (entry skipped)");
  if (f.error_entries)
    in.skipped.push_back(fmt::format("{}: {} benchmark{} reported an error (skipped)", path, f.error_entries,
                                     f.error_entries == 1 ? "" : "s"));
  int bad = 0;  // rows without a positive finite figure
  for (const auto& [name, rows] : f.series) {
    for (const json* r : rows) {
      Sample s;
      s.machine = machine;
      s.commit = commit;
      s.time = time;
      s.input = input;
      const bool flops = !flops_key(*r).empty();
      const BenchFigure fig = bench_figure(*r, flops);
      s.figure = name + " " + fig.key;
      s.unit = flops ? fig.key : "ns";
      s.value = fig.value;
      s.higher_is_better = flops;
      if (fig.problem.empty()) in.samples.push_back(std::move(s));
      else ++bad;
    }
  }
  if (bad)
    in.skipped.push_back(fmt::format("{}: {} benchmark row{} without a positive finite real_time or GFLOP/s up to "
                                     "{:g}, or with an unknown time_unit (skipped)",
                                     path, bad, bad == 1 ? "" : "s", kMaxBenchFigure));
}

struct ResultRun {
  std::string file, suite, commit, machine;
  RunMode mode = RunMode::real;
  json config;
  double time = kNaN, samples_per_s = kNaN, final_test_error = kNaN;
  std::size_t input = 0;
  std::string identity;  // copy_identity: equal for copies of one file
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
  run.input = input;
  run.config = parse_json_bounded<json>(r.config_json);
  if (!run.config.is_object()) run.config = json::object();
  const json m = parse_json_bounded<json>(r.machine_json);
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
  if (r.status != RunStatus::completed) {
    in.skipped.push_back(fmt::format("{}: status {} (no figures)", path, to_text(r.status)));
    return false;
  }
  run.identity = copy_identity(r, run.config);
  for (const auto& earlier : runs)
    if (earlier.identity == run.identity) {  // a copy, or one file given twice: one measurement
      in.skipped.push_back(fmt::format("{}: a copy of {} (counted once)", path, earlier.file));
      return false;
    }
  runs.push_back(std::move(run));
  return true;
}

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
      if (r->mode == RunMode::real && r->samples_per_s > 0 && std::isfinite(r->samples_per_s)) {
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

}  // namespace

Inputs read_inputs(const std::vector<std::string>& inputs) {
  Inputs in;
  std::vector<ResultRun> runs;
  auto read_json = [&](const std::string& path, std::size_t input, bool given) {
    std::string bytes;
    try {
      bytes = read_text_file(path, "benchmark JSON file", path);
    } catch (const Error& e) {
      if (given) throw;
      in.skipped.push_back(std::string(e.what()) + " (skipped)");
      return;
    }
    const BenchFile f = read_bench_file(bytes, path);
    const bool empty = f.problem == path + ": no benchmarks in the file";
    if (!f.problem.empty() && !empty) {
      if (given) throw Error(f.problem);
      if (!f.json_valid) in.skipped.push_back(f.problem + " (skipped)");
      return;
    }
    if (!empty) read_bench(path, f, input, in);
    ++in.files;
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

}  // namespace asgd::report::detail
