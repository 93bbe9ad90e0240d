// asgd sweep submit: one sbatch array per resource shape, plus a report job.
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <unistd.h>

#include "common/error.hpp"
#include "sweep/runner.hpp"

namespace asgd::sweep {

namespace fs = std::filesystem;

namespace {

// Per-site settings: slurm/sites/<site>.yaml.
struct Site {
  std::string partition, account, mpi = "pmi2";
  std::vector<std::string> modules, sbatch;  // `module load` lines, extra #SBATCH lines
  int gpus_per_node = 0;
};

Site load_site(const std::string& dir, const std::string& name) {
  const fs::path path = fs::path(dir) / (name + ".yaml");
  if (!fs::exists(path))
    throw Error(fmt::format("{}: no such site file (sites live in {})", path.string(), dir));
  Site s;
  try {
    const YAML::Node n = YAML::LoadFile(path.string());
    std::vector<std::string> problems;
    for (const auto& kv : n) {
      const auto key = kv.first.as<std::string>();
      if (key == "partition") s.partition = kv.second.as<std::string>();
      else if (key == "account") s.account = kv.second.as<std::string>();
      else if (key == "mpi") s.mpi = kv.second.as<std::string>();
      else if (key == "modules") s.modules = kv.second.as<std::vector<std::string>>();
      else if (key == "sbatch") s.sbatch = kv.second.as<std::vector<std::string>>();
      else if (key == "gpus_per_node") s.gpus_per_node = kv.second.as<int>();
      else if (key != "description")
        problems.push_back(fmt::format("{}:{}: unknown key '{}' (partition, account, mpi, modules, "
                                       "sbatch, gpus_per_node, description)",
                                       path.string(), kv.first.Mark().line + 1, key));
    }
    if (!problems.empty()) {
      std::string msg;
      for (const auto& p : problems) msg += (msg.empty() ? "" : "; ") + p;
      throw Error(msg);
    }
  } catch (const YAML::Exception& e) {
    throw Error(fmt::format("{}: {}", path.string(), e.what()));
  }
  return s;
}

std::string header(const Site& site) {
  std::string h;
  if (!site.partition.empty()) h += fmt::format("#SBATCH --partition={}\n", site.partition);
  if (!site.account.empty()) h += fmt::format("#SBATCH --account={}\n", site.account);
  for (const auto& l : site.sbatch) h += fmt::format("#SBATCH {}\n", l);
  return h;
}

std::string modules(const Site& site) {
  std::string m;
  for (const auto& mod : site.modules) m += fmt::format("module load {}\n", mod);
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
    throw Error(fmt::format("{} failed (exit {}): '{}'", cmd, rc, last));
  return last;
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

int submit(const Suite& s, const std::string& results_dir, const SubmitOptions& opt) {
  const Site site = load_site(opt.sites_dir, opt.site);
  const SuitePaths p = suite_paths(s, results_dir);
  const auto configs = write_configs(s, p);
  fs::create_directories(p.slurm);
  fs::create_directories(p.logs);
  const std::string root = fs::absolute(p.root).string();
  const std::string self = fs::absolute(opt.self).string();
  std::vector<std::string> job_ids;
  int submitted = 0, shape_no = 0;
  const std::string stamp = fmt::format("{}-{}", std::time(nullptr), getpid());
  const auto groups = group_by_shape(s);
  for (const auto& group : groups) {
    ++shape_no;
    std::string list;
    int n = 0;
    const Run& first = *group.front();
    for (const Run* r : group) {
      const RunState st = run_state(*r, p);
      if (st == RunState::done || st == RunState::diverged) continue;  // finished: never again
      const auto idx = static_cast<std::size_t>(r - s.runs.data());
      list += fs::absolute(configs[idx]).string() + "\n";
      ++n;
    }
    if (n == 0) continue;
    const std::string name = fmt::format("asgd-{}-{}", s.name, shape_no);
    // One run list per submission: tasks of an earlier array still queued keep
    // reading their own list (a re-submission lists fewer runs).
    const std::string runs_file =
        fs::absolute(fs::path(p.slurm) / fmt::format("{}.{}.runs", name, stamp)).string();
    write_atomic(runs_file, list, false);
    const int ranks = first.ranks;
    const int gpus = first.config.virtual_learners ? 0
                                                   : first.config.learners * s.resources.gpus_per_learner;
    std::string script = fmt::format(
        "#!/bin/bash\n"
        "# asgd sweep submit: suite {suite}, shape {shape}, {n} runs (one array task each).\n"
        "#SBATCH --job-name={name}\n"
        "#SBATCH --array=0-{last}\n"
        "#SBATCH --ntasks={ranks}\n"
        "#SBATCH --cpus-per-task={cpus}\n"
        "#SBATCH --time={time}\n"
        "#SBATCH --requeue\n"
        "#SBATCH --output={root}/logs/%x_%A_%a.out\n",
        fmt::arg("suite", s.name), fmt::arg("shape", first.shape), fmt::arg("n", n),
        fmt::arg("name", name), fmt::arg("last", n - 1), fmt::arg("ranks", ranks),
        fmt::arg("cpus", s.resources.cpus_per_rank), fmt::arg("time", s.resources.time_limit),
        fmt::arg("root", root));
    if (gpus > 0) script += fmt::format("#SBATCH --gpus={}\n", gpus);
    script += header(site);
    // no -e: a failed run must still leave its .failed marker
    script += "set -uo pipefail\n" + modules(site);
    script += fmt::format(
        "config=$(sed -n \"$((SLURM_ARRAY_TASK_ID + 1))p\" {runs})\n"
        "run_id=$(basename \"$config\" .json)\n"
        "export OPENBLAS_NUM_THREADS={cpus}\n",
        fmt::arg("runs", quote(runs_file)), fmt::arg("cpus", s.resources.cpus_per_rank));
    if (gpus > 0)
      script += "# one GPU per learner: asgd --device cuda gives each learner the GPU of its index\n"
                "# among the learners on its node (ASGD_GPU_DEVICE=k forces device k)\n";
    if (s.mode == "micro") {
      std::string cmd;
      for (const auto& a : micro_command(s, self, fs::absolute(micro_output(first, p)).string()))
        cmd += quote(a) + " ";
      script += fmt::format("srun -n 1 {}\n", cmd);
      const std::string path = fs::absolute(fs::path(p.slurm) / (name + ".sbatch")).string();
      write_atomic(path, script, true);
      submitted += n;
      if (opt.dry_run) {
        fmt::print("would submit: sbatch --parsable {}   (the micro-benchmarks)\n", path);
      } else {
        job_ids.push_back(capture("sbatch --parsable " + quote(path)));
        fmt::print("submitted {} as job {} (the micro-benchmarks)\n", name, job_ids.back());
      }
      continue;
    }
    // A requeued task re-runs the same command: asgd train resumes from its
    // checkpoint, and a finished run is skipped.
    script += fmt::format(
        "srun --mpi={mpi} -n {ranks} {self} train --config \"$config\" --progress-every 60\n"
        "rc=$?\n"
        "[[ $rc -eq 0 ]] || echo $rc > {logs}/\"$run_id\".failed\n"
        "exit $rc\n",
        fmt::arg("mpi", site.mpi), fmt::arg("ranks", ranks), fmt::arg("self", quote(self)),
        fmt::arg("logs", quote(root + "/logs")));
    const std::string path = fs::absolute(fs::path(p.slurm) / (name + ".sbatch")).string();
    write_atomic(path, script, true);
    submitted += n;
    if (opt.dry_run) {
      fmt::print("would submit: sbatch --parsable {}   ({} runs, {} ranks each)\n", path, n, ranks);
    } else {
      const std::string id = capture("sbatch --parsable " + quote(path));
      job_ids.push_back(id);
      fmt::print("submitted {} as job {} ({} array tasks, {} ranks each)\n", name, id, n, ranks);
    }
  }
  if (submitted == 0) {
    fmt::print("suite {}: every run has finished; nothing to submit\n", s.name);
    return 0;
  }
  // The report job: after every array, whatever their outcome.
  std::string report = fmt::format(
      "#!/bin/bash\n"
      "# asgd sweep submit: the report of suite {suite}, after its arrays.\n"
      "#SBATCH --job-name=asgd-{suite}-report\n"
      "#SBATCH --ntasks=1\n"
      "#SBATCH --time=00:30:00\n"
      "#SBATCH --output={root}/logs/%x_%j.out\n",
      fmt::arg("suite", s.name), fmt::arg("root", root));
  report += header(site) + modules(site);
  report += fmt::format("{} report {}\n", quote(self), quote(root));
  const std::string rpath = fs::absolute(fs::path(p.slurm) / ("asgd-" + s.name + "-report.sbatch")).string();
  write_atomic(rpath, report, true);
  std::string dep;
  for (const auto& id : job_ids) dep += (dep.empty() ? "" : ":") + id;
  if (opt.dry_run) {
    fmt::print("would submit: sbatch --parsable --dependency=afterany:<array ids> {}\n", rpath);
  } else {
    const std::string id = capture(fmt::format("sbatch --parsable --dependency=afterany:{} {}", dep, quote(rpath)));
    fmt::print("submitted the report as job {} (after {})\n", id, dep);
  }
  return submitted;
}

}  // namespace asgd::sweep
