#include "config/config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.hpp"
#include "common/hash.hpp"
#include "nn/zoo.hpp"

namespace asgd {

namespace {
bool known(const std::string& v, std::initializer_list<const char*> list) {
  return std::any_of(list.begin(), list.end(), [&](const char* s) { return v == s; });
}

bool finite(double v) { return std::isfinite(v); }

// Text that JSON can hold: a configuration is stored as JSON (suite configs,
// results files, checkpoints), and nlohmann::json refuses to write a string
// that is not valid UTF-8 (a path from the command line or a YAML file can be
// any bytes).
bool json_text(const std::string& v) {
  try {
    (void)nlohmann::json(v).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

// Largest synthetic image side and channel count: their product stays far
// from overflowing the models' parameter counts.
constexpr index_t kMaxSyntheticSide = index_t{1} << 20;
constexpr index_t kMaxSyntheticChannels = 4096;
constexpr std::int32_t kMaxClasses = 1 << 20;
constexpr index_t kMaxSamples = index_t{1} << 40;
constexpr int kMaxRanks = 65536;
constexpr int kMaxThreads = 1024;
}  // namespace

std::vector<std::string> validate(const TrainConfig& c) {
  std::vector<std::string> p;
  auto need = [&](bool ok, std::string msg) {
    if (!ok) p.push_back(std::move(msg));
  };
  const auto models = nn::model_names();
  need(std::find(models.begin(), models.end(), c.model) != models.end(),
       fmt::format("model '{}' unknown ({})", shorten(c.model), fmt::join(models, ", ")));
  need(known(c.data.kind, {"fashion-mnist", "mnist", "cifar10", "synthetic"}),
       fmt::format("dataset '{}' unknown (fashion-mnist, mnist, cifar10, synthetic)",
                   shorten(c.data.kind)));
  need(c.batch >= 1, fmt::format("batch {} must be >= 1", c.batch));
  need(c.lr > 0 && finite(c.lr), fmt::format("lr {} must be > 0", c.lr));
  need(c.momentum >= 0 && c.momentum < 1, fmt::format("momentum {} not in [0, 1)", c.momentum));
  need(c.weight_decay >= 0 && finite(c.weight_decay),
       fmt::format("weight decay {} must be >= 0 and finite", c.weight_decay));
  need(c.lr_gamma > 0 && finite(c.lr_gamma), fmt::format("lr gamma {} must be > 0", c.lr_gamma));
  need(std::is_sorted(c.lr_steps.begin(), c.lr_steps.end()), "lr steps must be increasing");
  for (double s : c.lr_steps)
    if (!(s >= 0 && finite(s))) {
      p.push_back(fmt::format("lr step {} must be a finite epoch >= 0", s));
      break;
    }
  if (!finite(c.epochs))
    p.push_back(fmt::format("epochs {} must be a finite number", c.epochs));
  else if (!(c.epochs > 0))
    p.push_back(fmt::format("epochs {} must be > 0", c.epochs));
  else if (c.epochs > kMaxEpochs)
    p.push_back(fmt::format("epochs {} is beyond {} (a typo?)", c.epochs, kMaxEpochs));
  need(c.max_steps >= 0, fmt::format("max steps {} must be >= 0", c.max_steps));
  need(c.eval_every > 0 && finite(c.eval_every),
       fmt::format("eval every {} epochs must be > 0", c.eval_every));
  need(c.eval_batch >= 1, fmt::format("eval batch {} must be >= 1", c.eval_batch));
  need(c.eval_samples >= 0, fmt::format("eval samples {} must be >= 0", c.eval_samples));
  need(c.checkpoint_every >= 0, fmt::format("checkpoint every {} must be >= 0", c.checkpoint_every));
  need(c.target_error >= 0 && c.target_error <= 1,
       fmt::format("target error {} not in [0, 1]", c.target_error));
  need(c.diverge_loss > 0 && finite(c.diverge_loss),
       fmt::format("diverge loss {} must be > 0 and finite", c.diverge_loss));
  need(c.threads >= 1 && c.threads <= kMaxThreads,
       fmt::format("threads {} must be in 1..{}", c.threads, kMaxThreads));
  need(known(c.device, {"cpu", "cuda"}),
       fmt::format("device '{}' unknown (cpu, cuda)", shorten(c.device)));
  need(c.device == "cpu" || !c.virtual_learners,
       "virtual learners run on the CPU (device cuda is for real learners)");
  need(!c.results_dir.empty(), "results folder must not be empty");
  need(c.results_dir.size() <= 4096,
       fmt::format("results folder '{}' is too long ({} characters)", shorten(c.results_dir),
                   c.results_dir.size()));
  need(c.learners >= 1, fmt::format("learners {} must be >= 1", c.learners));
  need(c.learners <= kMaxRanks, fmt::format("learners {} is more than {}", c.learners, kMaxRanks));
  need(c.servers >= 1, fmt::format("servers {} must be >= 1", c.servers));
  need(c.servers <= kMaxRanks, fmt::format("servers {} is more than {}", c.servers, kMaxRanks));
  need(known(c.protocol, {"hardsync", "softsync", "nsync"}),
       fmt::format("protocol '{}' unknown (hardsync, softsync, nsync)", shorten(c.protocol)));
  need(c.softsync_n >= 1 && c.softsync_n <= c.learners,
       fmt::format("softsync n {} must be in 1..learners ({})", c.softsync_n, c.learners));
  need(c.n_sync >= 1, fmt::format("n_sync {} must be >= 1", c.n_sync));
  need(known(c.lr_policy, {"constant", "staleness", "mean-staleness"}),
       fmt::format("lr policy '{}' unknown (constant, staleness, mean-staleness)",
                   shorten(c.lr_policy)));
  need(c.warm_steps >= 0, fmt::format("warm steps {} must be >= 0", c.warm_steps));
  need(c.warm_start.empty() || c.warm_steps == 0, "warm start: give a checkpoint or warm steps, not both");
  need(known(c.timing, {"calibrate", "fixed", "normal", "lognormal"}),
       fmt::format("timing '{}' unknown (calibrate, fixed, normal, lognormal)", shorten(c.timing)));
  need(c.compute_s >= 0 && c.comm_s >= 0 && finite(c.compute_s) && finite(c.comm_s),
       "compute_s and comm_s must be >= 0 and finite");
  need(c.compute_cv >= 0 && finite(c.compute_cv),
       fmt::format("compute_cv {} must be >= 0 and finite", c.compute_cv));
  need(c.straggler >= -1 && c.straggler < c.learners,
       fmt::format("straggler {} must be -1 (none) or a learner index below {}", c.straggler, c.learners));
  need(c.straggler_factor >= 1 && finite(c.straggler_factor),
       fmt::format("straggler factor {} must be >= 1 and finite", c.straggler_factor));
  if (c.data.kind == "synthetic") {
    need(c.data.h >= 1 && c.data.w >= 1 && c.data.c >= 1,
         fmt::format("synthetic shape {}x{}x{} must be positive (--synthetic-size, "
                     "--synthetic-channels)", c.data.h, c.data.w, c.data.c));
    need(c.data.h <= kMaxSyntheticSide && c.data.w <= kMaxSyntheticSide &&
             c.data.c <= kMaxSyntheticChannels,
         fmt::format("synthetic shape {}x{}x{} is too large (--synthetic-size at most {}, "
                     "--synthetic-channels at most {})",
                     c.data.h, c.data.w, c.data.c, kMaxSyntheticSide, kMaxSyntheticChannels));
    need(c.data.classes >= 2 && c.data.classes <= kMaxClasses,
         fmt::format("synthetic classes {} must be in 2..{} (--synthetic-classes)", c.data.classes,
                     kMaxClasses));
    need(c.data.n_train >= 1 && c.data.n_test >= 1,
         fmt::format("synthetic sample counts must be >= 1 (--synthetic-train {}, --synthetic-test {})",
                     c.data.n_train, c.data.n_test));
    need(c.data.n_train <= kMaxSamples && c.data.n_test <= kMaxSamples,
         fmt::format("synthetic sample counts must be at most {} (--synthetic-train {}, "
                     "--synthetic-test {})",
                     kMaxSamples, c.data.n_train, c.data.n_test));
  }
  need(c.data.dir.size() <= 4096, fmt::format("data folder '{}' is too long", shorten(c.data.dir)));
  for (const auto& [what, v] : {std::pair<const char*, const std::string*>{"results folder", &c.results_dir},
                                {"data folder", &c.data.dir},
                                {"warm start file", &c.warm_start}})
    need(json_text(*v), fmt::format("{} '{}' is not valid UTF-8 (configurations are stored as JSON)", what,
                                    shorten(*v)));
  need(c.warm_start.size() <= 4096,
       fmt::format("warm start file '{}' is too long", shorten(c.warm_start)));
  if (auto why = name_problem("suite", c.suite, kMaxSuiteName); !why.empty()) p.push_back(why);
  if (!c.run_id.empty())
    if (auto why = name_problem("run id", c.run_id, kMaxRunId); !why.empty()) p.push_back(why);
  return p;
}

void check(const TrainConfig& c) {
  const auto problems = validate(c);
  if (problems.empty()) return;
  std::string msg = fmt::format("invalid configuration ({} problem{}): ", problems.size(),
                                problems.size() == 1 ? "" : "s");
  for (std::size_t i = 0; i < problems.size(); ++i) msg += (i ? "; " : "") + problems[i];
  throw Error(msg);
}

void to_json(nlohmann::json& j, const TrainConfig& c) {
  j = nlohmann::json{
      {"model", c.model},
      {"dataset",
       {{"kind", c.data.kind},
        {"dir", c.data.dir},
        {"shape", {c.data.h, c.data.w, c.data.c}},
        {"classes", c.data.classes},
        {"n_train", c.data.n_train},
        {"n_test", c.data.n_test},
        {"seed", c.data.seed},
        {"subtract_mean", c.data.subtract_mean}}},
      {"batch", c.batch},
      {"lr", c.lr},
      {"momentum", c.momentum},
      {"weight_decay", c.weight_decay},
      {"lr_steps", c.lr_steps},
      {"lr_gamma", c.lr_gamma},
      {"epochs", c.epochs},
      {"max_steps", c.max_steps},
      {"eval_every", c.eval_every},
      {"eval_batch", c.eval_batch},
      {"eval_samples", c.eval_samples},
      {"checkpoint_every", c.checkpoint_every},
      {"seed", c.seed},
      {"target_error", c.target_error},
      {"diverge_loss", c.diverge_loss},
      {"threads", c.threads},
      {"results_dir", c.results_dir},
      {"suite", c.suite},
      {"run_id", c.run_id},
      {"learners", c.learners},
      {"servers", c.servers},
      {"protocol", c.protocol},
      {"softsync_n", c.softsync_n},
      {"n_sync", c.n_sync},
      {"lr_policy", c.lr_policy},
      {"warm_start", c.warm_start},
      {"warm_steps", c.warm_steps},
      {"virtual", c.virtual_learners},
      {"timing", c.timing},
      {"compute_s", c.compute_s},
      {"compute_cv", c.compute_cv},
      {"comm_s", c.comm_s},
      {"straggler", c.straggler},
      {"straggler_factor", c.straggler_factor},
  };
  // Only when not the default, so CPU configurations keep their hashes and run ids.
  if (c.device != "cpu") j["device"] = c.device;
}

namespace {

using json = nlohmann::json;

const std::vector<std::string> kConfigKeys = {
    "model",        "dataset",      "batch",       "lr",          "momentum",
    "weight_decay", "lr_steps",     "lr_gamma",    "epochs",      "max_steps",
    "eval_every",   "eval_batch",   "eval_samples", "checkpoint_every", "seed",
    "target_error", "diverge_loss", "threads",     "results_dir", "suite",
    "run_id",       "learners",     "servers",     "protocol",    "softsync_n",
    "n_sync",       "lr_policy",    "warm_start",  "warm_steps",  "virtual",
    "timing",       "compute_s",    "compute_cv",  "comm_s",      "straggler",
    "straggler_factor", "device"};
const std::vector<std::string> kDatasetKeys = {"kind",   "dir",  "shape",        "classes",
                                               "n_train", "n_test", "seed", "subtract_mean"};

// What a JSON value is, for "expected X, got Y".
std::string json_kind(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "a list";
    case json::value_t::string: return fmt::format("the text \"{}\"", shorten(v.get<std::string>()));
    case json::value_t::boolean: return v.get<bool>() ? "true" : "false";
    default: return shorten(v.dump());
  }
}

// Reads typed values of an object, collecting one problem per bad key.
struct Reader {
  bool strict = true;
  std::vector<std::string> problems;

  void bad(const std::string& key, const std::string& expected, const json& v) {
    problems.push_back(fmt::format("key '{}': expected {}, got {}", key, expected, json_kind(v)));
  }

  template <class T>
  void get(const json& v, const std::string& key, T& out) {
    if constexpr (std::is_same_v<T, bool>) {
      if (v.is_boolean()) out = v.get<bool>();
      else bad(key, "true or false", v);
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (v.is_string()) out = v.get<std::string>();
      else bad(key, "a text value", v);
    } else if constexpr (std::is_floating_point_v<T>) {
      if (v.is_number()) out = v.get<T>();
      else bad(key, "a number", v);
    } else if constexpr (std::is_integral_v<T>) {
      constexpr auto lo = std::numeric_limits<T>::min();
      constexpr auto hi = std::numeric_limits<T>::max();
      const std::string expected = std::is_unsigned_v<T>
                                       ? fmt::format("a whole number from 0 to {}", hi)
                                       : fmt::format("a whole number from {} to {}", lo, hi);
      if (v.is_number_unsigned()) {
        const auto u = v.get<std::uint64_t>();
        if (u > static_cast<std::uint64_t>(hi)) return bad(key, expected, v);
        out = static_cast<T>(u);
      } else if (v.is_number_integer()) {
        const auto i = v.get<std::int64_t>();
        if (i < static_cast<std::int64_t>(lo) ||
            (i > 0 && static_cast<std::uint64_t>(i) > static_cast<std::uint64_t>(hi)))
          return bad(key, expected, v);
        out = static_cast<T>(i);
      } else if (v.is_number_float()) {
        // 1e3 is a whole number; 1.5 is not (it would be truncated).
        const double d = v.get<double>();
        if (!(std::isfinite(d) && d == std::floor(d) && d >= static_cast<double>(lo) &&
              d < std::ldexp(1.0, std::numeric_limits<T>::digits)))
          return bad(key, expected, v);
        out = static_cast<T>(d);
      } else {
        bad(key, expected, v);
      }
    } else {  // std::vector<double>
      if (!v.is_array()) return bad(key, "a list of numbers", v);
      T list;
      for (const auto& e : v) {
        if (!e.is_number()) return bad(key, "a list of numbers", v);
        list.push_back(e.get<double>());
      }
      out = std::move(list);
    }
  }

  void unknown(const std::string& where, const std::string& key,
               const std::vector<std::string>& names) {
    if (strict)
      problems.push_back(fmt::format("{}unknown key '{}'{}", where, shorten(key),
                                     did_you_mean(key, names)));
  }
};

void read_dataset(Reader& r, const json& ds, data::DatasetSpec& d) {
  if (ds.is_string()) {  // a kind name alone
    d.kind = ds.get<std::string>();
    return;
  }
  if (!ds.is_object()) return r.bad("dataset", "an object (kind, dir, shape, ...)", ds);
  for (const auto& [key, v] : ds.items()) {
    const std::string k = "dataset." + key;
    if (key == "kind") r.get(v, k, d.kind);
    else if (key == "dir") r.get(v, k, d.dir);
    else if (key == "shape") {
      if (!v.is_array() || v.size() != 3) {
        r.bad(k, "[height, width, channels]", v);
        continue;
      }
      index_t hwc[3] = {d.h, d.w, d.c};
      const std::size_t before = r.problems.size();
      for (std::size_t i = 0; i < 3; ++i) r.get(v[i], k, hwc[i]);
      if (r.problems.size() == before) {
        d.h = hwc[0];
        d.w = hwc[1];
        d.c = hwc[2];
      }
    } else if (key == "classes") r.get(v, k, d.classes);
    else if (key == "n_train") r.get(v, k, d.n_train);
    else if (key == "n_test") r.get(v, k, d.n_test);
    else if (key == "seed") r.get(v, k, d.seed);
    else if (key == "subtract_mean") r.get(v, k, d.subtract_mean);
    else r.unknown("dataset: ", key, kDatasetKeys);
  }
}

void read_config(const json& j, TrainConfig& c, bool strict) {
  if (!j.is_object())
    throw Error(fmt::format("expected a JSON object of config keys, got {}", json_kind(j)));
  TrainConfig d;
  c = d;
  Reader r;
  r.strict = strict;
  for (const auto& [key, v] : j.items()) {
    if (key == "model") r.get(v, key, c.model);
    else if (key == "dataset") read_dataset(r, v, c.data);
    else if (key == "batch") r.get(v, key, c.batch);
    else if (key == "lr") r.get(v, key, c.lr);
    else if (key == "momentum") r.get(v, key, c.momentum);
    else if (key == "weight_decay") r.get(v, key, c.weight_decay);
    else if (key == "lr_steps") r.get(v, key, c.lr_steps);
    else if (key == "lr_gamma") r.get(v, key, c.lr_gamma);
    else if (key == "epochs") r.get(v, key, c.epochs);
    else if (key == "max_steps") r.get(v, key, c.max_steps);
    else if (key == "eval_every") r.get(v, key, c.eval_every);
    else if (key == "eval_batch") r.get(v, key, c.eval_batch);
    else if (key == "eval_samples") r.get(v, key, c.eval_samples);
    else if (key == "checkpoint_every") r.get(v, key, c.checkpoint_every);
    else if (key == "seed") r.get(v, key, c.seed);
    else if (key == "target_error") r.get(v, key, c.target_error);
    else if (key == "diverge_loss") r.get(v, key, c.diverge_loss);
    else if (key == "threads") r.get(v, key, c.threads);
    else if (key == "results_dir") r.get(v, key, c.results_dir);
    else if (key == "suite") r.get(v, key, c.suite);
    else if (key == "run_id") r.get(v, key, c.run_id);
    else if (key == "learners") r.get(v, key, c.learners);
    else if (key == "servers") r.get(v, key, c.servers);
    else if (key == "protocol") r.get(v, key, c.protocol);
    else if (key == "softsync_n") r.get(v, key, c.softsync_n);
    else if (key == "n_sync") r.get(v, key, c.n_sync);
    else if (key == "lr_policy") r.get(v, key, c.lr_policy);
    else if (key == "warm_start") r.get(v, key, c.warm_start);
    else if (key == "warm_steps") r.get(v, key, c.warm_steps);
    else if (key == "virtual") r.get(v, key, c.virtual_learners);
    else if (key == "timing") r.get(v, key, c.timing);
    else if (key == "compute_s") r.get(v, key, c.compute_s);
    else if (key == "compute_cv") r.get(v, key, c.compute_cv);
    else if (key == "comm_s") r.get(v, key, c.comm_s);
    else if (key == "straggler") r.get(v, key, c.straggler);
    else if (key == "straggler_factor") r.get(v, key, c.straggler_factor);
    else if (key == "device") r.get(v, key, c.device);
    else r.unknown("", key, kConfigKeys);
  }
  if (r.problems.empty()) return;
  std::string msg;
  for (std::size_t i = 0; i < r.problems.size(); ++i) msg += (i ? "; " : "") + r.problems[i];
  throw Error(msg);
}

}  // namespace

void from_json(const nlohmann::json& j, TrainConfig& c) { read_config(j, c, true); }

TrainConfig load_config_file(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string shown = shorten(path, 200);
  if (path.empty()) throw Error("--config: the file name is empty");
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec || !fs::exists(st))
    throw Error(fmt::format("{}: cannot open config file: {}", shown,
                            ec ? ec.message() : std::strerror(ENOENT)));
  if (fs::is_directory(st)) throw Error(fmt::format("{}: is a folder, not a config file", shown));
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(fmt::format("{}: cannot open config file: {}", shown,
                            std::strerror(errno ? errno : EACCES)));
  constexpr std::size_t kMaxBytes = std::size_t{64} << 20;
  std::string text;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxBytes)
      throw Error(fmt::format("{}: config file is larger than 64 MiB", shown));
  }
  if (in.bad()) throw Error(fmt::format("{}: cannot read config file", shown));
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw Error(fmt::format("{}: config file is empty (expected a JSON object of config keys)", shown));
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    std::string what = e.what();
    if (what.starts_with("[json.exception.")) what.erase(0, what.find("] ") + 2);
    throw Error(fmt::format("{}: not valid JSON: {}", shown, shorten(what, 200)));
  }
  TrainConfig c;
  try {
    read_config(j, c, true);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", shown, e.what()));
  }
  return c;
}

std::string config_hash(const TrainConfig& c) {
  nlohmann::json j = c;
  for (const char* k : {"results_dir", "run_id", "threads", "suite", "checkpoint_every"})
    j.erase(k);
  // replace: the same text as dump() for every valid config; a path that is
  // not UTF-8 (refused by validate(), but suites hash runs before validating
  // them) must not throw here.
  const std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return fmt::format("{:016x}", fnv1a64(s));
}

std::string resolved_run_id(const TrainConfig& c) {
  if (!c.run_id.empty()) return c.run_id;
  return fmt::format("{}-{}-{}-L{}-{}", c.model, c.data.kind, c.protocol, c.learners,
                     config_hash(c).substr(0, 8));
}

void check_same_config(const TrainConfig& c, const std::string& stored_config_json,
                       const std::string& path) {
  const std::string id = resolved_run_id(c);
  TrainConfig old;
  try {
    // lenient: keys of another version of asgd are not this run's problem
    read_config(json::parse(stored_config_json), old, false);
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: run {} already finished, but its stored configuration cannot be "
                            "read ({}); remove the file or choose another --run-id",
                            path, id, shorten(e.what(), 120)));
  }
  const std::string have = config_hash(old), want = config_hash(c);
  if (have != want)
    throw Error(fmt::format("{}: run {} already finished with another configuration (hash {}, this "
                            "run {}); remove it or choose another --run-id",
                            path, id, have, want));
}

// ------------------------------------------------------------------ memory

namespace {

std::string bytes_text(double b) {
  static const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB"};
  int u = 0;
  while (b >= 1024 && u < 6) {
    b /= 1024;
    ++u;
  }
  if (b >= 1024) return fmt::format("{:.3g} EB", b);
  return fmt::format("{:.1f} {}", b, units[u]);
}

struct DataFacts {
  double n_train = 0, n_test = 0;
  nn::Shape shape;
  std::int32_t classes = 10;
  double transient = 0;  // bytes held while loading (file bytes, prototypes)
};

DataFacts data_facts(const TrainConfig& c) {
  DataFacts f;
  if (c.data.kind == "synthetic") {
    f.n_train = static_cast<double>(c.data.n_train);
    f.n_test = static_cast<double>(c.data.n_test);
    f.shape = {c.data.h, c.data.w, c.data.c};
    f.classes = c.data.classes;
    f.transient = static_cast<double>(c.data.classes) * static_cast<double>(f.shape.size()) * 8;
  } else if (c.data.kind == "cifar10") {
    f.n_train = 50000;
    f.n_test = 10000;
    f.shape = {32, 32, 3};
    f.transient = 10000.0 * 3073;
  } else {  // fashion-mnist, mnist
    f.n_train = 60000;
    f.n_test = 10000;
    f.shape = {28, 28, 1};
    f.transient = 60000.0 * 784 * 2;  // file bytes and their gzip buffer
  }
  return f;
}

}  // namespace

MemoryEstimate estimate_memory(const TrainConfig& c) {
  const DataFacts f = data_facts(c);
  const double sample = static_cast<double>(f.shape.size());
  const nn::ModelSpec m = nn::model_spec(c.model, f.shape, f.classes);
  double params = 0, acts = 0, widest = sample, work = 0;
  for (const auto& l : m.layers) {
    params += static_cast<double>(l.n_params);
    const double out = static_cast<double>(l.out.size());
    acts += out;
    widest = std::max(widest, out);
    work += static_cast<double>(l.in.size());  // lrn, dropout, pooling masks
  }
  const double L = c.learners;
  const bool virt = c.virtual_learners;
  MemoryEstimate e;
  // weights, gradient, momentum, and the host copies a checkpoint makes
  double copies = 5;
  if (virt) copies += 2 + L * (c.protocol == "nsync" ? 2 : 1);  // server core + learners' weights
  e.model = params * 4 * copies;
  // the training and test images, loading buffers, and each sampler's permutation
  e.data = (f.n_train + f.n_test) * sample * 4 + f.transient + f.n_train * 8 * (virt ? L + 1 : 1);
  const double batch = static_cast<double>(std::max(c.batch, c.eval_batch));
  // im2col of at least one sample (chunks of about 1 MiB on the host), and its gradient
  double conv_cols = 0;
  for (const auto& l : m.layers)
    if (l.kind == "conv") {
      const double f_out = static_cast<double>(l.out.c);
      const double k_len = static_cast<double>(l.n_params) / f_out - 1;
      const double pixels = static_cast<double>(l.out.h) * static_cast<double>(l.out.w);
      conv_cols += 2 * std::max(pixels * k_len, 262144.0);
    }
  e.activations = batch * (acts + 2 * widest + f.classes + work) * 4 +
                  (static_cast<double>(c.batch) + static_cast<double>(c.eval_batch)) * sample * 4 + conv_cols * 4;
  return e;
}

double available_memory() {
  double avail = -1;
  if (std::ifstream in("/proc/meminfo"); in) {
    std::string key;
    double kb = 0;
    std::string unit;
    while (in >> key >> kb) {
      std::getline(in, unit);
      if (key == "MemAvailable:") {
        avail = kb * 1024;
        break;
      }
    }
  }
  if (avail < 0) {
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) avail = static_cast<double>(pages) * static_cast<double>(page);
  }
  // a cgroup (v2) limit below what the machine has
  std::ifstream max_in("/sys/fs/cgroup/memory.max"), cur_in("/sys/fs/cgroup/memory.current");
  double max = 0, cur = 0;
  if (max_in >> max && cur_in >> cur && max > cur) avail = avail < 0 ? max - cur : std::min(avail, max - cur);
  return avail < 0 ? std::numeric_limits<double>::infinity() : avail;
}

void check_resources(const TrainConfig& c) {
  if (c.data.kind == "synthetic" && c.batch > c.data.n_train / std::max(1, c.learners))
    throw Error(fmt::format("--synthetic-train {} has fewer samples than one round of {} learner{} "
                            "x --batch {}",
                            c.data.n_train, c.learners, c.learners == 1 ? "" : "s", c.batch));
  MemoryEstimate e;
  try {
    e = estimate_memory(c);
  } catch (const Error& err) {  // the model cannot take this input shape
    const DataFacts f = data_facts(c);
    throw Error(fmt::format("model {} cannot take {}x{}x{} inputs{}: {}", c.model, f.shape.h,
                            f.shape.w, f.shape.c,
                            c.data.kind == "synthetic" ? " (--synthetic-size, --synthetic-channels)"
                                                       : " of " + c.data.kind,
                            err.what()));
  }
  const double avail = available_memory();
  if (e.total() <= avail) return;
  // Which flag to change: the per-sample size, the sample counts, the learners or the batch.
  TrainConfig one = c;
  one.batch = one.eval_batch = 1;
  one.learners = 1;
  std::string flag;
  if (c.data.kind == "synthetic") {
    TrainConfig tiny = one;
    tiny.data.n_train = tiny.data.n_test = 1;
    if (estimate_memory(tiny).total() > avail)
      flag = c.data.c > std::max(c.data.h, c.data.w)
                 ? fmt::format("--synthetic-channels {}", c.data.c)
                 : fmt::format("--synthetic-size {}", c.data.h == c.data.w ? c.data.h : std::max(c.data.h, c.data.w));
  }
  if (flag.empty() && estimate_memory(one).total() > avail) {
    if (c.data.kind == "synthetic")
      flag = c.data.n_train >= c.data.n_test ? fmt::format("--synthetic-train {}", c.data.n_train)
                                             : fmt::format("--synthetic-test {}", c.data.n_test);
    else
      flag = fmt::format("--model {}", c.model);
  }
  if (flag.empty()) {
    TrainConfig learners = c;
    learners.batch = learners.eval_batch = 1;
    if (estimate_memory(learners).total() > avail) flag = fmt::format("--learners {}", c.learners);
  }
  if (flag.empty())
    flag = c.batch >= c.eval_batch ? fmt::format("--batch {}", c.batch)
                                   : fmt::format("--eval-batch {}", c.eval_batch);
  throw Error(fmt::format("{}: the run would need about {} of memory (model {}, data {}, "
                          "activations of {} samples {}), more than the {} available",
                          flag, bytes_text(e.total()), bytes_text(e.model), bytes_text(e.data),
                          std::max(c.batch, c.eval_batch), bytes_text(e.activations),
                          bytes_text(avail)));
}

}  // namespace asgd
