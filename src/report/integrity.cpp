// Measurement integrity in reports: which machine each run trained on, and
// which runs trained at the same time on the same host (their timings fought
// each other: `asgd sweep submit` with --overcommit, `sweep run --jobs 2`);
// `asgd compare`'s check that both sides ran on one machine, the same way;
// and `asgd validate`: each file against the results schema.
#include <algorithm>
#include <cstdio>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "common/cpu_name.hpp"
#include "common/error.hpp"
#include "common/nesting.hpp"
#include "common/text.hpp"
#include "io/results.hpp"
#include "report/detail.hpp"
#include "report/report.hpp"

namespace asgd::report::detail {

void read_machine(RunInfo& info, const io::RunResult& r) {
  info.host = r.host;
  info.started = r.train_started;
  info.finished = r.train_finished;
  const json m = parse_json_bounded<json>(r.machine_json);
  if (!m.is_object()) return;
  if (m.contains("cpu_model") && m["cpu_model"].is_string()) {
    info.cpu_model = m["cpu_model"].get<std::string>();
    info.cpu = short_cpu(info.cpu_model);
  }
  if (m.contains("blas") && m["blas"].is_string()) info.blas_kernel = blas_kernel(m["blas"].get<std::string>());
  if (m.contains("host") && m["host"].is_string() && info.host.empty()) info.host = m["host"].get<std::string>();
  if (m.contains("kokkos") && m["kokkos"].is_object() && m["kokkos"].contains("backend") &&
      m["kokkos"]["backend"].is_string())
    info.backend = m["kokkos"]["backend"].get<std::string>();
  if (m.contains("threads_per_rank") && m["threads_per_rank"].is_number_integer()) {
    const auto t = m["threads_per_rank"].get<std::int64_t>();
    info.threads = t >= 1 && t <= 1 << 20 ? static_cast<int>(t) : 0;
  }
}

std::string execution_label(const RunInfo& r) {
  if (r.backend.empty() || r.threads < 1) return "";
  return fmt::format("Kokkos {}, {} thread{} per rank", r.backend, r.threads, r.threads == 1 ? "" : "s");
}

void mark_overlaps(std::vector<RunInfo>& runs) {
  std::map<std::string, std::vector<std::size_t>> by_host;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const RunInfo& r = runs[i];
    if (r.readable && r.mode == RunMode::real && std::isfinite(r.started) && std::isfinite(r.finished))
      by_host[r.host].push_back(i);
  }
  for (auto& [host, idx] : by_host) {
    std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return runs[a].started < runs[b].started; });
    for (std::size_t a = 0; a < idx.size(); ++a)
      for (std::size_t b = a + 1; b < idx.size() && runs[idx[b]].started < runs[idx[a]].finished; ++b) {
        // intervals [s, f) overlap: b starts before a finishes (sorted by start)
        runs[idx[a]].shared_with.push_back(runs[idx[b]].run_id);
        runs[idx[b]].shared_with.push_back(runs[idx[a]].run_id);
      }
  }
}

std::string conditions_md(const std::vector<RunInfo>& runs) {
  std::map<std::string, int> machines;  // "Xeon 8375C, BLAS kernel X" -> runs
  int unknown = 0, real = 0, shared = 0, no_interval = 0;
  for (const auto& r : runs) {
    if (!r.readable) continue;
    if (r.cpu.empty()) {
      ++unknown;
    } else {
      const std::string how = execution_label(r);
      machines[fmt::format("{} (BLAS kernel {}{})", r.cpu_model, r.blas_kernel.empty() ? "unknown" : r.blas_kernel,
                           how.empty() ? "" : "; " + how)] += 1;
    }
    if (r.mode != RunMode::real) continue;
    ++real;
    shared += r.timing_shared();
    no_interval += !(std::isfinite(r.started) && std::isfinite(r.finished));
  }
  std::string md = "## Measurement conditions\n\n";
  for (const auto& [m, n] : machines) md += fmt::format("- {} run{} on {}\n", n, n == 1 ? "" : "s", m);
  if (unknown) md += fmt::format("- {} run{} without a machine record (written before results held one)\n", unknown, unknown == 1 ? "" : "s");
  if (machines.size() > 1)
    md += "- **The runs span machines**: each speed figure names the CPU it came from; a speedup "
          "against a baseline from another machine mixes machines.\n";
  if (no_interval) md += fmt::format("- {} real run{} without a training interval: overlap cannot be checked for them\n", no_interval, no_interval == 1 ? "" : "s");
  if (shared == 0) {
    md += real > 0 ? "- No two real runs trained at the same time on the same host.\n" : "";
  } else {
    md += fmt::format("- **{} real run{} trained while another run trained on the same host**: their "
                      "timing figures (samples/s, time to target, speedups built on them) were shared and "
                      "are marked `shared` in the tables. Run timing suites one run at a time "
                      "(`asgd sweep run --jobs 1`, or a Slurm site with `exclusive: true`).\n",
                      shared, shared == 1 ? "" : "s");
    for (const auto& r : runs)
      if (r.timing_shared())
        md += fmt::format("  - `{}` on {}: overlapped `{}`\n", r.run_id, r.host, fmt::join(r.shared_with, "`, `"));
  }
  return md + "\n";
}

// "CPU model (BLAS kernel K)" of each side (or, with how "with", "Kokkos B,
// T threads per rank"); refuses (asgd::Error) when the sides differ, unless
// opt.across_machines (then says so). Unknown machines (files, or benchmark
// outputs, without a record) are not held against a side.
void check_same_machine(const std::set<std::string>& base, const std::set<std::string>& cand,
                        const CompareOptions& opt, const char* how, const char* between) {
  if (base.empty() || cand.empty() || base == cand) return;
  const std::string why = fmt::format(
      "the baseline ran {2} {0} and the candidate {2} {1}: a speed difference between {3} is not a "
      "regression of the code",
      fmt::join(base, " + "), fmt::join(cand, " + "), how, between);
  if (!opt.across_machines)
    throw Error("compare: " + why + " (--across-machines compares them anyway)");
  std::printf("note: %s; compared anyway (--across-machines)\n", why.c_str());
}

std::set<std::string> machines(const std::vector<RunInfo>& runs) {
  std::set<std::string> out;
  for (const auto& r : runs)
    if (r.mode == RunMode::real && !r.cpu_model.empty())
      out.insert(fmt::format("{} (BLAS kernel {})", r.cpu_model, r.blas_kernel.empty() ? "unknown" : r.blas_kernel));
  return out;
}

// How each side ran: Kokkos backend and threads per rank (runs recording both).
std::set<std::string> executions(const std::vector<RunInfo>& runs) {
  std::set<std::string> out;
  for (const auto& r : runs)
    if (r.mode == RunMode::real && !execution_label(r).empty()) out.insert(execution_label(r));
  return out;
}

std::set<std::string> executions(const json& doc) {
  std::set<std::string> out;
  if (doc.contains("context") && doc["context"].is_object() && doc["context"].contains("asgd_execution") &&
      doc["context"]["asgd_execution"].is_string())
    out.insert(doc["context"]["asgd_execution"].get<std::string>());
  return out;
}

void check_same_execution(const std::set<std::string>& base, const std::set<std::string>& cand,
                          const CompareOptions& opt) {
  check_same_machine(base, cand, opt, "with", "thread counts or Kokkos backends");
}

std::set<std::string> machines(const json& doc) {
  std::set<std::string> out;
  if (!doc.contains("context") || !doc["context"].is_object()) return out;
  const json& c = doc["context"];
  if (c.contains("asgd_cpu_model") && c["asgd_cpu_model"].is_string())
    out.insert(fmt::format("{} (BLAS kernel {})", c["asgd_cpu_model"].get<std::string>(),
                           c.value("asgd_blas_kernel", std::string("unknown"))));
  return out;
}

}  // namespace asgd::report::detail

namespace asgd::report {

namespace {
// "" when the file's model and protocol, and its configuration's where it
// holds them (older files may not), are known names.
std::string stored_name_problem(const io::RunResult& r, const KnownNames& known) {
  const auto j = nlohmann::json::parse(r.config_json, nullptr, false);  // read_results checked it
  struct Name {
    std::string key;
    const std::string& attr;
    const std::vector<std::string>& known;
  };
  for (const Name& n : {Name{"model", r.model, known.models}, Name{"protocol", r.protocol, known.protocols}}) {
    if (n.known.empty()) continue;
    auto unknown = [&n](const std::string& v) { return std::find(n.known.begin(), n.known.end(), v) == n.known.end(); };
    const auto list = fmt::format("{}", fmt::join(n.known, ", "));
    const bool single = n.key == "protocol" && n.attr == "single";  // one process: no protocol
    if (!single && unknown(n.attr)) return fmt::format("{} '{}' is not one of {}", n.key, shorten(n.attr), list);
    const auto it = j.is_object() ? j.find(n.key) : j.end();
    if (it == j.end()) continue;
    if (!it->is_string() || unknown(it->get<std::string>()))
      return fmt::format("config {} {} is not one of {}", n.key,
                         it->is_string() ? "'" + shorten(it->get<std::string>()) + "'" : shorten(it->dump()), list);
  }
  return "";
}
}  // namespace

int validate(const std::vector<std::string>& files, const KnownNames& known) {
  int invalid = 0;
  for (const auto& f : files) {
    std::string problem;
    try {
      const io::RunResult r = io::read_results(f);
      problem = stored_name_problem(r, known);
      if (problem.empty()) {
        std::printf("%s\n", fmt::format("ok {} ({}, {} updates)", f, to_text(r.status), r.summary.updates).c_str());
        continue;
      }
    } catch (const Error& e) {
      problem = e.what();
    } catch (const std::exception& e) {
      problem = e.what();
    }
    ++invalid;
    if (problem.rfind(f + ": ", 0) == 0) problem.erase(0, f.size() + 2);  // the reader already names the file
    std::printf("%s\n", fmt::format("{}: {}", f, problem).c_str());
  }
  std::fflush(stdout);
  return invalid;
}

}  // namespace asgd::report
