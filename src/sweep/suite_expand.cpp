// Expanding a suite: exclusions, the product of its dimensions and seeds
// (counted first), the derived rules, stable run ids, and the problems of the
// expanded runs (each distinct problem once, dataset files once per location).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <unordered_set>

#include "data/dataset.hpp"
#include "protocol/registry.hpp"
#include "sweep/suite_detail.hpp"

namespace asgd::sweep::detail {

namespace {

// MPI ranks of a run: one process for virtual learners and a single learner;
// the learners alone for a protocol without servers (allreduce); else servers
// and learners.
int ranks_of(const TrainConfig& c) {
  if (c.virtual_learners || (c.learners == 1 && c.servers == 1)) return 1;
  try {
    if (!protocol::make_protocol(protocol_options(c))->uses_servers()) return c.learners;
  } catch (const Error&) {  // a config the checks refuse: its rank count is never used
  }
  return c.servers + c.learners;
}

namespace fs = std::filesystem;

// Most runs a suite may expand to (the product of its axes and seeds). The
// fuzz build (ASGD_ENABLE_FUZZ) lowers it, so that a suite at the cap expands
// within libFuzzer's time limit under the sanitizers (1,000,000 runs take
// about a minute in a release build, a quarter of an hour under ASan).
#ifndef ASGD_MAX_SUITE_RUNS
#define ASGD_MAX_SUITE_RUNS 1000000
#endif
constexpr std::size_t kMaxRuns = ASGD_MAX_SUITE_RUNS;

// Counts one problem text over runs, remembering the first run.
struct Tally {
  std::vector<std::string> order;
  std::unordered_map<std::string, std::pair<std::size_t, std::string>> hits;
  void add(const std::string& text, const std::string& run) {
    auto [it, fresh] = hits.try_emplace(text, 0, run);
    if (fresh) order.push_back(text);
    ++it->second.first;
  }
};

// Missing files of a dataset location, "" when complete or not file-based.
std::string missing_dataset_files(const std::string& kind, const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return fmt::format("folder '{}' does not exist", dir);
  std::vector<std::string> missing;
  auto exists = [&](const std::string& name) { return fs::exists(fs::path(dir) / name, ec); };
  if (kind == "fashion-mnist" || kind == "mnist") {
    for (const char* f : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                          "t10k-labels-idx1-ubyte"})
      if (!exists(f) && !exists(std::string(f) + ".gz")) missing.push_back(std::string(f) + "[.gz]");
  } else if (kind == "cifar10") {
    for (const char* f : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                          "data_batch_5.bin", "test_batch.bin"})
      if (!exists(f)) missing.push_back(f);
  }
  if (missing.empty()) return "";
  std::string s = fmt::format("missing in '{}': ", dir);
  for (std::size_t i = 0; i < missing.size(); ++i) s += (i ? ", " : "") + missing[i];
  return s;
}

// The texts one exclusion entry matches for key (raw: as written).
bool exclusion_texts(const std::string& key, const YAML::Node& values, int kl, std::set<std::string>& texts,
                     Problems& pr) {
  std::vector<YAML::Node> items;
  if (values.IsSequence()) {
    for (const auto& e : values) items.push_back(e);
  } else {
    items.push_back(values);
  }
  bool ok = true;
  for (const auto& e : items) {
    const int vl = line_of(e, kl);
    if (key == "seed") {
      std::uint64_t sd = 0;
      std::string expected;
      if (convert(e, sd, expected)) {
        texts.insert(text_of(sd));
      } else {
        pr.add(vl, fmt::format("exclude seeds: expected {}, got {}", expected, describe(e)));
        ok = false;
      }
    } else if (auto v = find_key(key)->parse(e, vl, pr)) {
      texts.insert(v->text);
    } else {
      ok = false;
    }
  }
  return ok;
}

// One entry of `exclude`: a mapping of axis -> value(s).
void read_exclusion(const YAML::Node& entry, int el, Parsed& p, Problems& pr) {
  Exclusion x;
  bool ok = true;
  for (const auto& kv : entry) {
    const int kl = line_of(kv.first, el);
    const std::string raw = kv.first.IsScalar() ? kv.first.Scalar() : describe(kv.first);
    const std::string key = raw == "seeds" ? "seed" : canonical(raw);
    if (key != "seed" && !p.axis_keys.count(key)) {
      std::vector<std::string> names(p.axis_keys.begin(), p.axis_keys.end());
      names.push_back("seeds");
      std::string hint = did_you_mean(raw, names);
      pr.add(kl, fmt::format("exclude: '{}' is not an axis, zip key or seeds{}", shorten(raw),
                             hint.empty() ? fmt::format(" (swept: {})", fmt::join(names, ", ")) : hint));
      ok = false;
      continue;
    }
    std::set<std::string> texts;
    ok = exclusion_texts(key, kv.second, kl, texts, pr) && ok;
    x.match.emplace_back(key, std::move(texts));
  }
  if (ok) p.exclusions.push_back(std::move(x));
}

bool excluded(const Parsed& p, const std::map<std::string, std::string>& point) {
  return std::any_of(p.exclusions.begin(), p.exclusions.end(), [&](const Exclusion& x) {
    return std::all_of(x.match.begin(), x.match.end(), [&](const auto& m) {
      const auto it = point.find(m.first);
      return it != point.end() && m.second.count(it->second) > 0;
    });
  });
}

// The number of runs before exclusions; problems (and fail) when too many.
std::size_t count_runs(const Parsed& p, int run_line, Problems& pr, const std::string& path) {
  std::size_t total = p.empty_dim ? 0 : p.seeds.size();
  bool too_many = false;
  for (const auto& d : p.dims)
    if (__builtin_mul_overflow(total, d.choices.size(), &total)) {
      too_many = true;
      break;
    }
  if (too_many || total > kMaxRuns) {
    pr.add(run_line, fmt::format("axes x zip x seeds make {} runs, more than the {} a suite may "
                                 "have (split it, or sweep fewer values)",
                                 too_many ? "more than 18446744073709551615" : std::to_string(total), kMaxRuns));
    fail(path, pr);
  }
  return total;
}

// What the expansion collects besides the runs.
struct Expansion {
  Tally run_problems, datasets;
  std::unordered_map<std::string, int> dataset_lines;
  std::unordered_set<std::string> hashes, ids;
  std::size_t excluded = 0;
};

// The checks of one expanded run: its config, its resources, its dataset files.
void check_run(const Parsed& p, const Run& run, const std::vector<std::size_t>& idx, const std::string& compact,
               Expansion& x) {
  const TrainConfig& c = run.config;
  const auto problems = validate_run(c);
  for (const auto& prob : problems) x.run_problems.add(prob, compact);
  if (problems.empty())
    for (const auto& prob : data_fit_problems(c)) x.run_problems.add(prob, compact);
  if (const auto prob = warm_start_problem(c); !prob.empty()) x.run_problems.add(prob, compact);
  if (p.suite.resources.gpus_per_learner > 0 && !c.virtual_learners && c.device != "cuda")
    x.run_problems.add("resources.gpus_per_learner > 0 asks Slurm for GPUs, but device is cpu: "
                       "set device: cuda (or gpus_per_learner: 0)",
                       compact);
  if (c.data.kind != "fashion-mnist" && c.data.kind != "mnist" && c.data.kind != "cifar10") return;
  const std::string loc = c.data.kind + '\n' + (c.data.dir.empty() ? data::default_dir(c.data.kind) : c.data.dir);
  if (!x.dataset_lines.count(loc)) {
    // The line that chose the folder: a swept dataset with its own dir, else base/axes.
    int line = p.dataset_line;
    for (std::size_t k = 0; k < p.dims.size(); ++k)
      for (const auto& v : p.dims[k].choices[idx[k]])
        if (v.key == "dataset" && v.text.find("dir=") != std::string::npos) line = v.line;
    x.dataset_lines[loc] = line;
  }
  x.datasets.add(loc, compact);
}

// Run r of the product (seeds innermost, the first dimension outermost), or
// nothing when it is excluded or the same run as an earlier one.
std::optional<Run> make_run(const TrainConfig& base, const Parsed& p, std::size_t r, std::vector<std::size_t>& idx,
                            int run_line, Expansion& x, Problems& pr) {
  std::size_t rest = r;
  const std::size_t si = rest % p.seeds.size();
  rest /= p.seeds.size();
  for (std::size_t k = p.dims.size(); k-- > 0;) {
    idx[k] = rest % p.dims[k].choices.size();
    rest /= p.dims[k].choices.size();
  }
  Run run;
  for (std::size_t k = 0; k < p.dims.size(); ++k)
    for (const auto& v : p.dims[k].choices[idx[k]]) run.point[v.key] = v.text;
  run.point["seed"] = p.seeds[si].second;
  if (excluded(p, run.point)) {
    ++x.excluded;
    return std::nullopt;
  }
  TrainConfig& c = run.config;
  c = base;
  for (std::size_t k = 0; k < p.dims.size(); ++k)
    for (const auto& v : p.dims[k].choices[idx[k]]) v.apply(c);
  c.seed = p.seeds[si].first;
  // Derived rule: n of softsync and n_sync of nsync mean nothing elsewhere.
  if (c.protocol != "softsync") c.softsync_n = 1;
  if (c.protocol != "nsync") c.n_sync = 1;
  if (auto it = run.point.find("softsync_n"); it != run.point.end()) it->second = text_of(c.softsync_n);
  if (auto it = run.point.find("n_sync"); it != run.point.end()) it->second = text_of(c.n_sync);

  const std::string hash = config_hash(c);
  if (!x.hashes.insert(hash).second) return std::nullopt;  // same run as an earlier one
  std::string compact;
  for (const auto& d : p.dims)
    for (const auto& key : d.keys) compact += token(key, run.point[key]) + "-";
  compact += token("seed", run.point["seed"]);
  run.run_id = fmt::format("{}-{}-{}", p.prefix, compact, hash.substr(0, 8));
  c.run_id = run.run_id;
  if (!x.ids.insert(run.run_id).second)
    pr.add(run_line, fmt::format("run id '{}' given to two different runs", run.run_id));
  check_run(p, run, idx, compact, x);
  run.ranks = ranks_of(c);
  const int gpus = c.virtual_learners ? 0 : c.learners * p.suite.resources.gpus_per_learner;
  run.shape = fmt::format("ranks{}-gpu{}-{}", run.ranks, gpus, p.suite.resources.time_limit);
  return run;
}

// Each distinct problem of the expanded runs once, and each dataset location's missing files.
void report(const Top& top, const Expansion& x, int run_line, std::size_t total, const Parsed& p, Problems& pr) {
  for (const auto& text : x.run_problems.order) {
    const auto& [count, first] = x.run_problems.hits.at(text);
    pr.add(run_line, count == 1 ? fmt::format("run {}: {}", first, text)
                                : fmt::format("run {} and {} more runs: {}", first, count - 1, text));
  }
  for (const auto& loc : x.datasets.order) {
    const auto& [count, first] = x.datasets.hits.at(loc);
    const auto nl = loc.find('\n');
    const std::string kind = loc.substr(0, nl), dir = loc.substr(nl + 1);
    if (const std::string missing = missing_dataset_files(kind, dir); !missing.empty())
      pr.add(x.dataset_lines.at(loc),
             fmt::format("dataset {}: {} (needed by {} run{})", kind, missing, count, count == 1 ? "" : "s"));
  }
  if (p.suite.runs.empty() && total > 0)
    pr.add(top.has("exclude") ? top.at("exclude").line : run_line,
           fmt::format("no runs: all {} combinations are excluded", x.excluded));
}

}  // namespace

void read_exclusions(const Top& top, Parsed& p, Problems& pr) {
  if (!top.has("exclude")) return;
  const auto& ex = top.at("exclude").value;
  if (!ex.IsSequence()) {
    if (!ex.IsNull())
      pr.add(top.value_line("exclude"), fmt::format("exclude: expected a list of mappings, got {}", describe(ex)));
    return;
  }
  for (const auto& entry : ex) {
    const int el = line_of(entry, top.at("exclude").line);
    if (!entry.IsMap() || entry.size() == 0) {
      pr.add(el, fmt::format("exclude: each entry must be a mapping of axis -> value, got {}", describe(entry)));
      continue;
    }
    read_exclusion(entry, el, p, pr);
  }
}

void expand(const Top& top, const TrainConfig& base, Parsed& p, Problems& pr, const std::string& path) {
  const int run_line = top.has("axes") ? top.at("axes").line
                       : top.has("zip") ? top.at("zip").line
                       : top.has("base") ? top.at("base").line
                                         : 1;
  if (!p.dataset_line) p.dataset_line = top.has("base") ? top.at("base").line : 1;
  const std::size_t total = count_runs(p, run_line, pr, path);
  Expansion x;
  std::vector<std::size_t> idx(p.dims.size(), 0);
  for (std::size_t r = 0; r < total; ++r)
    if (auto run = make_run(base, p, r, idx, run_line, x, pr)) p.suite.runs.push_back(std::move(*run));
  report(top, x, run_line, total, p, pr);
}

}  // namespace asgd::sweep::detail
