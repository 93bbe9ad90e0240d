// Suite files: parse the YAML, check every key and value (collecting every
// problem with its line), expand axes x zip groups x seeds into runs, derive
// stable ids, and check the expanded runs (validate() per distinct problem,
// dataset files once per location).
#include "sweep/suite.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "common/error.hpp"
#include "data/dataset.hpp"

namespace asgd::sweep {
namespace {

namespace fs = std::filesystem;

// Most runs a suite may expand to (the product of its axes and seeds). The
// fuzz build (ASGD_ENABLE_FUZZ) lowers it, so that a suite at the cap expands
// within libFuzzer's time limit under the sanitizers (1,000,000 runs take
// about a minute in a release build, a quarter of an hour under ASan).
#ifndef ASGD_MAX_SUITE_RUNS
#define ASGD_MAX_SUITE_RUNS 1000000
#endif
constexpr std::size_t kMaxRuns = ASGD_MAX_SUITE_RUNS;

// ---------------------------------------------------------------- problems

struct Problems {
  std::vector<std::pair<int, std::string>> list;  // (1-based line, text)
  void add(int line, std::string msg) { list.emplace_back(line, std::move(msg)); }
  bool empty() const { return list.empty(); }
};

[[noreturn]] void fail(const std::string& path, Problems& pr) {
  std::stable_sort(pr.list.begin(), pr.list.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string msg = fmt::format("{}: {} problem{}: ", path, pr.list.size(),
                                pr.list.size() == 1 ? "" : "s");
  for (std::size_t i = 0; i < pr.list.size(); ++i)
    msg += fmt::format("{}{}:{}: {}", i ? "; " : "", path, pr.list[i].first, pr.list[i].second);
  throw Error(msg);
}

// 1-based line of a node; fallback for missing and empty nodes (yaml-cpp
// marks an empty value at the next token, often the next line).
int line_of(const YAML::Node& n, int fallback) {
  if (!n.IsDefined() || n.IsNull()) return fallback;
  const YAML::Mark m = n.Mark();
  return m.line >= 0 ? m.line + 1 : fallback;
}

// ------------------------------------------------------------ did you mean

std::string suggest(const std::string& key, const std::vector<std::string>& candidates) {
  return did_you_mean(key, candidates);
}

// ------------------------------------------------------------ scalar values

std::string describe(const YAML::Node& n) {
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  if (n.IsNull() || !n.IsDefined()) return "nothing";
  return fmt::format("'{}'", shorten(n.Scalar()));
}

bool parse_i64(const std::string& s, std::int64_t& out) {
  std::string_view v = s;
  if (!v.empty() && v.front() == '+') v.remove_prefix(1);
  if (v.empty()) return false;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  return ec == std::errc() && p == v.data() + v.size();
}

bool parse_u64(const std::string& s, std::uint64_t& out) {
  std::string_view v = s;
  if (!v.empty() && v.front() == '+') v.remove_prefix(1);
  if (v.empty() || v.front() == '-') return false;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  return ec == std::errc() && p == v.data() + v.size();
}

bool parse_f64(const std::string& s, double& out) {
  std::string_view v = s;
  if (!v.empty() && v.front() == '+') v.remove_prefix(1);
  if (v.empty()) return false;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  return ec == std::errc() && p == v.data() + v.size();
}

// convert(): node -> value; on failure `expected` names what was wanted.
bool convert(const YAML::Node& n, int& out, std::string& expected) {
  expected = "an integer";
  std::int64_t v = 0;
  if (!n.IsScalar() || !parse_i64(n.Scalar(), v) || v < INT_MIN || v > INT_MAX) return false;
  out = static_cast<int>(v);
  return true;
}
bool convert(const YAML::Node& n, std::int64_t& out, std::string& expected) {
  expected = "an integer";
  return n.IsScalar() && parse_i64(n.Scalar(), out);
}
bool convert(const YAML::Node& n, std::uint64_t& out, std::string& expected) {
  expected = "a non-negative integer";
  return n.IsScalar() && parse_u64(n.Scalar(), out);
}
bool convert(const YAML::Node& n, double& out, std::string& expected) {
  expected = "a number";
  return n.IsScalar() && parse_f64(n.Scalar(), out);
}
bool convert(const YAML::Node& n, bool& out, std::string& expected) {
  expected = "true or false";
  if (!n.IsScalar()) return false;
  std::string s = n.Scalar();
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "true" || s == "yes" || s == "on") out = true;
  else if (s == "false" || s == "no" || s == "off") out = false;
  else return false;
  return true;
}
bool convert(const YAML::Node& n, std::string& out, std::string& expected) {
  expected = "a text value";
  if (!n.IsScalar()) return false;
  out = n.Scalar();
  return true;
}
bool convert(const YAML::Node& n, std::vector<double>& out, std::string& expected) {
  expected = "a list of numbers";
  if (!n.IsSequence()) return false;
  out.clear();
  std::string ignored;
  for (const auto& e : n) {
    double d = 0;
    if (!convert(e, d, ignored)) return false;
    out.push_back(d);
  }
  return true;
}

std::string text_of(const std::string& v) { return v; }
std::string text_of(bool v) { return v ? "true" : "false"; }
std::string text_of(double v) { return fmt::format("{}", v); }
std::string text_of(int v) { return fmt::format("{}", v); }
std::string text_of(std::int64_t v) { return fmt::format("{}", v); }
std::string text_of(std::uint64_t v) { return fmt::format("{}", v); }
std::string text_of(const std::vector<double>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + text_of(v[i]);
  return s;
}

// ---------------------------------------------------------------- config keys

using Apply = std::function<void(TrainConfig&)>;

struct Value {
  std::string key;   // canonical config key
  std::string text;  // canonical text (what `point` holds and exclusions compare)
  Apply apply;
  int line = 0;
};

struct KeyDef {
  std::string name;
  // Parses one value; on failure adds problems and returns nullopt.
  std::function<std::optional<Value>(const YAML::Node&, int, Problems&)> parse;
  // Whether validate() of a default config with only this value set is a
  // fair check of the value alone (false where validity depends on other keys).
  bool check_alone = true;
};

template <class T>
KeyDef field(const std::string& name, T TrainConfig::*mp, bool alone = true,
             std::optional<std::int64_t> min = std::nullopt) {
  KeyDef k;
  k.name = name;
  k.check_alone = alone;
  k.parse = [name, mp, min](const YAML::Node& n, int line, Problems& pr) -> std::optional<Value> {
    T v{};
    std::string expected;
    if (!convert(n, v, expected)) {
      pr.add(line, fmt::format("{}: expected {}, got {}", name, expected, describe(n)));
      return std::nullopt;
    }
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (min && static_cast<std::int64_t>(v) < *min) {
        pr.add(line, fmt::format("{} {} must be >= {}", name, v, *min));
        return std::nullopt;
      }
    }
    return Value{name, text_of(v), [mp, v](TrainConfig& c) { c.*mp = v; }, line};
  };
  return k;
}

const std::vector<std::string> kDatasetKeys = {"kind",    "dir",  "shape", "classes",
                                               "n_train", "n_test", "seed", "subtract_mean"};

// dataset: a kind name, or a mapping laid over the current dataset spec.
KeyDef dataset_key() {
  KeyDef k;
  k.name = "dataset";
  k.parse = [](const YAML::Node& n, int line, Problems& pr) -> std::optional<Value> {
    if (n.IsScalar()) {
      const std::string kind = n.Scalar();
      return Value{"dataset", kind, [kind](TrainConfig& c) { c.data.kind = kind; }, line};
    }
    if (!n.IsMap()) {
      pr.add(line, fmt::format("dataset: expected a name or a mapping, got {}", describe(n)));
      return std::nullopt;
    }
    std::vector<std::function<void(data::DatasetSpec&)>> sets;
    std::string text;
    bool ok = true;
    std::set<std::string> seen;
    for (const auto& kv : n) {
      const int kl = line_of(kv.first, line);
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
      const YAML::Node& v = kv.second;
      const int vl = line_of(v, kl);
      if (!seen.insert(key).second) {
        pr.add(kl, fmt::format("dataset: key '{}' given twice", shorten(key)));
        ok = false;
        continue;
      }
      std::string expected;
      auto bad = [&] {
        pr.add(vl, fmt::format("dataset {}: expected {}, got {}", key, expected, describe(v)));
        ok = false;
      };
      std::string vt;  // text of this entry
      if (key == "kind" || key == "dir") {
        std::string s;
        if (!convert(v, s, expected)) { bad(); continue; }
        if (key == "kind") sets.push_back([s](data::DatasetSpec& d) { d.kind = s; });
        else sets.push_back([s](data::DatasetSpec& d) { d.dir = s; });
        vt = s;
      } else if (key == "shape") {
        std::array<std::int64_t, 3> hwc{};
        bool good = v.IsSequence() && v.size() == 3;
        for (std::size_t i = 0; good && i < 3; ++i) good = convert(v[i], hwc[i], expected);
        if (!good) {
          expected = "[height, width, channels]";
          bad();
          continue;
        }
        sets.push_back([hwc](data::DatasetSpec& d) {
          d.h = hwc[0];
          d.w = hwc[1];
          d.c = hwc[2];
        });
        vt = fmt::format("{}x{}x{}", hwc[0], hwc[1], hwc[2]);
      } else if (key == "classes") {
        int x = 0;
        if (!convert(v, x, expected)) { bad(); continue; }
        sets.push_back([x](data::DatasetSpec& d) { d.classes = x; });
        vt = text_of(x);
      } else if (key == "n_train" || key == "n_test") {
        std::int64_t x = 0;
        if (!convert(v, x, expected)) { bad(); continue; }
        if (key == "n_train") sets.push_back([x](data::DatasetSpec& d) { d.n_train = x; });
        else sets.push_back([x](data::DatasetSpec& d) { d.n_test = x; });
        vt = text_of(x);
      } else if (key == "seed") {
        std::uint64_t x = 0;
        if (!convert(v, x, expected)) { bad(); continue; }
        sets.push_back([x](data::DatasetSpec& d) { d.seed = x; });
        vt = text_of(x);
      } else if (key == "subtract_mean") {
        bool x = false;
        if (!convert(v, x, expected)) { bad(); continue; }
        sets.push_back([x](data::DatasetSpec& d) { d.subtract_mean = x; });
        vt = text_of(x);
      } else {
        pr.add(kl, fmt::format("dataset: unknown key '{}'{}", shorten(key), suggest(key, kDatasetKeys)));
        ok = false;
        continue;
      }
      text += fmt::format("{}{}={}", text.empty() ? "" : ",", key, vt);
    }
    if (!ok) return std::nullopt;
    return Value{"dataset", text,
                 [sets](TrainConfig& c) {
                   for (const auto& s : sets) s(c.data);
                 },
                 line};
  };
  return k;
}

const std::vector<KeyDef>& key_defs() {
  using C = TrainConfig;
  static const std::vector<KeyDef> defs = {
      field("model", &C::model),
      dataset_key(),
      field("batch", &C::batch),
      field("lr", &C::lr),
      field("momentum", &C::momentum),
      field("weight_decay", &C::weight_decay),
      field("lr_steps", &C::lr_steps),
      field("lr_gamma", &C::lr_gamma),
      field("epochs", &C::epochs),
      field("max_steps", &C::max_steps),
      field("eval_every", &C::eval_every),
      field("eval_batch", &C::eval_batch),
      field("eval_samples", &C::eval_samples),
      field("checkpoint_every", &C::checkpoint_every),
      field("seed", &C::seed),
      field("target_error", &C::target_error),
      field("diverge_loss", &C::diverge_loss),
      field("threads", &C::threads),
      field("device", &C::device),
      field("learners", &C::learners, false, 1),
      field("servers", &C::servers),
      field("protocol", &C::protocol),
      field("softsync_n", &C::softsync_n, false, 1),
      field("n_sync", &C::n_sync),
      field("lr_policy", &C::lr_policy),
      field("warm_start", &C::warm_start, false),
      field("warm_steps", &C::warm_steps, false, 0),
      field("timing", &C::timing),
      field("compute_s", &C::compute_s),
      field("compute_cv", &C::compute_cv),
      field("comm_s", &C::comm_s),
      field("straggler", &C::straggler, false, -1),
      field("straggler_factor", &C::straggler_factor),
  };
  return defs;
}

const KeyDef* find_key(const std::string& name) {
  static const std::unordered_map<std::string, const KeyDef*> index = [] {
    std::unordered_map<std::string, const KeyDef*> m;
    for (const auto& d : key_defs()) m[d.name] = &d;
    return m;
  }();
  const auto it = index.find(name);
  return it == index.end() ? nullptr : it->second;
}

const std::vector<std::string>& config_key_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& d : key_defs()) v.push_back(d.name);
    v.push_back("n");
    return v;
  }();
  return names;
}

std::string canonical(const std::string& key) { return key == "n" ? "softsync_n" : key; }

// Why a TrainConfig key cannot be written in a suite file ("" if it can).
std::string reserved_reason(const std::string& key) {
  if (key == "results_dir") return "the results folder is given when the suite is run";
  if (key == "suite") return "it is the suite's 'name'";
  if (key == "run_id") return "run ids are derived from the suite";
  if (key == "virtual") return "use 'mode: virtual'";
  return "";
}

const std::vector<std::string> kTopKeys = {"name",    "description", "mode",  "base",
                                           "axes",    "zip",         "exclude", "seeds",
                                           "target_error", "resources", "benchmark"};
const std::vector<std::string> kResourceKeys = {"servers", "gpus_per_learner", "cpus_per_rank",
                                                "time_limit", "exclusive", "max_parallel_tasks"};

// Parses a value of a config key and checks it alone where that is fair.
std::optional<Value> parse_value(const KeyDef& def, const YAML::Node& n, int line, Problems& pr) {
  auto v = def.parse(n, line, pr);
  if (!v || !def.check_alone) return v;
  TrainConfig d;
  v->apply(d);
  const auto problems = validate(d);
  if (problems.empty()) return v;
  for (const auto& p : problems) pr.add(line, p);
  return std::nullopt;
}

// Resolves a key of base/axes/zip: canonical name, or nullptr with a problem.
const KeyDef* resolve_key(const YAML::Node& key_node, int line, const char* where, Problems& pr) {
  if (!key_node.IsScalar()) {
    pr.add(line, fmt::format("{}: keys must be plain names, got {}", where, describe(key_node)));
    return nullptr;
  }
  const std::string key = key_node.Scalar();
  if (const std::string why = reserved_reason(key); !why.empty()) {
    pr.add(line, fmt::format("{}: '{}' cannot be set in a suite file ({})", where, shorten(key), why));
    return nullptr;
  }
  const KeyDef* def = find_key(canonical(key));
  if (!def)
    pr.add(line, fmt::format("{}: unknown config key '{}'{}", where, shorten(key),
                             suggest(key, config_key_names())));
  return def;
}

// ------------------------------------------------------------------ time limit

bool all_digits(std::string_view s, std::size_t min_len, std::size_t max_len) {
  return s.size() >= min_len && s.size() <= max_len &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// HH:MM:SS or D-HH:MM:SS, minutes and seconds below 60, hours below 24 with days.
bool good_time_limit(const std::string& t) {
  std::string_view s = t;
  bool days = false;
  if (const auto dash = s.find('-'); dash != std::string_view::npos) {
    if (!all_digits(s.substr(0, dash), 1, 4)) return false;
    s.remove_prefix(dash + 1);
    days = true;
  }
  if (s.size() < 7 || s[s.size() - 3] != ':' || s[s.size() - 6] != ':') return false;
  const auto hh = s.substr(0, s.size() - 6), mm = s.substr(s.size() - 5, 2),
             ss = s.substr(s.size() - 2, 2);
  if (!all_digits(hh, 1, days ? 2 : 4) || !all_digits(mm, 2, 2) || !all_digits(ss, 2, 2))
    return false;
  const int h = std::stoi(std::string(hh)), m = std::stoi(std::string(mm)),
            sec = std::stoi(std::string(ss));
  if (m >= 60 || sec >= 60 || (days && h >= 24)) return false;
  return days || h + m + sec > 0;
}

// ------------------------------------------------------------------ run ids

bool id_char(char ch) {
  return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.';
}

std::string sanitize(std::string s) {
  for (char& ch : s)
    if (!id_char(ch)) ch = '_';
  return s;
}

// Short form of one axis value in a run id.
std::string token(const std::string& key, const std::string& text) {
  if (key == "learners") return "L" + sanitize(text);
  if (key == "softsync_n") return "n" + sanitize(text);
  if (key == "n_sync") return "nsync" + sanitize(text);
  if (key == "batch") return "mu" + sanitize(text);
  if (key == "seed") return "s" + sanitize(text);
  if (key == "protocol" || key == "model" || key == "dataset" || key == "lr_policy" ||
      key == "timing")
    return sanitize(text);
  return sanitize(key + "=" + text);
}

// --------------------------------------------------------------- datasets

// Missing files of a dataset location, "" when complete or not file-based.
std::string missing_dataset_files(const std::string& kind, const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return fmt::format("folder '{}' does not exist", dir);
  std::vector<std::string> missing;
  auto exists = [&](const std::string& name) { return fs::exists(fs::path(dir) / name, ec); };
  if (kind == "fashion-mnist" || kind == "mnist") {
    for (const char* f : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                          "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"})
      if (!exists(f) && !exists(std::string(f) + ".gz")) missing.push_back(std::string(f) + "[.gz]");
  } else if (kind == "cifar10") {
    for (const char* f : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                          "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"})
      if (!exists(f)) missing.push_back(f);
  }
  if (missing.empty()) return "";
  std::string s = fmt::format("missing in '{}': ", dir);
  for (std::size_t i = 0; i < missing.size(); ++i) s += (i ? ", " : "") + missing[i];
  return s;
}

// ------------------------------------------------------------------ dimensions

// One axis of the expansion: a plain axis (one key) or a zip group (several
// keys moving together). Each choice sets every key of the dimension.
struct Dim {
  std::vector<std::string> keys;
  std::vector<std::vector<Value>> choices;
};

struct Exclusion {
  std::vector<std::pair<std::string, std::set<std::string>>> match;  // key -> any of texts
};

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

std::string read_text(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw Error(path + ": is a folder, not a suite file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open: " + std::strerror(errno ? errno : ENOENT));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

// =================================================================== load_suite

Suite load_suite(const std::string& path, const std::string& results_dir) {
  Suite s;
  s.path = path;
  Problems pr;

  YAML::Node root;
  try {
    root = YAML::Load(read_text(path));
  } catch (const YAML::Exception& e) {
    pr.add(e.mark.line >= 0 ? e.mark.line + 1 : 1, "YAML syntax error: " + e.msg);
    fail(path, pr);
  }
  if (!root.IsMap()) {
    if (root.IsNull() || !root.IsDefined()) pr.add(1, "missing 'name' (the file is empty)");
    else pr.add(line_of(root, 1), "a suite file must be a mapping of keys (name, base, axes, ...)");
    fail(path, pr);
  }

  // ---- top level: known keys once each, in file order
  struct Entry {
    YAML::Node value;
    int line = 1;
  };
  std::unordered_map<std::string, Entry> top;
  std::vector<std::string> top_order;
  for (const auto& kv : root) {
    const int line = line_of(kv.first, 1);
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    if (std::find(kTopKeys.begin(), kTopKeys.end(), key) == kTopKeys.end()) {
      std::string hint = suggest(key, kTopKeys);
      if (hint.empty() && find_key(canonical(key)))
        hint = " (config keys go under 'base:' or 'axes:')";
      pr.add(line, fmt::format("unknown key '{}'{}", kv.first.IsScalar() ? shorten(key) : describe(kv.first), hint));
      continue;
    }
    if (top.count(key)) {
      pr.add(line, fmt::format("key '{}' given twice", shorten(key)));
      continue;
    }
    top[key] = Entry{kv.second, line};
    top_order.push_back(key);
  }
  auto has = [&](const char* k) { return top.count(k) > 0; };
  auto value_line = [&](const char* k) { return line_of(top[k].value, top[k].line); };

  // ---- name, description, mode
  bool name_ok = false;
  if (!has("name")) {
    pr.add(1, "missing 'name' (the suite's name; results go to <results>/<name>/)");
  } else if (const auto& n = top["name"].value; !n.IsScalar() || n.Scalar().empty()) {
    pr.add(top["name"].line, fmt::format("name: expected a name, got {}", describe(n)));
  } else if (const std::string why = name_problem("name", n.Scalar(), kMaxSuiteName); !why.empty()) {
    pr.add(value_line("name"), why);
  } else {
    s.name = n.Scalar();
    name_ok = true;
  }
  if (has("description")) {
    const auto& d = top["description"].value;
    if (d.IsScalar()) s.description = d.Scalar();
    else if (!d.IsNull())
      pr.add(value_line("description"), fmt::format("description: expected text, got {}", describe(d)));
  }
  if (has("mode")) {
    const auto& m = top["mode"].value;
    if (m.IsScalar() && (m.Scalar() == "real" || m.Scalar() == "virtual" || m.Scalar() == "micro"))
      s.mode = m.Scalar();
    else
      pr.add(value_line("mode"),
             fmt::format("mode: expected real, virtual or micro, got {}{}", describe(m),
                         m.IsScalar() ? suggest(m.Scalar(), {"real", "virtual", "micro"}) : ""));
  }

  // ---- resources
  bool servers_given = false;
  if (has("resources")) {
    const auto& r = top["resources"].value;
    if (r.IsMap()) {
      std::set<std::string> seen;
      for (const auto& kv : r) {
        const int kl = line_of(kv.first, top["resources"].line);
        const int vl = line_of(kv.second, kl);
        const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : describe(kv.first);
        if (!seen.insert(key).second) {
          pr.add(kl, fmt::format("resources: key '{}' given twice", shorten(key)));
          continue;
        }
        std::string expected;
        auto get_int = [&](int& out, int min) {
          int v = 0;
          if (!convert(kv.second, v, expected))
            pr.add(vl, fmt::format("resources {}: expected {}, got {}", key, expected, describe(kv.second)));
          else if (v < min)
            pr.add(vl, fmt::format("resources {}: {} must be >= {}", key, v, min));
          else
            out = v;
        };
        if (key == "servers") {
          get_int(s.resources.servers, 1);
          servers_given = true;
        } else if (key == "gpus_per_learner") {
          get_int(s.resources.gpus_per_learner, 0);
        } else if (key == "cpus_per_rank") {
          get_int(s.resources.cpus_per_rank, 1);
        } else if (key == "max_parallel_tasks") {
          get_int(s.resources.max_parallel_tasks, 0);
        } else if (key == "exclusive") {
          bool v = false;
          if (convert(kv.second, v, expected))
            s.resources.exclusive = v;
          else
            pr.add(vl, fmt::format("resources exclusive: expected {}, got {}", expected, describe(kv.second)));
        } else if (key == "time_limit") {
          if (kv.second.IsScalar() && good_time_limit(kv.second.Scalar()))
            s.resources.time_limit = kv.second.Scalar();
          else
            pr.add(vl, fmt::format("resources time_limit: expected HH:MM:SS or D-HH:MM:SS, got {}",
                                   describe(kv.second)));
        } else {
          pr.add(kl, fmt::format("resources: unknown key '{}'{}", shorten(key), suggest(key, kResourceKeys)));
        }
      }
    } else if (!r.IsNull()) {
      pr.add(value_line("resources"), fmt::format("resources: expected a mapping, got {}", describe(r)));
    }
  }

  // ---- base
  std::vector<Value> base_values;
  std::set<std::string> base_keys;
  int dataset_line = 0;  // where the dataset is chosen, for dataset problems
  if (has("base")) {
    const auto& b = top["base"].value;
    if (b.IsMap()) {
      for (const auto& kv : b) {
        const int kl = line_of(kv.first, top["base"].line);
        const KeyDef* def = resolve_key(kv.first, kl, "base", pr);
        if (!def) continue;
        if (!base_keys.insert(def->name).second) {
          pr.add(kl, fmt::format("base: key '{}' given twice", def->name));
          continue;
        }
        if (def->name == "dataset") dataset_line = kl;
        if (auto v = parse_value(*def, kv.second, line_of(kv.second, kl), pr))
          base_values.push_back(std::move(*v));
      }
    } else if (!b.IsNull()) {
      pr.add(value_line("base"), fmt::format("base: expected a mapping of config keys, got {}", describe(b)));
    }
  }

  // ---- axes and zip groups
  std::vector<Dim> axis_dims, zip_dims;
  std::set<std::string> axis_keys;  // every key swept (axes and zip)
  bool empty_dim = false;           // a dimension lost every value to problems
  auto claim = [&](const KeyDef* def, int line, const char* where) {
    if (def->name == "seed") {
      pr.add(line, fmt::format("{}: sweep seeds with the top-level 'seeds' list", where));
      return false;
    }
    if (!axis_keys.insert(def->name).second) {
      pr.add(line, fmt::format("{}: key '{}' is swept twice (in axes or zip)", where, def->name));
      return false;
    }
    return true;
  };
  auto list_of = [&](const KeyDef* def, const YAML::Node& v, int kl, const char* where)
      -> std::optional<std::vector<std::optional<Value>>> {
    if (!v.IsSequence()) {
      pr.add(line_of(v, kl), fmt::format("{} '{}': expected a list of values, got {}", where,
                                         def->name, describe(v)));
      return std::nullopt;
    }
    if (v.size() == 0) {
      pr.add(line_of(v, kl), fmt::format("{} '{}': the list is empty", where, def->name));
      return std::nullopt;
    }
    std::vector<std::optional<Value>> out;
    for (const auto& e : v) out.push_back(parse_value(*def, e, line_of(e, kl), pr));
    return out;
  };
  if (has("axes")) {
    const auto& a = top["axes"].value;
    if (a.IsMap()) {
      for (const auto& kv : a) {
        const int kl = line_of(kv.first, top["axes"].line);
        const KeyDef* def = resolve_key(kv.first, kl, "axes", pr);
        if (!def || !claim(def, kl, "axes")) continue;
        if (def->name == "dataset" && !dataset_line) dataset_line = kl;
        auto values = list_of(def, kv.second, kl, "axis");
        if (!values) continue;
        Dim d;
        d.keys = {def->name};
        for (auto& v : *values)
          if (v) d.choices.push_back({std::move(*v)});
        if (d.choices.empty()) empty_dim = true;
        s.axes.push_back(def->name);
        axis_dims.push_back(std::move(d));
      }
    } else if (!a.IsNull()) {
      pr.add(value_line("axes"), fmt::format("axes: expected a mapping of config key -> list, got {}", describe(a)));
    }
  }
  std::vector<std::string> zip_axes;
  if (has("zip")) {
    const auto& z = top["zip"].value;
    if (z.IsSequence()) {
      for (const auto& group : z) {
        const int gl = line_of(group, top["zip"].line);
        if (!group.IsMap() || group.size() == 0) {
          pr.add(gl, fmt::format("zip: each entry must be a mapping of config key -> list, got {}",
                                 describe(group)));
          continue;
        }
        Dim d;
        std::vector<std::vector<std::optional<Value>>> lists;
        std::vector<int> lines;
        bool ok = true;
        for (const auto& kv : group) {
          const int kl = line_of(kv.first, gl);
          const KeyDef* def = resolve_key(kv.first, kl, "zip", pr);
          if (!def || !claim(def, kl, "zip")) {
            ok = false;
            continue;
          }
          if (def->name == "dataset" && !dataset_line) dataset_line = kl;
          zip_axes.push_back(def->name);
          auto values = list_of(def, kv.second, kl, "zip");
          if (!values) {
            ok = false;
            continue;
          }
          d.keys.push_back(def->name);
          lists.push_back(std::move(*values));
        }
        if (!ok) continue;
        bool equal = true;
        for (const auto& l : lists) equal = equal && l.size() == lists[0].size();
        if (!equal) {
          std::string lens;
          for (std::size_t i = 0; i < lists.size(); ++i)
            lens += fmt::format("{}{}: {}", i ? ", " : "", d.keys[i], lists[i].size());
          pr.add(gl, fmt::format("zip: lists of unequal length ({})", lens));
          continue;
        }
        for (std::size_t j = 0; j < lists[0].size(); ++j) {
          std::vector<Value> choice;
          for (auto& l : lists)
            if (l[j]) choice.push_back(*l[j]);
          if (choice.size() == lists.size()) d.choices.push_back(std::move(choice));
        }
        if (d.choices.empty()) empty_dim = true;
        zip_dims.push_back(std::move(d));
      }
    } else if (!z.IsNull()) {
      pr.add(value_line("zip"), fmt::format("zip: expected a list of mappings, got {}", describe(z)));
    }
  }
  // Dimensions in file order: whichever of axes / zip comes first is outer.
  std::vector<Dim> dims;
  {
    const bool zip_first = has("zip") && has("axes") &&
                           std::find(top_order.begin(), top_order.end(), "zip") <
                               std::find(top_order.begin(), top_order.end(), "axes");
    auto& first = zip_first ? zip_dims : axis_dims;
    auto& second = zip_first ? axis_dims : zip_dims;
    for (auto& d : first) dims.push_back(std::move(d));
    for (auto& d : second) dims.push_back(std::move(d));
    if (zip_first) s.axes.insert(s.axes.begin(), zip_axes.begin(), zip_axes.end());
    else s.axes.insert(s.axes.end(), zip_axes.begin(), zip_axes.end());
  }

  // ---- target error, servers: top-level settings that override keys
  std::optional<double> target_error;
  if (has("target_error")) {
    const int vl = value_line("target_error");
    double te = 0;
    std::string expected;
    if (!convert(top["target_error"].value, te, expected)) {
      pr.add(vl, fmt::format("target_error: expected {}, got {}", expected,
                             describe(top["target_error"].value)));
    } else if (te < 0 || te > 1) {
      pr.add(vl, fmt::format("target_error {} not in [0, 1]", te));
    } else {
      target_error = te;
    }
    if (axis_keys.count("target_error") || base_keys.count("target_error"))
      pr.add(top["target_error"].line,
             "target_error is set both at the top level and in base/axes/zip");
  }
  if (servers_given && (axis_keys.count("servers") || base_keys.count("servers")))
    pr.add(top["resources"].line, "servers is set both in resources and in base/axes/zip");

  // ---- micro: one run of the kernel micro-benchmarks (asgd_micro), no sweep
  if (s.mode == "micro") {
    for (const char* k : {"base", "axes", "zip", "exclude", "seeds", "target_error"})
      if (has(k)) pr.add(top[k].line, fmt::format("{}: a micro suite has no training runs", k));
    if (has("benchmark")) {
      const auto& b = top["benchmark"].value;
      if (!b.IsMap()) {
        pr.add(value_line("benchmark"), fmt::format("benchmark: expected a mapping (filter, "
                                                    "repetitions), got {}", describe(b)));
      } else {
        for (const auto& kv : b) {
          const std::string k = kv.first.Scalar();
          const int kl = line_of(kv.first, top["benchmark"].line);
          try {
            if (k == "filter") s.bench_filter = kv.second.as<std::string>();
            else if (k == "repetitions") s.bench_repetitions = kv.second.as<int>();
            else pr.add(kl, fmt::format("benchmark: unknown key '{}' (filter, repetitions){}", shorten(k),
                                        suggest(k, {"filter", "repetitions"})));
          } catch (const YAML::Exception&) {
            pr.add(kl, fmt::format("benchmark: {}: wrong type, got {}", shorten(k), describe(kv.second)));
          }
        }
        if (s.bench_repetitions < 1)
          pr.add(value_line("benchmark"), "benchmark: repetitions must be >= 1");
      }
    }
    Run run;
    run.run_id = fmt::format("{}-micro", name_ok ? s.name : "suite");
    run.config.suite = name_ok ? s.name : "suite";
    run.config.results_dir = results_dir;
    run.config.run_id = run.run_id;
    run.point = {{"benchmark", s.bench_filter.empty() ? "all" : s.bench_filter}};
    run.ranks = 1;
    run.shape = fmt::format("micro-{}", s.resources.time_limit);
    // Its config is written as JSON too (configs/<id>.json): the results
    // folder must be one JSON can hold, as for every other run.
    for (const auto& p : validate(run.config)) pr.add(1, fmt::format("run {}: {}", run.run_id, p));
    s.runs.push_back(std::move(run));
    if (!pr.empty()) fail(path, pr);
    return s;
  }
  if (has("benchmark"))
    pr.add(top["benchmark"].line, "benchmark: only a 'mode: micro' suite has one");

  // ---- base config
  TrainConfig base;
  for (const auto& v : base_values) v.apply(base);
  base.suite = name_ok ? s.name : "suite";
  base.results_dir = results_dir;
  base.virtual_learners = s.mode == "virtual";
  if (servers_given) base.servers = s.resources.servers;
  else s.resources.servers = base.servers;
  if (target_error) base.target_error = *target_error;
  s.target_error = base.target_error;

  // ---- seeds
  std::vector<std::pair<std::uint64_t, std::string>> seeds;
  if (has("seeds")) {
    const auto& sv = top["seeds"].value;
    if (!sv.IsSequence() || sv.size() == 0) {
      pr.add(value_line("seeds"), fmt::format("seeds: expected a list of non-negative integers, got {}",
                                              sv.IsSequence() ? "an empty list" : describe(sv)));
      empty_dim = true;
    } else {
      for (const auto& e : sv) {
        std::uint64_t x = 0;
        std::string expected;
        if (convert(e, x, expected)) seeds.emplace_back(x, text_of(x));
        else pr.add(line_of(e, top["seeds"].line),
                    fmt::format("seeds: expected {}, got {}", expected, describe(e)));
      }
      if (seeds.empty()) empty_dim = true;
    }
  } else {
    seeds.emplace_back(base.seed, text_of(base.seed));
  }

  // ---- exclusions
  std::vector<Exclusion> exclusions;
  if (has("exclude")) {
    const auto& ex = top["exclude"].value;
    if (ex.IsSequence()) {
      for (const auto& entry : ex) {
        const int el = line_of(entry, top["exclude"].line);
        if (!entry.IsMap() || entry.size() == 0) {
          pr.add(el, fmt::format("exclude: each entry must be a mapping of axis -> value, got {}",
                                 describe(entry)));
          continue;
        }
        Exclusion x;
        bool ok = true;
        for (const auto& kv : entry) {
          const int kl = line_of(kv.first, el);
          const std::string raw = kv.first.IsScalar() ? kv.first.Scalar() : describe(kv.first);
          const std::string key = raw == "seeds" ? "seed" : canonical(raw);
          if (key != "seed" && !axis_keys.count(key)) {
            std::vector<std::string> names(axis_keys.begin(), axis_keys.end());
            names.push_back("seeds");
            std::string hint = suggest(raw, names);
            pr.add(kl, fmt::format("exclude: '{}' is not an axis, zip key or seeds{}", shorten(raw),
                                   hint.empty() ? fmt::format(" (swept: {})", fmt::join(names, ", "))
                                                : hint));
            ok = false;
            continue;
          }
          std::set<std::string> texts;
          std::vector<YAML::Node> items;
          if (kv.second.IsSequence()) {
            for (const auto& e : kv.second) items.push_back(e);
          } else {
            items.push_back(kv.second);
          }
          for (const auto& e : items) {
            const int vl = line_of(e, kl);
            if (key == "seed") {
              std::uint64_t sd = 0;
              std::string expected;
              if (convert(e, sd, expected)) texts.insert(text_of(sd));
              else {
                pr.add(vl, fmt::format("exclude seeds: expected {}, got {}", expected, describe(e)));
                ok = false;
              }
            } else if (auto v = find_key(key)->parse(e, vl, pr)) {
              texts.insert(v->text);
            } else {
              ok = false;
            }
          }
          x.match.emplace_back(key, std::move(texts));
        }
        if (ok) exclusions.push_back(std::move(x));
      }
    } else if (!ex.IsNull()) {
      pr.add(value_line("exclude"), fmt::format("exclude: expected a list of mappings, got {}", describe(ex)));
    }
  }

  // ---- expansion
  const int run_line = has("axes") ? top["axes"].line
                       : has("zip") ? top["zip"].line
                       : has("base") ? top["base"].line
                                     : 1;
  if (!dataset_line) dataset_line = has("base") ? top["base"].line : 1;
  // Count before expanding: a product of long axes is refused, not built.
  std::size_t total = empty_dim ? 0 : seeds.size();
  bool too_many = false;
  for (const auto& d : dims)
    if (__builtin_mul_overflow(total, d.choices.size(), &total)) {
      too_many = true;
      break;
    }
  if (too_many || total > kMaxRuns) {
    pr.add(run_line, fmt::format("axes x zip x seeds make {} runs, more than the {} a suite may "
                                 "have (split it, or sweep fewer values)",
                                 too_many ? "more than 18446744073709551615" : std::to_string(total),
                                 kMaxRuns));
    fail(path, pr);
  }

  Tally run_problems, datasets;
  std::unordered_map<std::string, int> dataset_lines;
  std::unordered_set<std::string> hashes, ids;
  std::size_t excluded = 0;
  std::vector<std::size_t> idx(dims.size(), 0);
  std::string prefix = name_ok ? s.name : "suite";
  for (std::size_t r = 0; r < total; ++r) {
    // Decode r: seeds innermost, the first dimension outermost.
    std::size_t rest = r;
    const std::size_t si = rest % seeds.size();
    rest /= seeds.size();
    for (std::size_t k = dims.size(); k-- > 0;) {
      idx[k] = rest % dims[k].choices.size();
      rest /= dims[k].choices.size();
    }

    Run run;
    for (std::size_t k = 0; k < dims.size(); ++k)
      for (const auto& v : dims[k].choices[idx[k]]) run.point[v.key] = v.text;
    run.point["seed"] = seeds[si].second;

    const bool drop = std::any_of(exclusions.begin(), exclusions.end(), [&](const Exclusion& x) {
      return std::all_of(x.match.begin(), x.match.end(), [&](const auto& m) {
        const auto it = run.point.find(m.first);
        return it != run.point.end() && m.second.count(it->second) > 0;
      });
    });
    if (drop) {
      ++excluded;
      continue;
    }

    TrainConfig& c = run.config;
    c = base;
    for (std::size_t k = 0; k < dims.size(); ++k)
      for (const auto& v : dims[k].choices[idx[k]]) v.apply(c);
    c.seed = seeds[si].first;
    // Derived rule: n of softsync and n_sync of nsync mean nothing elsewhere.
    if (c.protocol != "softsync") c.softsync_n = 1;
    if (c.protocol != "nsync") c.n_sync = 1;
    if (auto it = run.point.find("softsync_n"); it != run.point.end()) it->second = text_of(c.softsync_n);
    if (auto it = run.point.find("n_sync"); it != run.point.end()) it->second = text_of(c.n_sync);

    const std::string hash = config_hash(c);
    if (!hashes.insert(hash).second) continue;  // same run as an earlier one

    std::string compact;
    for (const auto& d : dims)
      for (const auto& key : d.keys) compact += token(key, run.point[key]) + "-";
    compact += token("seed", run.point["seed"]);
    run.run_id = fmt::format("{}-{}-{}", prefix, compact, hash.substr(0, 8));
    c.run_id = run.run_id;
    if (!ids.insert(run.run_id).second)
      pr.add(run_line, fmt::format("run id '{}' given to two different runs", run.run_id));

    for (const auto& p : validate(c)) run_problems.add(p, compact);
    if (s.resources.gpus_per_learner > 0 && !c.virtual_learners && c.device != "cuda")
      run_problems.add("resources.gpus_per_learner > 0 asks Slurm for GPUs, but device is cpu: "
                       "set device: cuda (or gpus_per_learner: 0)",
                       compact);
    if (c.data.kind == "fashion-mnist" || c.data.kind == "mnist" || c.data.kind == "cifar10") {
      const std::string loc =
          c.data.kind + '\n' + (c.data.dir.empty() ? data::default_dir(c.data.kind) : c.data.dir);
      if (!dataset_lines.count(loc)) {
        // The line that chose the folder: a swept dataset with its own dir, else base/axes.
        int line = dataset_line;
        for (std::size_t k = 0; k < dims.size(); ++k)
          for (const auto& v : dims[k].choices[idx[k]])
            if (v.key == "dataset" && v.text.find("dir=") != std::string::npos) line = v.line;
        dataset_lines[loc] = line;
      }
      datasets.add(loc, compact);
    }

    run.ranks = (c.virtual_learners || (c.learners == 1 && c.servers == 1)) ? 1 : c.servers + c.learners;
    const int gpus = c.virtual_learners ? 0 : c.learners * s.resources.gpus_per_learner;
    run.shape = fmt::format("ranks{}-gpu{}-{}", run.ranks, gpus, s.resources.time_limit);
    s.runs.push_back(std::move(run));
  }

  for (const auto& text : run_problems.order) {
    const auto& [count, first] = run_problems.hits[text];
    pr.add(run_line, count == 1 ? fmt::format("run {}: {}", first, text)
                                : fmt::format("run {} and {} more runs: {}", first, count - 1, text));
  }
  for (const auto& loc : datasets.order) {
    const auto& [count, first] = datasets.hits[loc];
    const auto nl = loc.find('\n');
    const std::string kind = loc.substr(0, nl), dir = loc.substr(nl + 1);
    if (const std::string missing = missing_dataset_files(kind, dir); !missing.empty())
      pr.add(dataset_lines[loc], fmt::format("dataset {}: {} (needed by {} run{})", kind, missing, count,
                                       count == 1 ? "" : "s"));
  }
  if (s.runs.empty() && total > 0)
    pr.add(has("exclude") ? top["exclude"].line : run_line,
           fmt::format("no runs: all {} combinations are excluded", excluded));

  if (!pr.empty()) fail(path, pr);
  return s;
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
