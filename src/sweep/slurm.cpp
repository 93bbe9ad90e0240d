// asgd sweep submit: one sbatch array per resource shape, plus a report job.
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.hpp"
#include "common/files.hpp"
#include "sweep/runner.hpp"
#include "sweep/slurm.hpp"

namespace asgd::sweep {

namespace fs = std::filesystem;

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string sbatch_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += "'\\''";
    else if (c == '\\') q += "\\\\";
    else q += c;
  }
  return q + "'";
}

std::string sbatch_filename_literal(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '%' ? std::string("%%") : std::string(1, c);
  return out;
}

void check_script_value(const std::string& what, const std::string& s) {
  std::size_t bad = s.size();
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x20 || b == 0x7f) {
      bad = i;
      break;
    }
  }
  if (bad == s.size()) return;
  std::string shown;
  for (char c : s) {
    const auto b = static_cast<unsigned char>(c);
    shown += b < 0x20 || b == 0x7f ? fmt::format("\\x{:02x}", b) : std::string(1, c);
  }
  throw Error(fmt::format(
      "{}: control character 0x{:02x} at byte {} in '{}': values written into sbatch scripts must not "
      "hold control characters (a newline there would start a new command)",
      what, static_cast<unsigned char>(s[bad]), bad, shown));
}

namespace {

std::string header(const Site& site) {
  std::string h;
  if (!site.partition.empty()) h += fmt::format("#SBATCH --partition={}\n", sbatch_quote(site.partition));
  if (!site.account.empty()) h += fmt::format("#SBATCH --account={}\n", sbatch_quote(site.account));
  for (const auto& l : site.sbatch) h += fmt::format("#SBATCH {}\n", sbatch_quote(l));
  return h;
}

std::string modules(const Site& site) {
  std::string m;
  for (const auto& mod : site.modules) m += fmt::format("module load {}\n", shell_quote(mod));
  return m;
}

// Runs sbatch --parsable and returns the job id: the last stdout line up to
// ';' ("id;cluster"), which must be a number. Warnings on stderr are passed on.
std::string capture(const std::string& cmd) {
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) throw Error(fmt::format("cannot run: {}", cmd));
  std::string line, last;
  char buf[512];
  while (std::fgets(buf, sizeof buf, f)) {
    line = buf;
    while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) last = line;
  }
  const int rc = pclose(f);
  if (auto semi = last.find(';'); semi != std::string::npos) last.resize(semi);
  if (rc != 0 || last.empty() || last.find_first_not_of("0123456789_") != std::string::npos)
    throw Error(fmt::format("{} failed ({}): '{}'", cmd,
                            rc == -1                ? std::string("cannot wait for it")
                            : WIFEXITED(rc)         ? fmt::format("exit {}", WEXITSTATUS(rc))
                            : WIFSIGNALED(rc)       ? fmt::format("signal {}", WTERMSIG(rc))
                                                    : fmt::format("status {}", rc),
                            last));
  return last;
}

}  // namespace

namespace {

// One submission of a suite: what every script of it needs.
struct Submission {
  const Suite& s;
  const SubmitOptions& opt;
  Site site;
  SuitePaths p;
  std::vector<std::string> configs;
  std::string root, self, stamp;
  int limit = 0;  // tasks of an array at once (0: no limit)
  bool exclusive = false;
  std::vector<std::string> job_ids;
  std::string previous_array;
  int submitted = 0;

  // #SBATCH --output: the folder taken literally (quoted, % doubled), then
  // Slurm's own patterns (%x job name, %A array job, %a task, %j job id).
  std::string output(const char* pattern) const {
    return sbatch_quote(sbatch_filename_literal(root + "/logs/") + pattern);
  }
};

// Everything that reaches a script is checked before anything is written:
// the absolute results folder and the asgd executable's path.
void check_inputs(const Suite& s, const std::string& results_dir, const SubmitOptions& opt, std::string& root,
                  std::string& self) {
  check_script_value("--results", results_dir);
  root = fs::absolute(suite_paths(s, results_dir).root).string();
  check_script_value("--results", root);  // the absolute form adds the working folder
  if (root.find('\\') != std::string::npos)
    throw Error(fmt::format("--results: '{}' holds a backslash, which turns off Slurm's %-patterns in the log "
                            "file names (#SBATCH --output); choose a folder without one",
                            root));
  self = fs::absolute(opt.self).string();
  check_script_value("the asgd executable's path", self);
  check_script_value(fmt::format("{}: suite name", s.path), s.name);
  check_script_value(fmt::format("{}: resources time_limit", s.path), s.resources.time_limit);
  check_script_value(fmt::format("{}: micro filter", s.path), s.bench_filter);
}

// The run list of a group: the config path of each unfinished run, one a line.
std::string run_list(const Submission& sub, const std::vector<const Run*>& group, int& n) {
  std::string list;
  n = 0;
  for (const Run* r : group) {
    const RunState st = run_state(*r, sub.p);
    if (st == RunState::done || st == RunState::diverged) continue;  // finished: never again
    const auto idx = static_cast<std::size_t>(r - sub.s.runs.data());
    const std::string config = fs::absolute(sub.configs[idx]).string();
    check_script_value("a run's config path", config);  // one line each in the run list
    list += config + "\n";
    ++n;
  }
  return list;
}

// The array script's head: the #SBATCH lines, the site's header and modules,
// and the task's config from the run list.
std::string array_head(const Submission& sub, const Run& first, const std::string& name, int n,
                       const std::string& runs_file, int gpus) {
  const Suite& s = sub.s;
  std::string script = fmt::format(
      "#!/bin/bash\n"
      "# asgd sweep submit: suite {suite}, shape {shape}, {n} runs (one array task each).\n"
      "#SBATCH --job-name={name}\n"
      "#SBATCH --array=0-{last}{throttle}\n"
      "#SBATCH --ntasks={ranks}\n"
      "#SBATCH --cpus-per-task={cpus}\n"
      "#SBATCH --time={time}\n"
      "#SBATCH --requeue\n"
      "#SBATCH --output={output}\n",
      fmt::arg("suite", s.name), fmt::arg("shape", first.shape), fmt::arg("n", n),
      fmt::arg("name", sbatch_quote(name)), fmt::arg("last", n - 1),
      fmt::arg("throttle", sub.limit > 0 ? fmt::format("%{}", sub.limit) : std::string()),
      fmt::arg("ranks", first.ranks), fmt::arg("cpus", s.resources.cpus_per_rank),
      fmt::arg("time", sbatch_quote(s.resources.time_limit)), fmt::arg("output", sub.output("%x_%A_%a.out")));
  if (gpus > 0) script += fmt::format("#SBATCH --gpus={}\n", gpus);
  if (sub.exclusive) script += "#SBATCH --exclusive\n";
  script += header(sub.site);
  // no -e: a failed run must still leave its .failed marker
  script += "set -uo pipefail\n" + modules(sub.site);
  script += fmt::format(
      "config=$(sed -n \"$((SLURM_ARRAY_TASK_ID + 1))p\" {runs})\n"
      "run_id=$(basename \"$config\" .json)\n"
      "export OPENBLAS_NUM_THREADS={cpus}\n"
      "# cpus_per_rank threads per rank (Kokkos' OpenMP backend; asgd's --threads 1 defers to\n"
      "# OMP_NUM_THREADS); srun of Slurm 22.05+ takes --cpus-per-task only from SRUN_CPUS_PER_TASK\n"
      "export OMP_NUM_THREADS={cpus} OMP_PROC_BIND=close OMP_PLACES=cores SRUN_CPUS_PER_TASK={cpus}\n"
      "# UCX installs its signal handlers when its library loads, before main(): none, so a\n"
      "# crashing rank exits at once with asgd's one line (docs/TRAIN.md \"A crash ends the process\")\n"
      "export UCX_HANDLE_ERRORS=${{UCX_HANDLE_ERRORS:-none}}\n",
      fmt::arg("runs", shell_quote(runs_file)), fmt::arg("cpus", s.resources.cpus_per_rank));
  if (gpus > 0)
    script += "# one GPU per learner: asgd --device cuda gives each learner the GPU of its index\n"
              "# among the learners on its node (ASGD_GPU_DEVICE=k forces device k)\n";
  return script;
}

// A micro suite's one task: the micro-benchmarks.
void submit_micro(Submission& sub, const Run& first, const std::string& name, int n, std::string script) {
  std::string cmd;
  for (const auto& a : micro_command(sub.s, sub.self, fs::absolute(micro_output(first, sub.p)).string()))
    cmd += shell_quote(a) + " ";
  script += fmt::format("srun -n 1 {}\n", cmd);
  const std::string path = fs::absolute(fs::path(sub.p.slurm) / (name + ".sbatch")).string();
  write_file_atomic(path, script, true);
  sub.submitted += n;
  if (sub.opt.dry_run) {
    fmt::print("would submit: sbatch --parsable {}   (the micro-benchmarks)\n", path);
  } else {
    sub.job_ids.push_back(capture("sbatch --parsable " + shell_quote(path)));
    fmt::print("submitted {} as job {} (the micro-benchmarks)\n", name, sub.job_ids.back());
  }
}

// One array per resource shape (group): its run list, its script, sbatch.
void submit_group(Submission& sub, const std::vector<const Run*>& group, int shape_no) {
  int n = 0;
  const std::string list = run_list(sub, group, n);
  if (n == 0) return;
  const Run& first = *group.front();
  const std::string name = fmt::format("asgd-{}-{}", sub.s.name, shape_no);
  // One run list per submission: tasks of an earlier array still queued keep
  // reading their own list (a re-submission lists fewer runs).
  const std::string runs_file =
      fs::absolute(fs::path(sub.p.slurm) / fmt::format("{}.{}.runs", name, sub.stamp)).string();
  write_file_atomic(runs_file, list, false);
  const int ranks = first.ranks;
  const int gpus = first.config.virtual_learners ? 0 : first.config.learners * sub.s.resources.gpus_per_learner;
  std::string script = array_head(sub, first, name, n, runs_file, gpus);
  if (sub.s.mode == SuiteMode::micro) return submit_micro(sub, first, name, n, std::move(script));
  // A requeued task re-runs the same command: asgd train resumes from its
  // checkpoint, and a finished run is skipped. --kill-on-bad-exit: a rank
  // that dies (a fatal signal ends it with exit 128 + signal) ends the step's
  // other ranks at once, not at --stall-timeout (Slurm's default keeps them).
  script += fmt::format(
      "srun --mpi={mpi} --kill-on-bad-exit=1 -n {ranks} {self} train --config \"$config\" --progress-every 60\n"
      "rc=$?\n"
      "[[ $rc -eq 0 ]] || echo $rc > {logs}/\"$run_id\".failed\n"
      "exit $rc\n",
      fmt::arg("mpi", shell_quote(sub.site.mpi)), fmt::arg("ranks", ranks), fmt::arg("self", shell_quote(sub.self)),
      fmt::arg("logs", shell_quote(sub.root + "/logs")));
  const std::string path = fs::absolute(fs::path(sub.p.slurm) / (name + ".sbatch")).string();
  write_file_atomic(path, script, true);
  sub.submitted += n;
  if (sub.opt.dry_run) {
    fmt::print("would submit: sbatch --parsable {}   ({} runs, {} ranks each)\n", path, n, ranks);
    return;
  }
  // one timing array after another (limit 1): never two runs of the suite at once
  const std::string after =
      sub.limit == 1 && !sub.previous_array.empty() ? "--dependency=afterany:" + sub.previous_array + " " : "";
  const std::string id = capture("sbatch --parsable " + after + shell_quote(path));
  sub.job_ids.push_back(id);
  fmt::print("submitted {} as job {} ({} array tasks, {} ranks each{})\n", name, id, n, ranks,
             after.empty() ? "" : ", after job " + sub.previous_array);
  sub.previous_array = id;
}

// The report job: after every array, whatever their outcome.
void submit_report(const Submission& sub) {
  const Suite& s = sub.s;
  std::string report = fmt::format(
      "#!/bin/bash\n"
      "# asgd sweep submit: the report of suite {suite}, after its arrays.\n"
      "#SBATCH --job-name={name}\n"
      "#SBATCH --ntasks=1\n"
      "#SBATCH --time=00:30:00\n"
      "#SBATCH --output={output}\n",
      fmt::arg("suite", s.name), fmt::arg("name", sbatch_quote("asgd-" + s.name + "-report")),
      fmt::arg("output", sub.output("%x_%j.out")));
  report += header(sub.site) + modules(sub.site);
  report += fmt::format("{} report {}\n", shell_quote(sub.self), shell_quote(sub.root));
  const std::string rpath = fs::absolute(fs::path(sub.p.slurm) / ("asgd-" + s.name + "-report.sbatch")).string();
  write_file_atomic(rpath, report, true);
  std::string dep;
  for (const auto& id : sub.job_ids) dep += (dep.empty() ? "" : ":") + id;
  if (sub.opt.dry_run) {
    fmt::print("would submit: sbatch --parsable --dependency=afterany:<array ids> {}\n", rpath);
  } else {
    const std::string id = capture(fmt::format("sbatch --parsable --dependency=afterany:{} {}", dep, shell_quote(rpath)));
    fmt::print("submitted the report as job {} (after {})\n", id, dep);
  }
}

}  // namespace

// Each resource shape asked of Slurm as its array would ask (`sbatch --test-only`, the
// script on stdin; nothing is queued or written): a shape no node set of the partition can
// hold (more ranks or CPUs than the cluster has) is refused here, before anything is made,
// instead of pending for ever (reason PartitionConfig).
void check_shapes_fit(const Suite& s, const Site& site, const std::string& site_name, bool exclusive) {
  for (const auto& group : group_by_shape(s)) {
    const Run& first = *group.front();
    const int gpus = first.config.virtual_learners ? 0 : first.config.learners * s.resources.gpus_per_learner;
    std::string script = fmt::format("#!/bin/bash\n#SBATCH --ntasks={}\n#SBATCH --cpus-per-task={}\n", first.ranks,
                                     s.resources.cpus_per_rank);
    if (gpus > 0) script += fmt::format("#SBATCH --gpus={}\n", gpus);
    if (exclusive) script += "#SBATCH --exclusive\n";
    script += header(site) + "true\n";
    const fs::path tmp = fs::temp_directory_path() / fmt::format("asgd-fit-{}.sbatch", getpid());
    write_file_atomic(tmp.string(), script, false);
    const std::string cmd = "sbatch --test-only " + shell_quote(tmp.string()) + " 2>&1";
    FILE* f = popen(cmd.c_str(), "r");
    std::string out;
    if (f != nullptr) {
      char buf[512];
      while (std::fgets(buf, sizeof buf, f)) out += buf;
    }
    const int rc = f != nullptr ? pclose(f) : -1;
    fs::remove(tmp);
    if (rc == 0) continue;
    std::string why;
    for (std::size_t a = 0, b; a < out.size(); a = b + 1) {  // the last line that says something
      b = out.find('\n', a);
      if (b == std::string::npos) b = out.size();
      if (b > a) why = out.substr(a, b - a);
    }
    throw Error(fmt::format("suite {}: shape {} ({} ranks x {} CPUs{}) does not fit partition '{}' of site '{}': "
                            "sbatch --test-only: {}",
                            s.name, first.shape, first.ranks, s.resources.cpus_per_rank,
                            gpus > 0 ? fmt::format(", {} GPUs", gpus) : std::string(),
                            site.partition.empty() ? std::string("(default)") : site.partition, site_name,
                            why.empty() ? std::string("refused") : why));
  }
}

int submit(const Suite& s, const std::string& results_dir, const SubmitOptions& opt) {
  std::string root, self;
  check_inputs(s, results_dir, opt, root, self);
  Submission sub{s, opt, load_site(opt.sites_dir, opt.site), suite_paths(s, results_dir), {}, root, self, "", 0, false,
                 {}, "", 0};
  if (!opt.dry_run) check_shapes_fit(s, sub.site, opt.site, sub.site.exclusive || s.resources.exclusive);
  sub.configs = write_configs(s, sub.p);
  fs::create_directories(sub.p.slurm);
  fs::create_directories(sub.p.logs);
  sub.stamp = fmt::format("{}-{}", std::time(nullptr), getpid());
  // Measurement integrity: a timing suite (real runs) is run at most
  // `limit` tasks at a time; with 1, each array also waits for the one
  // before it, so no two runs of the suite ever share the node.
  const bool timing = s.mode == SuiteMode::real;
  sub.limit = !timing ? 0 : s.resources.max_parallel_tasks >= 0 ? s.resources.max_parallel_tasks
                                                                : sub.site.max_parallel_tasks;
  sub.exclusive = sub.site.exclusive || s.resources.exclusive;
  if (sub.limit > 0)
    fmt::print("site {}: the tasks of this timing suite run {} at a time{} (max_parallel_tasks {}, from {}; "
               "resources: max_parallel_tasks: 0 lifts it)\n",
               opt.site, sub.limit, sub.limit == 1 ? ", one array after another, so no two runs share a node" : "",
               sub.limit, s.resources.max_parallel_tasks >= 0 ? "the suite" : "the site file");
  if (sub.exclusive) fmt::print("every task asks for whole nodes (--exclusive)\n");
  int shape_no = 0;
  for (const auto& group : group_by_shape(s)) submit_group(sub, group, ++shape_no);
  if (sub.submitted == 0) {
    fmt::print("suite {}: every run has finished; nothing to submit\n", s.name);
    return 0;
  }
  submit_report(sub);
  return sub.submitted;
}

}  // namespace asgd::sweep
