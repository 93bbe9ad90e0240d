#include "report/detail.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "common/defaults.hpp"
#include "common/error.hpp"
#include "common/hash.hpp"
#include "common/nesting.hpp"
#include "common/process.hpp"
#include "common/text.hpp"

namespace asgd::report::detail {

namespace fs = std::filesystem;

std::string config_key(const json& config) {
  if (!config.is_object()) return "";
  json k = config;
  for (const char* name : kNonKeyFields) k.erase(name);
  return k.dump();
}

std::string short_hash(const std::string& text) {
  // FNV-1a 64 from an offset one digit short of the standard one (ids in
  // existing reports depend on it)
  const std::uint64_t h = fnv1a64(text, 1469598103934665603ULL);
  return fmt::format("{:08x}", static_cast<std::uint32_t>(h ^ (h >> 32)));
}

std::string value_text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// a results file's config may hold anything: a field is looked up only in an object
const json* config_field(const json& config, const char* name) {
  if (!config.is_object()) return nullptr;
  const auto it = config.find(name);
  return it == config.end() ? nullptr : &*it;
}

std::string field_text(const json& config, const char* name) {
  const json* v = config_field(config, name);
  if (!v || v->is_null()) return "";
  if (v->is_string()) return v->get<std::string>();
  return v->dump();
}

namespace {

// The configuration's fields the tables show, as text ("" where absent).
void read_config_fields(RunInfo& info, const io::RunResult& r) {
  info.seed = field_text(info.config, "seed");
  if (info.config.is_object() && info.config.contains("learners") && info.config["learners"].is_number_integer()) {
    info.learners = info.config["learners"].get<int>();
  } else {
    info.learners = static_cast<int>(r.learners.size());
  }
  if (info.config.is_object() && info.config.contains("dataset")) {
    const auto& ds = info.config["dataset"];
    info.dataset = ds.is_object() ? field_text(ds, "kind") : (ds.is_string() ? ds.get<std::string>() : "");
  }
  info.n = field_text(info.config, "softsync_n");
  info.n_sync = field_text(info.config, "n_sync");
  info.lr_policy = field_text(info.config, "lr_policy");
  info.batch = field_text(info.config, "batch");
}

// A virtual run's clock: its profile, or the ideal clock's kind and times.
std::string timing_model_text(const std::string& timing_model_json) {
  const json tm = parse_json_bounded<json>(timing_model_json);
  if (tm.is_object() && tm.contains("profile") && tm["profile"].is_string())
    return fmt::format("profile {} ({})", tm["profile"].get<std::string>(), tm.value("profile_path", std::string("?")));
  if (tm.is_object() && tm.contains("kind") && tm["kind"].is_string())
    return fmt::format("ideal clock ({}, compute {:g} s, comm {:g} s)", tm["kind"].get<std::string>(),
                       tm.value("compute_s", kNaN), tm.value("comm_s", kNaN));
  return "";
}

}  // namespace

RunInfo load_run(const std::string& path) {
  RunInfo info;
  info.file = path;
  io::RunResult r;
  try {
    r = io::read_results(path);
  } catch (const Error& e) {
    info.error = e.what();
    return info;
  } catch (const std::exception& e) {  // e.g. bad_alloc on an absurd dataset size
    info.error = path + ": " + e.what();
    return info;
  }
  info.readable = true;
  info.run_id = r.run_id;
  info.suite = r.suite;
  info.model = r.model;
  info.mode = r.mode;
  info.protocol = r.protocol;
  info.status = r.status;
  info.config = parse_json_bounded<json>(r.config_json);
  if (info.config.is_discarded()) info.config = nullptr;
  info.key = config_key(info.config);
  // A config that is not a JSON object cannot be grouped: the run stands alone.
  if (info.key.empty()) info.key = "unparsable config of " + path;
  info.config_id = short_hash(info.key);
  info.identity = copy_identity(r, info.config);
  read_config_fields(info, r);
  info.summary = r.summary;
  info.mean_tau = mean_staleness(r.staleness_histogram, r.updates);
  // only numbers and strings count
  if (const json* v = config_field(info.config, "n_sync"); r.protocol == "nsync" && v && v->is_number_integer()) {
    const auto n = v->get<std::int64_t>();
    if (n > 1 && n <= 1000000) info.per_gradient = static_cast<double>(n);
  }
  if (const json* v = config_field(info.config, "warm_steps"); v && v->is_number()) info.warm = v->get<double>() > 0;
  if (r.protocol == "nsync") {
    const json* v = config_field(info.config, "merge");
    info.merge = v && v->is_string() ? v->get<std::string>() : kDefaultMerge;
  }
  info.smoothed_train_error = smoothed_train_error(r.updates, kSmoothingWindow, info.per_gradient);
  info.time_to_train_target =
      time_to_train_target(r.updates, r.summary.target_error, kSmoothingWindow, info.per_gradient);
  if (info.per_gradient > 1)
    info.sawtooth = periodic_component(r.minibatch_error, static_cast<std::size_t>(info.per_gradient));
  info.n_updates = r.updates.size();
  info.n_evals = r.evals.size();
  read_machine(info, r);
  if (r.mode == RunMode::virtual_learners) info.timing_model = timing_model_text(r.timing_model_json);
  info.histogram = std::move(r.staleness_histogram);
  info.updates = std::move(r.updates);
  info.learner_rows = std::move(r.learners);
  return info;
}

std::vector<RunInfo> load_runs(const std::vector<std::string>& files) {
  std::vector<RunInfo> runs;
  runs.reserve(files.size());
  for (const auto& f : files) runs.push_back(load_run(f));
  return runs;
}

std::string copy_identity(const io::RunResult& r, const json& config) {
  const std::string key = config_key(config);
  if (key.empty()) return "";
  const io::Summary& s = r.summary;
  return fmt::format("{}|{}|{}|{}|{:a}|{:a}|{}|{:a}|{:a}|{:a}", key,
                     config.contains("seed") ? config["seed"].dump() : "", r.host, to_text(r.status), r.train_started,
                     r.train_finished, s.updates, s.train_time_s, s.samples_per_s, s.final_test_error);
}

std::vector<std::string> drop_copies(std::vector<RunInfo>& runs) {
  std::vector<std::string> notes;
  std::vector<RunInfo> kept;
  kept.reserve(runs.size());
  std::map<std::string, std::size_t> first_of;  // copy identity -> index in kept
  for (auto& r : runs) {
    const auto first = r.identity.empty() ? first_of.end() : first_of.find(r.identity);
    if (first == first_of.end()) {
      if (!r.identity.empty()) first_of.emplace(r.identity, kept.size());
      kept.push_back(std::move(r));
      continue;
    }
    const RunInfo& k = kept[first->second];
    notes.push_back(fmt::format("{}: a copy of {} (run {}{}: the same configuration, seed, training interval and "
                                "summary); counted once",
                                r.file, k.file, k.run_id, r.run_id == k.run_id ? "" : ", here named " + r.run_id));
  }
  runs = std::move(kept);
  return notes;
}

std::vector<std::string> list_h5(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(dir + ": no such folder");
  std::vector<std::string> files;
  fs::directory_iterator it(dir, ec);
  if (ec) throw Error(dir + ": cannot read folder: " + ec.message());
  for (const auto& entry : it) {
    const fs::path& p = entry.path();
    if (p.extension() == ".h5" && !entry.is_directory(ec)) files.push_back(p.string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string Agg::text() const {
  switch (state) {
    case State::diverged: return "diverged";
    case State::failed: return "failed";
    default: return "";
  }
}

Agg aggregate(const std::vector<Value>& values) {
  Agg a;
  std::vector<double> xs;
  bool any_diverged = false, any_failed = false;
  for (const auto& v : values) {
    if (v.state == Agg::State::number && std::isfinite(v.v)) xs.push_back(v.v);
    any_diverged = any_diverged || v.state == Agg::State::diverged;
    any_failed = any_failed || v.state == Agg::State::failed;
  }
  if (!xs.empty()) {
    a.state = Agg::State::number;
    a.iv = mean_ci95(xs);
  } else if (any_diverged) {
    a.state = Agg::State::diverged;
  } else if (any_failed) {
    a.state = Agg::State::failed;
  }
  return a;
}

std::string num(double x) {
  if (std::isnan(x)) return "";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return fmt::format("{}", x);
}

std::vector<std::string> agg_csv(const Agg& a) {
  if (a.state != Agg::State::number) {
    const std::string t = a.text();
    return {t, t, t, "0"};
  }
  return {num(a.iv.mean), num(a.iv.lo), num(a.iv.hi), std::to_string(a.iv.n)};
}

std::string agg_md(const Agg& a, bool percent, int digits) {
  if (a.state != Agg::State::number) return a.state == Agg::State::blank ? "–" : a.text();
  const double s = percent ? 100 : 1;
  const char* unit = percent ? "%" : "";
  if (a.iv.n < 2) return fmt::format("{:.{}f}{} (n=1)", a.iv.mean * s, digits, unit);
  return fmt::format("{:.{}f}{} [{:.{}f}, {:.{}f}]", a.iv.mean * s, digits, unit, a.iv.lo * s, digits, a.iv.hi * s,
                     digits);
}

std::string csv_escape(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string to_csv(const Table& t) {
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    for (std::size_t i = 0; i < cells.size(); ++i) {
      if (i) out += ',';
      out += csv_escape(cells[i]);
    }
    out += '\n';
  };
  line(t.header);
  for (const auto& r : t.rows) line(r);
  return out;
}

std::string to_markdown(const Table& t) {
  auto cell = [](const std::string& s) {
    std::string out;
    for (char c : s) {
      if (c == '|') out += "\\|";
      else if (c == '\n' || c == '\r') out += ' ';
      else out += c;
    }
    return out;
  };
  std::string out = "|";
  for (const auto& h : t.header) out += " " + cell(h) + " |";
  out += "\n|";
  for (std::size_t i = 0; i < t.header.size(); ++i) out += "---|";
  out += '\n';
  for (const auto& r : t.rows) {
    out += "|";
    for (const auto& c : r) out += " " + cell(c) + " |";
    out += '\n';
  }
  return out;
}

std::string flops_key(const json& row) {
  for (auto it = row.begin(); it != row.end(); ++it) {
    std::string k = it.key();
    std::transform(k.begin(), k.end(), k.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (k == "gflop/s" || k == "gflops") return it.key();
  }
  return "";
}

bool bench_flag(const json& row, const char* key, bool def) {
  if (!row.contains(key)) return def;
  if (!row[key].is_boolean())
    throw Error(fmt::format("field {} is not true or false: {}", key, shorten(row[key].dump())));
  return row[key].get<bool>();
}

std::string bench_text(const json& row, const char* key, const std::string& def) {
  if (!row.contains(key)) return def;
  if (!row[key].is_string()) throw Error(fmt::format("field {} is not text: {}", key, shorten(row[key].dump())));
  return row[key].get<std::string>();
}

PlotRun run_plot_script(const std::string& python, const std::string& script, const std::vector<std::string>& args,
                        const std::string& out_dir) {
  constexpr int kPlotTimeoutS = 600;
  std::vector<std::string> argv = {python, script};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string log = (fs::path(out_dir) / "plot.log").string();
  const std::string err = run_process(argv, log, kPlotTimeoutS);
  PlotRun r;
  std::error_code ec;
  if (err.empty()) {
    fs::remove(log, ec);
    return r;
  }
  r.problem = fmt::format("`{} {}` failed ({}); its output is in `plot.log`", python, script, err);
  const std::string tail = tail_lines(log, 1);
  r.warning = fmt::format("plot script failed ({}){}", err, tail.empty() ? "" : ": " + tail);
  return r;
}

std::string tail_lines(const std::string& path, int max_lines) {
  std::ifstream in(path);
  if (!in) return "";
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    lines.push_back(line);
    if (lines.size() > static_cast<std::size_t>(max_lines)) lines.erase(lines.begin());
  }
  std::string out;
  for (const auto& l : lines) out += (out.empty() ? "" : "\n") + l;
  return out;
}

}  // namespace asgd::report::detail
