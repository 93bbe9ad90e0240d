#include "perf/profile.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <set>
#include <sstream>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/nesting.hpp"
#include "common/text.hpp"

namespace asgd::perf {

namespace {

constexpr const char* kSources[] = {"measured", "stated", "assumed"};

// A figure's domain: value in [lo, hi], or (lo, hi] where open. The bounds
// keep the model's clock finite: no time above kMaxSeconds, no bandwidth
// below 1 B/s, no throughput below 1 MFLOP/s (a run of 10^6 epochs stays far
// from overflow).
struct Domain {
  double lo = 0;
  bool open = false;
  double hi = std::numeric_limits<double>::max();
};
constexpr Domain kTime{0, false, kMaxSeconds};
constexpr Domain kMinibatchTime{0, true, kMaxSeconds};
constexpr Domain kBandwidth{1, false};
constexpr Domain kGflops{1e-3, false};
constexpr Domain kCv{0, false, 10};
constexpr Domain kPerUnit{0, false, 1};  // seconds per parameter or byte
constexpr Domain kCores{0, true, 1e6};
constexpr Domain kShareOfCore{0, false, 1};
constexpr Domain kBytes{0, false, 1e12};
constexpr Domain kPause{0, false, 1};  // the costs of one wait or one push: at most a second

// Reading one file: every problem is "<file>: <key>: <what>".
class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw Error(fmt::format("profile {}: {}: {}", path_, key, what));
  }

  // Only these keys in a mapping.
  void only(const YAML::Node& n, const std::string& at, std::initializer_list<const char*> known) const {
    if (!n.IsMap()) fail(at, "want a mapping");
    std::set<std::string> seen;
    for (const auto& kv : n) {
      // a complex key (`? {a: 1}: ...`) is no name (fuzz_profile found it)
      if (!kv.first.IsScalar()) fail(at.empty() ? "(top)" : at, "keys must be plain names");
      const std::string k = kv.first.Scalar();
      if (!seen.insert(k).second) fail(join(at, k), "given twice");
      bool ok = false;
      std::string list;
      for (const char* want : known) {
        ok = ok || k == want;
        list += (list.empty() ? "" : ", ") + std::string(want);
      }
      if (!ok) fail(join(at, k), fmt::format("unknown key (known: {})", list));
    }
  }

  static std::string join(const std::string& at, const std::string& k) { return at.empty() ? k : at + "." + k; }

  std::string text(const YAML::Node& n, const std::string& key, bool required) const {
    if (!n.IsDefined() || n.IsNull()) {
      if (required) fail(key, "missing");
      return "";
    }
    if (!n.IsScalar()) fail(key, "want text");
    // profiles' text goes into results files' JSON records
    if (!valid_utf8(n.Scalar())) fail(key, fmt::format("'{}' is not valid UTF-8", shorten(n.Scalar())));
    return n.Scalar();
  }

  static bool number(const std::string& s, double& out) {
    std::string_view v = s;
    if (!v.empty() && v.front() == '+') v.remove_prefix(1);
    const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    return !v.empty() && ec == std::errc() && p == v.data() + v.size() && std::isfinite(out);
  }

  int whole(const YAML::Node& n, const std::string& key, int lo) const {
    double v = 0;
    if (!n.IsDefined() || n.IsNull()) fail(key, "missing");
    if (!n.IsScalar() || !number(n.Scalar(), v) || v != std::floor(v) || v < lo || v > 1e6)
      fail(key, fmt::format("'{}' is not a whole number >= {}", n.IsScalar() ? shorten(n.Scalar()) : "?", lo));
    return static_cast<int>(v);
  }

  // {value: x, measured|stated|assumed: "..."}, value in its domain.
  Figure figure(const YAML::Node& n, const std::string& key, Domain d) const {
    if (!n.IsDefined() || n.IsNull()) fail(key, "missing");
    if (!n.IsMap()) fail(key, "want {value: NUMBER, measured|stated|assumed: TEXT}");
    only(n, key, {"value", "measured", "stated", "assumed"});
    Figure f;
    const YAML::Node v = n["value"];
    if (!v.IsDefined() || v.IsNull()) fail(join(key, "value"), "missing");
    if (!v.IsScalar() || !number(v.Scalar(), f.value))
      fail(join(key, "value"), fmt::format("'{}' is not a finite number", v.IsScalar() ? shorten(v.Scalar()) : "?"));
    f.value += 0.0;  // -0 is 0
    if (f.value < 0) fail(join(key, "value"), fmt::format("{} is negative", f.value));
    if (d.open && f.value <= d.lo) fail(join(key, "value"), fmt::format("{} must be > {}", f.value, d.lo));
    if (f.value < d.lo || f.value > d.hi)
      fail(join(key, "value"), fmt::format("{:g} is outside [{:g}, {:g}]", f.value, d.lo, d.hi));
    for (const char* s : kSources)
      if (n[s].IsDefined()) {
        if (!f.source.empty()) fail(key, "give one of measured, stated, assumed");
        f.source = s;
        f.note = text(n[s], join(key, s), true);
        if (f.note.empty()) fail(join(key, s), "say how, where or why");
      }
    if (f.source.empty()) fail(key, "say where the figure comes from: measured, stated or assumed");
    return f;
  }

  // {value: messages|shared-windows, measured|stated|assumed: "..."}
  std::optional<Exchange> exchange(const YAML::Node& n, const std::string& key) const {
    if (!n.IsDefined() || n.IsNull()) return std::nullopt;
    if (!n.IsMap()) fail(key, "want {value: messages|shared-windows, measured|stated|assumed: TEXT}");
    only(n, key, {"value", "measured", "stated", "assumed"});
    Exchange e;
    e.value = text(n["value"], join(key, "value"), true);
    if (e.value != "messages" && e.value != "shared-windows")
      fail(join(key, "value"), fmt::format("'{}' is not messages or shared-windows", shorten(e.value)));
    for (const char* s : kSources)
      if (n[s].IsDefined()) {
        if (!e.source.empty()) fail(key, "give one of measured, stated, assumed");
        e.source = s;
        e.note = text(n[s], join(key, s), true);
        if (e.note.empty()) fail(join(key, s), "say how, where or why");
      }
    if (e.source.empty()) fail(key, "say where the value comes from: measured, stated or assumed");
    return e;
  }

  std::optional<Figure> optional_figure(const YAML::Node& n, const std::string& key, Domain d) const {
    if (!n.IsDefined() || n.IsNull()) return std::nullopt;
    return figure(n, key, d);
  }

  Link link(const YAML::Node& n, const std::string& key) const {
    if (!n.IsDefined() || n.IsNull()) fail(key, "missing");
    only(n, key, {"latency_s", "bandwidth_Bps"});
    return {figure(n["latency_s"], join(key, "latency_s"), kTime),
            figure(n["bandwidth_Bps"], join(key, "bandwidth_Bps"), kBandwidth)};
  }

  ComputeEntry compute(const YAML::Node& n, const std::string& key) const {
    only(n, key, {"model", "batch", "device", "threads", "seconds", "gflops", "cv"});
    ComputeEntry e;
    e.device = n["device"].IsDefined() ? text(n["device"], join(key, "device"), true) : "cpu";
    if (e.device != "cpu" && e.device != "cuda") fail(join(key, "device"), fmt::format("'{}' is not cpu or cuda", shorten(e.device)));
    e.threads = n["threads"].IsDefined() ? whole(n["threads"], join(key, "threads"), 1) : 1;
    e.seconds = optional_figure(n["seconds"], join(key, "seconds"), kMinibatchTime);
    e.gflops = optional_figure(n["gflops"], join(key, "gflops"), kGflops);
    if (e.seconds.has_value() == e.gflops.has_value()) fail(key, "give seconds (with model and batch) or gflops");
    if (e.seconds) {
      e.model = text(n["model"], join(key, "model"), true);
      e.batch = whole(n["batch"], join(key, "batch"), 1);
    } else if (n["model"].IsDefined() || n["batch"].IsDefined()) {
      fail(key, "a gflops entry is for every model: no model or batch");
    }
    e.cv = figure(n["cv"], join(key, "cv"), kCv);
    return e;
  }

 private:
  std::string path_;
};

std::string& search_dir() {
  static std::string dir;
  return dir;
}

}  // namespace

void set_profile_search_dir(std::string dir) { search_dir() = std::move(dir); }

std::string find_profile(const std::string& path) {
  // error_code forms: a link loop is the reader's to refuse (read_text_file), by name
  std::error_code ec;
  if (path.empty() || path.front() == '/' || search_dir().empty() || std::filesystem::exists(path, ec) ||
      ec.value() == ELOOP)
    return path;
  const std::string there = search_dir() + "/" + path;
  return std::filesystem::exists(there, ec) ? there : path;
}

namespace {
// The file's YAML, its text and depth checked; one line naming the file and
// the line where it is not YAML.
YAML::Node load_yaml(const std::string& path) {
  const std::string text = read_text_file(path, "profile file", "profile " + path);
  check_yaml_text(text, "profile " + path);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw Error(fmt::format("profile {}: line {}: not YAML: {}", path, e.mark.line + 1, e.msg));
  }
  check_yaml_depth(root, "profile " + path);
  return root;
}
}  // namespace

Profile read_profile(const std::string& path) {
  const Reader r(path);
  const YAML::Node root = load_yaml(path);
  if (!root.IsMap()) r.fail("(top)", "want a mapping of name, compute, link, server, ...");
  r.only(root, "", {"name", "description", "machine", "cores", "waiting_rank_load", "brief_wait_load", "wake", "compute",
                   "link", "server", "inject"});
  Profile p;
  p.path = path;
  p.name = r.text(root["name"], "name", true);
  if (p.name.empty()) r.fail("name", "empty (name the machine or the paper's system)");
  p.description = r.text(root["description"], "description", false);
  p.machine = r.text(root["machine"], "machine", false);
  p.cores = r.optional_figure(root["cores"], "cores", kCores);
  p.waiting_rank_load = r.optional_figure(root["waiting_rank_load"], "waiting_rank_load", kShareOfCore);
  p.brief_wait_load = r.optional_figure(root["brief_wait_load"], "brief_wait_load", kShareOfCore);
  const YAML::Node c = root["compute"];
  if (!c.IsDefined() || !c.IsSequence() || c.size() == 0) r.fail("compute", "want a list of at least one entry");
  for (std::size_t i = 0; i < c.size(); ++i) p.compute.push_back(r.compute(c[i], fmt::format("compute[{}]", i)));
  const YAML::Node link = root["link"];
  if (!link.IsDefined()) r.fail("link", "missing");
  r.only(link, "link", {"learner", "server", "exchange", "send_buffer_bytes", "burst_bytes", "cpu_s_per_byte", "eager_bytes", "pcie_Bps"});
  p.learner = r.link(link["learner"], "link.learner");
  p.server = r.link(link["server"], "link.server");
  p.exchange = r.exchange(link["exchange"], "link.exchange");
  p.send_buffer_bytes = r.optional_figure(link["send_buffer_bytes"], "link.send_buffer_bytes", kBytes);
  p.burst_bytes = r.optional_figure(link["burst_bytes"], "link.burst_bytes", kBytes);
  p.cpu_s_per_byte = r.optional_figure(link["cpu_s_per_byte"], "link.cpu_s_per_byte", kPerUnit);
  p.eager_bytes = r.optional_figure(link["eager_bytes"], "link.eager_bytes", kBytes);
  p.pcie_Bps = r.optional_figure(link["pcie_Bps"], "link.pcie_Bps", kBandwidth);
  const YAML::Node s = root["server"];
  if (!s.IsDefined()) r.fail("server", "missing");
  r.only(s, "server", {"accumulate_s_per_param", "update_s_per_param", "per_push_s"});
  p.accumulate_s_per_param = r.figure(s["accumulate_s_per_param"], "server.accumulate_s_per_param", kPerUnit);
  p.update_s_per_param = r.figure(s["update_s_per_param"], "server.update_s_per_param", kPerUnit);
  p.per_push_s = r.optional_figure(s["per_push_s"], "server.per_push_s", kPause);
  if (const YAML::Node w = root["wake"]; w.IsDefined() && !w.IsNull()) {
    r.only(w, "wake", {"spin_s", "max_pause_s", "overshoot_s", "doorbell_s"});
    p.wake = Wake{r.figure(w["spin_s"], "wake.spin_s", kPause), r.figure(w["max_pause_s"], "wake.max_pause_s", kPause),
                  r.figure(w["overshoot_s"], "wake.overshoot_s", kPause),
                  r.optional_figure(w["doorbell_s"], "wake.doorbell_s", kPause)};
    if (p.wake->max_pause_s.value < 1e-6)
      r.fail("wake.max_pause_s", "below the first pause of 1 us (a wait sleeps 1, 2, 4, ... us up to it)");
  }
  if (const YAML::Node inj = root["inject"]; inj.IsDefined() && !inj.IsNull()) {
    r.only(inj, "inject", {"update_s", "byte_s"});
    p.inject_update_s = r.optional_figure(inj["update_s"], "inject.update_s", kTime);
    p.inject_byte_s = r.optional_figure(inj["byte_s"], "inject.byte_s", kPerUnit);
  }
  for (const auto& e : p.compute)
    if (e.device == "cuda" && !p.pcie_Bps)
      r.fail("link.pcie_Bps", "missing (a cuda compute entry stages to and from the host)");
  return p;
}

namespace {

// A double-quoted YAML scalar, escaped by yaml-cpp's emitter (control
// characters, NEL, BOM and quotes as escapes), so it reads back as the same
// text: fuzz_profile found the hand-written quoting (and an unquoted model
// name) changing a profile through profile_yaml.
std::string quoted(const std::string& s) {
  YAML::Emitter e;
  e << YAML::DoubleQuoted << s;
  return e.c_str();
}

// The shortest text that reads back as the same double: a profile survives
// profile_yaml and read_profile exactly (6 digits could round a normal
// value into a subnormal one, which the reader refuses).
std::string fig(const Figure& f) { return fmt::format("{{value: {}, {}: {}}}", f.value, f.source, quoted(f.note)); }

}  // namespace

std::string profile_yaml(const Profile& p) {
  std::ostringstream o;
  o << "# asgd machine profile (docs/MODEL.md, \"Profile format\")\n";
  o << "name: " << quoted(p.name) << "\n";
  if (!p.description.empty()) o << "description: " << quoted(p.description) << "\n";
  if (!p.machine.empty()) o << "machine: " << quoted(p.machine) << "\n";
  if (p.cores) o << "cores: " << fig(*p.cores) << "\n";
  if (p.waiting_rank_load) o << "waiting_rank_load: " << fig(*p.waiting_rank_load) << "\n";
  if (p.brief_wait_load) o << "brief_wait_load: " << fig(*p.brief_wait_load) << "\n";
  o << "compute:\n";
  for (const auto& e : p.compute) {
    if (e.seconds)
      o << "  - model: " << quoted(e.model) << "\n    batch: " << e.batch << "\n    device: " << e.device
        << "\n    threads: " << e.threads << "\n    seconds: " << fig(*e.seconds) << "\n";
    else
      o << "  - device: " << e.device << "\n    gflops: " << fig(*e.gflops) << "\n";
    o << "    cv: " << fig(e.cv) << "\n";
  }
  o << "link:\n  learner:\n    latency_s: " << fig(p.learner.latency_s)
    << "\n    bandwidth_Bps: " << fig(p.learner.bandwidth_Bps) << "\n  server:\n    latency_s: "
    << fig(p.server.latency_s) << "\n    bandwidth_Bps: " << fig(p.server.bandwidth_Bps) << "\n";
  if (p.exchange)
    o << "  exchange: {value: " << p.exchange->value << ", " << p.exchange->source << ": " << quoted(p.exchange->note)
      << "}\n";
  if (p.send_buffer_bytes) o << "  send_buffer_bytes: " << fig(*p.send_buffer_bytes) << "\n";
  if (p.burst_bytes) o << "  burst_bytes: " << fig(*p.burst_bytes) << "\n";
  if (p.cpu_s_per_byte) o << "  cpu_s_per_byte: " << fig(*p.cpu_s_per_byte) << "\n";
  if (p.eager_bytes) o << "  eager_bytes: " << fig(*p.eager_bytes) << "\n";
  if (p.pcie_Bps) o << "  pcie_Bps: " << fig(*p.pcie_Bps) << "\n";
  o << "server:\n  accumulate_s_per_param: " << fig(p.accumulate_s_per_param)
    << "\n  update_s_per_param: " << fig(p.update_s_per_param) << "\n";
  if (p.per_push_s) o << "  per_push_s: " << fig(*p.per_push_s) << "\n";
  if (p.wake)
    o << "wake:\n  spin_s: " << fig(p.wake->spin_s) << "\n  max_pause_s: " << fig(p.wake->max_pause_s)
      << "\n  overshoot_s: " << fig(p.wake->overshoot_s) << "\n";
  if (p.wake && p.wake->doorbell_s) o << "  doorbell_s: " << fig(*p.wake->doorbell_s) << "\n";
  if (p.inject_update_s || p.inject_byte_s) {
    o << "inject:\n";
    if (p.inject_update_s) o << "  update_s: " << fig(*p.inject_update_s) << "\n";
    if (p.inject_byte_s) o << "  byte_s: " << fig(*p.inject_byte_s) << "\n";
  }
  return o.str();
}

void write_profile(const Profile& p, const std::string& path) { write_file_atomic(path, profile_yaml(p)); }

std::optional<ComputeTime> compute_time(const Profile& p, const std::string& model, int batch, int threads,
                                        double flops_per_sample) {
  for (std::size_t i = 0; i < p.compute.size(); ++i) {
    const ComputeEntry& e = p.compute[i];
    if (!e.seconds || e.model != model || e.batch != batch || e.threads != threads) continue;
    return ComputeTime{e.seconds->value, e.cv.value, e.device == "cuda",
                       fmt::format("compute[{}] ({}, batch {}, {}, {} thread{})", i, model, batch, e.device,
                                   threads, threads == 1 ? "" : "s")};
  }
  for (std::size_t i = 0; i < p.compute.size(); ++i) {
    const ComputeEntry& e = p.compute[i];
    if (!e.gflops) continue;
    const double s = flops_per_sample * batch / (e.gflops->value * 1e9);
    return ComputeTime{s, e.cv.value, e.device == "cuda",
                       fmt::format("compute[{}] ({} at {:g} GFLOP/s)", i, e.device, e.gflops->value)};
  }
  return std::nullopt;
}

std::string no_compute_time(const Profile& p, const std::string& model, int batch, int threads) {
  return fmt::format("profile {}: compute: no entry for model {} at batch {} with {} thread{} (and no gflops entry); "
                     "add one (asgd calibrate --models {} --batch {})",
                     p.path, model, batch, threads, threads == 1 ? "" : "s", model, batch);
}

}  // namespace asgd::perf
