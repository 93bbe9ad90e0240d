// Reading a suite file's parts: name, description and mode; resources; the
// base config; axes and zip groups; a micro suite's benchmark; seeds and
// exclusions. Each adds every problem it finds, with its line.
#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include "common/blas_env.hpp"  // kMaxThreadsPerRank
#include "sweep/suite_detail.hpp"

namespace asgd::sweep::detail {

bool Top::before(const char* a, const char* b) const {
  return std::find(order.begin(), order.end(), a) < std::find(order.begin(), order.end(), b);
}

namespace {

const std::vector<std::string> kResourceKeys = {"servers", "gpus_per_learner", "cpus_per_rank",
                                                "time_limit", "exclusive", "max_parallel_tasks"};
constexpr int kMaxSuiteServers = 65536;     // the configuration's most ranks (config/fields.cpp)
constexpr int kMaxParallelTasks = 1000000;  // more than Slurm's MaxArraySize allows

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

// One entry of resources: into s.resources.
void read_resource(const std::string& key, const YAML::Node& v, int kl, Parsed& p, Problems& pr) {
  Resources& res = p.suite.resources;
  const int vl = line_of(v, kl);
  std::string expected;
  auto get_int = [&](int& out, int min, int max, const char* why = "") {
    int x = 0;
    if (!convert(v, x, expected))
      pr.add(vl, fmt::format("resources {}: expected {}, got {}", key, expected, describe(v)));
    else if (x < min || x > max)
      pr.add(vl, fmt::format("resources {}: {} must be in {}..{}{}", key, x, min, max, why));
    else
      out = x;
  };
  // Upper bounds keep every product (ranks x cpus, learners x GPUs) in an int.
  if (key == "servers") {
    get_int(res.servers, 1, kMaxSuiteServers);
    p.servers_given = true;
  } else if (key == "gpus_per_learner") {
    get_int(res.gpus_per_learner, 0, 1, " (a learner drives one GPU, the one of its index: more would sit idle)");
  } else if (key == "cpus_per_rank") {
    get_int(res.cpus_per_rank, 1, kMaxThreadsPerRank);
  } else if (key == "max_parallel_tasks") {
    get_int(res.max_parallel_tasks, 0, kMaxParallelTasks);
  } else if (key == "exclusive") {
    bool x = false;
    if (convert(v, x, expected)) res.exclusive = x;
    else pr.add(vl, fmt::format("resources exclusive: expected {}, got {}", expected, describe(v)));
  } else if (key == "time_limit") {
    if (v.IsScalar() && good_time_limit(v.Scalar()))
      res.time_limit = v.Scalar();
    else
      pr.add(vl, fmt::format("resources time_limit: expected HH:MM:SS or D-HH:MM:SS, got {}", describe(v)));
  } else {
    pr.add(kl, fmt::format("resources: unknown key '{}'{}", shorten(key), did_you_mean(key, kResourceKeys)));
  }
}

// A key may be swept once, and seeds only by `seeds`.
bool claim(const KeyDef* def, int line, const char* where, Parsed& p, Problems& pr) {
  if (def->name == "seed") {
    pr.add(line, fmt::format("{}: sweep seeds with the top-level 'seeds' list", where));
    return false;
  }
  if (!p.axis_keys.insert(def->name).second) {
    pr.add(line, fmt::format("{}: key '{}' is swept twice (in axes or zip)", where, def->name));
    return false;
  }
  return true;
}

// The values of an axis or zip member: one per list entry (nullopt where
// that value has a problem), or nullopt when v is no list or empty.
std::optional<std::vector<std::optional<Value>>> list_of(const KeyDef* def, const YAML::Node& v, int kl,
                                                         const char* where, Problems& pr) {
  if (!v.IsSequence()) {
    pr.add(line_of(v, kl), fmt::format("{} '{}': expected a list of values, got {}", where, def->name, describe(v)));
    return std::nullopt;
  }
  if (v.size() == 0) {
    pr.add(line_of(v, kl), fmt::format("{} '{}': the list is empty", where, def->name));
    return std::nullopt;
  }
  std::vector<std::optional<Value>> out;
  for (const auto& e : v) out.push_back(parse_value(*def, e, line_of(e, kl), pr));
  return out;
}

void read_axes(const Top& top, Parsed& p, std::vector<Dim>& dims, Problems& pr) {
  const auto& a = top.at("axes").value;
  if (!a.IsMap()) {
    if (!a.IsNull())
      pr.add(top.value_line("axes"),
             fmt::format("axes: expected a mapping of config key -> list, got {}", describe(a)));
    return;
  }
  for (const auto& kv : a) {
    const int kl = line_of(kv.first, top.at("axes").line);
    const KeyDef* def = resolve_key(kv.first, kl, "axes", pr);
    if (!def || !claim(def, kl, "axes", p, pr)) continue;
    if (def->name == "dataset" && !p.dataset_line) p.dataset_line = kl;
    auto values = list_of(def, kv.second, kl, "axis", pr);
    if (!values) continue;
    Dim d;
    d.keys = {def->name};
    for (auto& v : *values)
      if (v) d.choices.push_back({std::move(*v)});
    if (d.choices.empty()) p.empty_dim = true;
    p.suite.axes.push_back(def->name);
    dims.push_back(std::move(d));
  }
}

// One zip group: its lists, of equal length, as one dimension.
void read_zip_group(const YAML::Node& group, int gl, Parsed& p, std::vector<Dim>& dims,
                    std::vector<std::string>& zip_axes, Problems& pr) {
  Dim d;
  std::vector<std::vector<std::optional<Value>>> lists;
  bool ok = true;
  for (const auto& kv : group) {
    const int kl = line_of(kv.first, gl);
    const KeyDef* def = resolve_key(kv.first, kl, "zip", pr);
    if (!def || !claim(def, kl, "zip", p, pr)) {
      ok = false;
      continue;
    }
    if (def->name == "dataset" && !p.dataset_line) p.dataset_line = kl;
    zip_axes.push_back(def->name);
    auto values = list_of(def, kv.second, kl, "zip", pr);
    if (!values) {
      ok = false;
      continue;
    }
    d.keys.push_back(def->name);
    lists.push_back(std::move(*values));
  }
  if (!ok) return;
  bool equal = true;
  for (const auto& l : lists) equal = equal && l.size() == lists[0].size();
  if (!equal) {
    std::string lens;
    for (std::size_t i = 0; i < lists.size(); ++i)
      lens += fmt::format("{}{}: {}", i ? ", " : "", d.keys[i], lists[i].size());
    pr.add(gl, fmt::format("zip: lists of unequal length ({})", lens));
    return;
  }
  for (std::size_t j = 0; j < lists[0].size(); ++j) {
    std::vector<Value> choice;
    for (auto& l : lists)
      if (l[j]) choice.push_back(*l[j]);
    if (choice.size() == lists.size()) d.choices.push_back(std::move(choice));
  }
  if (d.choices.empty()) p.empty_dim = true;
  dims.push_back(std::move(d));
}

void read_zip(const Top& top, Parsed& p, std::vector<Dim>& dims, std::vector<std::string>& zip_axes,
              Problems& pr) {
  const auto& z = top.at("zip").value;
  if (!z.IsSequence()) {
    if (!z.IsNull())
      pr.add(top.value_line("zip"), fmt::format("zip: expected a list of mappings, got {}", describe(z)));
    return;
  }
  for (const auto& group : z) {
    const int gl = line_of(group, top.at("zip").line);
    if (!group.IsMap() || group.size() == 0) {
      pr.add(gl, fmt::format("zip: each entry must be a mapping of config key -> list, got {}", describe(group)));
      continue;
    }
    read_zip_group(group, gl, p, dims, zip_axes, pr);
  }
}

}  // namespace

void read_header(const Top& top, Parsed& p, Problems& pr) {
  Suite& s = p.suite;
  if (!top.has("name")) {
    pr.add(1, "missing 'name' (the suite's name; results go to <results>/<name>/)");
  } else if (const auto& n = top.at("name").value; !n.IsScalar() || n.Scalar().empty()) {
    pr.add(top.at("name").line, fmt::format("name: expected a name, got {}", describe(n)));
  } else if (const std::string why = name_problem("name", n.Scalar(), kMaxSuiteName); !why.empty()) {
    pr.add(top.value_line("name"), why);
  } else {
    s.name = n.Scalar();
    p.name_ok = true;
  }
  p.prefix = p.name_ok ? s.name : "suite";
  if (top.has("description")) {
    const auto& d = top.at("description").value;
    if (d.IsScalar()) s.description = d.Scalar();
    else if (!d.IsNull())
      pr.add(top.value_line("description"), fmt::format("description: expected text, got {}", describe(d)));
  }
  if (top.has("mode")) {
    const auto& m = top.at("mode").value;
    const auto mode = m.IsScalar() ? parse_suite_mode(m.Scalar()) : std::nullopt;
    if (mode)
      s.mode = *mode;
    else
      pr.add(top.value_line("mode"),
             fmt::format("mode: expected real, virtual or micro, got {}{}", describe(m),
                         m.IsScalar() ? did_you_mean(m.Scalar(), {"real", "virtual", "micro"}) : ""));
  }
}

void read_resources(const Top& top, Parsed& p, Problems& pr) {
  if (!top.has("resources")) return;
  const auto& r = top.at("resources").value;
  if (!r.IsMap()) {
    if (!r.IsNull())
      pr.add(top.value_line("resources"), fmt::format("resources: expected a mapping, got {}", describe(r)));
    return;
  }
  std::set<std::string> seen;
  for (const auto& kv : r) {
    const int kl = line_of(kv.first, top.at("resources").line);
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : describe(kv.first);
    if (!seen.insert(key).second) {
      pr.add(kl, fmt::format("resources: key '{}' given twice", shorten(key)));
      continue;
    }
    read_resource(key, kv.second, kl, p, pr);
  }
}

// base: `timing: {profile: FILE, kind: normal}`, the timing model as one
// mapping: the same as the keys `profile` and `timing` (kind).
void read_timing_map(const YAML::Node& m, int line, Parsed& p, Problems& pr) {
  for (const auto& kv : m) {
    const int kl = line_of(kv.first, line);
    const std::string sub = kv.first.IsScalar() ? kv.first.Scalar() : "";
    if (sub != "profile" && sub != "kind") {
      pr.add(kl, fmt::format("base: timing: unknown key {} (profile, kind)", describe(kv.first)));
      continue;
    }
    const KeyDef* def = resolve_key(YAML::Node(sub == "kind" ? "timing" : "profile"), kl, "base", pr);
    if (!def) continue;
    if (!p.base_keys.insert(def->name).second) {
      pr.add(kl, fmt::format("base: key '{}' given twice", def->name));
      continue;
    }
    if (auto v = parse_value(*def, kv.second, line_of(kv.second, kl), pr)) p.base_values.push_back(std::move(*v));
  }
}

void read_base(const Top& top, Parsed& p, Problems& pr) {
  if (!top.has("base")) return;
  const auto& b = top.at("base").value;
  if (!b.IsMap()) {
    if (!b.IsNull())
      pr.add(top.value_line("base"), fmt::format("base: expected a mapping of config keys, got {}", describe(b)));
    return;
  }
  for (const auto& kv : b) {
    const int kl = line_of(kv.first, top.at("base").line);
    if (kv.first.IsScalar() && kv.first.Scalar() == "timing" && kv.second.IsMap()) {
      read_timing_map(kv.second, kl, p, pr);
      continue;
    }
    const KeyDef* def = resolve_key(kv.first, kl, "base", pr);
    if (!def) continue;
    if (!p.base_keys.insert(def->name).second) {
      pr.add(kl, fmt::format("base: key '{}' given twice", def->name));
      continue;
    }
    if (def->name == "dataset") p.dataset_line = kl;
    if (auto v = parse_value(*def, kv.second, line_of(kv.second, kl), pr)) p.base_values.push_back(std::move(*v));
  }
}

void read_dims(const Top& top, Parsed& p, Problems& pr) {
  std::vector<Dim> axis_dims, zip_dims;
  std::vector<std::string> zip_axes;
  if (top.has("axes")) read_axes(top, p, axis_dims, pr);
  if (top.has("zip")) read_zip(top, p, zip_dims, zip_axes, pr);
  // Dimensions in file order: whichever of axes / zip comes first is outer.
  const bool zip_first = top.has("zip") && top.has("axes") && top.before("zip", "axes");
  auto& first = zip_first ? zip_dims : axis_dims;
  auto& second = zip_first ? axis_dims : zip_dims;
  for (auto& d : first) p.dims.push_back(std::move(d));
  for (auto& d : second) p.dims.push_back(std::move(d));
  auto& axes = p.suite.axes;
  axes.insert(zip_first ? axes.begin() : axes.end(), zip_axes.begin(), zip_axes.end());

  // top-level settings that override keys
  if (top.has("target_error")) {
    const int vl = top.value_line("target_error");
    const auto& v = top.at("target_error").value;
    double te = 0;
    std::string expected;
    if (!convert(v, te, expected))
      pr.add(vl, fmt::format("target_error: expected {}, got {}", expected, describe(v)));
    else if (te < 0 || te > 1)
      pr.add(vl, fmt::format("target_error {} not in [0, 1]", te));
    else
      p.target_error = te;
    if (p.axis_keys.count("target_error") || p.base_keys.count("target_error"))
      pr.add(top.at("target_error").line, "target_error is set both at the top level and in base/axes/zip");
  }
  if (p.servers_given && (p.axis_keys.count("servers") || p.base_keys.count("servers")))
    pr.add(top.at("resources").line, "servers is set both in resources and in base/axes/zip");
}

void read_micro(const Top& top, Parsed& p, Problems& pr) {
  Suite& s = p.suite;
  for (const char* k : {"base", "axes", "zip", "exclude", "seeds", "target_error"})
    if (top.has(k)) pr.add(top.at(k).line, fmt::format("{}: a micro suite has no training runs", k));
  if (!top.has("benchmark")) return;
  const auto& b = top.at("benchmark").value;
  if (!b.IsMap()) {
    pr.add(top.value_line("benchmark"),
           fmt::format("benchmark: expected a mapping (filter, repetitions), got {}", describe(b)));
    return;
  }
  for (const auto& kv : b) {
    const std::string k = kv.first.Scalar();
    const int kl = line_of(kv.first, top.at("benchmark").line);
    try {
      std::string expected;
      if (k == "filter") {
        s.bench_filter = kv.second.as<std::string>();
      } else if (k == "repetitions") {
        if (!convert(kv.second, s.bench_repetitions, expected))
          pr.add(kl, fmt::format("benchmark: repetitions: expected {}, got {}", expected, describe(kv.second)));
      } else {
        pr.add(kl, fmt::format("benchmark: unknown key '{}' (filter, repetitions){}", shorten(k),
                               did_you_mean(k, {"filter", "repetitions"})));
      }
    } catch (const YAML::Exception&) {
      pr.add(kl, fmt::format("benchmark: {}: wrong type, got {}", shorten(k), describe(kv.second)));
    }
  }
  if (s.bench_repetitions < 1) pr.add(top.value_line("benchmark"), "benchmark: repetitions must be >= 1");
}

void read_seeds(const Top& top, const TrainConfig& base, Parsed& p, Problems& pr) {
  if (!top.has("seeds")) {
    p.seeds.emplace_back(base.seed, text_of(base.seed));
    return;
  }
  const auto& sv = top.at("seeds").value;
  if (!sv.IsSequence() || sv.size() == 0) {
    pr.add(top.value_line("seeds"), fmt::format("seeds: expected a list of non-negative integers, got {}",
                                                sv.IsSequence() ? "an empty list" : describe(sv)));
    p.empty_dim = true;
    return;
  }
  for (const auto& e : sv) {
    std::uint64_t x = 0;
    std::string expected;
    if (convert(e, x, expected)) p.seeds.emplace_back(x, text_of(x));
    else pr.add(line_of(e, top.at("seeds").line), fmt::format("seeds: expected {}, got {}", expected, describe(e)));
  }
  if (p.seeds.empty()) p.empty_dim = true;
}

}  // namespace asgd::sweep::detail
