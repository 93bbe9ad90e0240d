// Suite files: parse the YAML, check every key and value (collecting every
// problem with its line), expand axes x zip groups x seeds into runs, derive
// stable ids, and check the expanded runs. The parts: suite_keys.cpp (config
// keys and YAML values), suite_parse.cpp (the file's parts), suite_expand.cpp
// (exclusions, expansion, run problems).
#include "sweep/suite.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/nesting.hpp"
#include "sweep/suite_detail.hpp"

namespace asgd::sweep {
namespace {

namespace fs = std::filesystem;
using namespace detail;

const std::vector<std::string> kTopKeys = {"name",    "description", "mode",  "base",
                                           "axes",    "zip",         "exclude", "seeds",
                                           "target_error", "resources", "benchmark"};

// The file's top-level mapping: known keys once each, in file order.
Top read_top(const std::string& path, Problems& pr) {
  YAML::Node root;
  const std::string text = read_text_file(path, "suite file", path);
  check_yaml_text(text, path);
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    pr.add(e.mark.line >= 0 ? e.mark.line + 1 : 1, "YAML syntax error: " + e.msg);
    fail(path, pr);
  }
  check_yaml_depth(root, path);
  if (!root.IsMap()) {
    if (root.IsNull() || !root.IsDefined()) pr.add(1, "missing 'name' (the file is empty)");
    else pr.add(line_of(root, 1), "a suite file must be a mapping of keys (name, base, axes, ...)");
    fail(path, pr);
  }
  Top top;
  for (const auto& kv : root) {
    const int line = line_of(kv.first, 1);
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    if (std::find(kTopKeys.begin(), kTopKeys.end(), key) == kTopKeys.end()) {
      std::string hint = did_you_mean(key, kTopKeys);
      if (hint.empty() && find_key(canonical(key))) hint = " (config keys go under 'base:' or 'axes:')";
      pr.add(line, fmt::format("unknown key '{}'{}", kv.first.IsScalar() ? shorten(key) : describe(kv.first), hint));
      continue;
    }
    if (top.entries.count(key)) {
      pr.add(line, fmt::format("key '{}' given twice", shorten(key)));
      continue;
    }
    top.entries[key] = Top::Entry{kv.second, line};
    top.order.push_back(key);
  }
  return top;
}

// A micro suite's one run: the kernel micro-benchmarks (asgd_micro), no sweep.
void add_micro_run(Parsed& p, const std::string& results_dir, Problems& pr) {
  Suite& s = p.suite;
  Run run;
  run.run_id = fmt::format("{}-micro", p.prefix);
  run.config.suite = p.prefix;
  run.config.results_dir = results_dir;
  run.config.run_id = run.run_id;
  run.point = {{"benchmark", s.bench_filter.empty() ? "all" : s.bench_filter}};
  run.ranks = 1;
  run.shape = fmt::format("micro-{}", s.resources.time_limit);
  // Its config is written as JSON too (configs/<id>.json): the results
  // folder must be one JSON can hold, as for every other run.
  for (const auto& prob : validate(run.config)) pr.add(1, fmt::format("run {}: {}", run.run_id, prob));
  s.runs.push_back(std::move(run));
}

// The config every run starts from: base values and the suite-level settings.
TrainConfig base_config(Parsed& p, const std::string& results_dir) {
  Suite& s = p.suite;
  TrainConfig base;
  for (const auto& v : p.base_values) v.apply(base);
  base.suite = p.prefix;
  base.results_dir = results_dir;
  base.virtual_learners = s.mode == SuiteMode::virtual_learners;
  if (p.servers_given) base.servers = s.resources.servers;
  else s.resources.servers = base.servers;
  if (p.target_error) base.target_error = *p.target_error;
  s.target_error = base.target_error;
  return base;
}

}  // namespace

Suite load_suite(const std::string& path, const std::string& results_dir) {
  Problems pr;
  const Top top = read_top(path, pr);
  Parsed p;
  p.suite.path = path;
  read_header(top, p, pr);
  read_resources(top, p, pr);
  read_base(top, p, pr);
  read_dims(top, p, pr);
  if (p.suite.mode == SuiteMode::micro) {
    read_micro(top, p, pr);
    add_micro_run(p, results_dir, pr);
    if (!pr.empty()) fail(path, pr);
    return std::move(p.suite);
  }
  if (top.has("benchmark")) pr.add(top.at("benchmark").line, "benchmark: only a 'mode: micro' suite has one");
  const TrainConfig base = base_config(p, results_dir);
  read_seeds(top, base, p, pr);
  read_exclusions(top, p, pr);
  expand(top, base, p, pr, path);
  if (!pr.empty()) fail(path, pr);
  return std::move(p.suite);
}

std::vector<std::vector<const Run*>> group_by_shape(const Suite& s) {
  std::vector<std::vector<const Run*>> groups;
  std::unordered_map<std::string, std::size_t> where;
  for (const auto& r : s.runs) {
    const auto [it, fresh] = where.try_emplace(r.shape, groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(&r);
  }
  return groups;
}

}  // namespace asgd::sweep
