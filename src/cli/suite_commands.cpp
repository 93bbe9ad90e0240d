// asgd sweep (plan, run, submit, status) and asgd report.
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "cli/commands.hpp"
#include "common/error.hpp"
#include "common/process.hpp"
#include "common/threads.hpp"
#include "gpu/gpu.hpp"
#include "report/report.hpp"
#include "sweep/runner.hpp"
#include "sweep/slurm.hpp"
#include "sweep/suite.hpp"

namespace asgd::cli {

namespace {

std::string self_exe() {
  const std::string p = own_executable();
  return p.empty() ? std::string("asgd") : p;
}

}  // namespace

std::string source_dir() {
  if (const char* env = std::getenv("ASGD_SOURCE_DIR")) return env;
  return ASGD_SOURCE_DIR;
}

int cmd_report(const std::string& dir, const std::string& out, bool plots, bool quiet) {
  report::ReportOptions o;
  o.suite_dir = dir;
  o.out_dir = out;
  o.reference_dir = source_dir() + "/results/reference";
  if (plots) o.plot_script = source_dir() + "/tools/plot_report.py";
  o.quiet = quiet;
  const int n = report::write_report(o);  // says what it wrote, unless quiet
  if (quiet) fmt::print("report of {} runs: {}/report.md\n", n, out.empty() ? dir + "/report" : out);
  return 0;
}

namespace {

// What this binary and the allocation can run, before any script or run:
// device cuda needs a CUDA build (else every task fails), and a Slurm rank
// gets cpus_per_rank CPUs (more threads than that would fight over them).
void check_runnable(const sweep::Suite& s, bool slurm) {
  if (!slurm) (void)threads_per_rank(1);  // the runs inherit OMP_NUM_THREADS: refused once, before any run
  for (const auto& r : s.runs) {
    if (r.config.device == "cuda" && !r.config.virtual_learners && !gpu::built_with_cuda())
      throw Error(fmt::format("{}: run {} has device cuda, but {} was built without CUDA: every run would fail "
                              "(build with cmake --preset cuda)",
                              s.path, r.run_id, self_exe()));
    if (slurm && r.config.threads > s.resources.cpus_per_rank)
      throw Error(fmt::format("{}: run {}: threads {} is more than resources.cpus_per_rank {}: each rank would run {} "
                              "threads on {} CPUs (threads: 1 follows cpus_per_rank; or raise cpus_per_rank)",
                              s.path, r.run_id, r.config.threads, s.resources.cpus_per_rank, r.config.threads,
                              s.resources.cpus_per_rank));
  }
}

}  // namespace

int cmd_sweep(const std::string& action, const SweepArgs& a) {
  const auto t0 = std::chrono::steady_clock::now();
  // A Slurm task starts in sbatch's working folder (or --chdir), not here:
  // submit writes the results folder into every run config as an absolute path.
  std::string results = a.results;
  if (action == "submit" && !results.empty()) {
    results = std::filesystem::absolute(results).lexically_normal().string();
    while (results.size() > 1 && results.back() == '/') results.pop_back();
  }
  const auto suite = sweep::load_suite(a.suite, results);
  if (action == "submit" || action == "run") check_runnable(suite, action == "submit");
  if (action == "plan") {
    const auto groups = sweep::group_by_shape(suite);
    fmt::print("suite {} ({}): {} runs in {} resource shape{}, mode {}\n", suite.name, a.suite,
               suite.runs.size(), groups.size(), groups.size() == 1 ? "" : "s", to_text(suite.mode));
    for (const auto& g : groups) {
      fmt::print("shape {} ({} runs):\n", g.front()->shape, g.size());
      for (const auto* r : g) fmt::print("  {}\n", r->run_id);
    }
    for (const auto& r : suite.runs)
      if (r.config.threads > suite.resources.cpus_per_rank)
        fmt::print("note: run {}: threads {} is more than resources.cpus_per_rank {}: `sweep submit` refuses "
                   "this suite (`sweep run` runs it)\n",
                   r.run_id, r.config.threads, suite.resources.cpus_per_rank);
    fmt::print("planned in {:.3f}s\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return 0;
  }
  if (action == "status") return sweep::status(suite, a.results) > 0 ? 1 : 0;
  if (action == "submit") {
    sweep::SubmitOptions o;
    o.site = a.site;
    o.sites_dir = a.sites_dir.empty() ? source_dir() + "/slurm/sites" : a.sites_dir;
    o.self = self_exe();
    o.dry_run = a.dry_run;
    sweep::submit(suite, results, o);
    fmt::print("submit took {:.3f}s\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return 0;
  }
  sweep::LocalOptions o;
  o.jobs = a.jobs;
  o.cores = a.cores;
  o.self = self_exe();
  o.mpiexec = a.mpiexec;
  o.dry_run = a.dry_run;
  const int failed = sweep::run_local(suite, a.results, o);
  if (suite.mode == sweep::SuiteMode::micro) {
    fmt::print("benchmark results (Google Benchmark JSON, for asgd compare): {}\n",
               sweep::micro_output(suite.runs.front(), sweep::suite_paths(suite, a.results)));
  } else if (!a.dry_run && !a.no_report) {
    fmt::print("\n");
    cmd_report(sweep::suite_paths(suite, a.results).root, "", true, false);
    const std::string md = sweep::suite_paths(suite, a.results).root + "/report/report.md";
    if (std::ifstream in(md); in) fmt::print("\n{}", std::string(std::istreambuf_iterator<char>(in), {}));
  }
  return failed > 0 ? 1 : 0;
}

}  // namespace asgd::cli
