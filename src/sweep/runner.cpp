#include "sweep/runner.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <ctime>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/process.hpp"
#include "common/text.hpp"
#include "common/threads.hpp"
#include "io/results.hpp"
#include "io/run_lock.hpp"

namespace asgd::sweep {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

void make_dir(const std::string& d) {
  std::error_code ec;
  fs::create_directories(d, ec);
  if (ec) throw Error(fmt::format("cannot create folder {}: {}", d, ec.message()));
}


}  // namespace

std::vector<std::string> micro_command(const Suite& s, const std::string& self,
                                       const std::string& out_json) {
  const std::string exe = (fs::path(self).parent_path() / "asgd_micro").string();
  std::vector<std::string> argv = {exe, "--benchmark_out=" + out_json, "--benchmark_out_format=json",
                                   fmt::format("--benchmark_repetitions={}", s.bench_repetitions)};
  if (!s.bench_filter.empty()) argv.push_back("--benchmark_filter=" + s.bench_filter);
  return argv;
}

std::string micro_output(const Run& r, const SuitePaths& p) {
  return (fs::path(p.runs) / (r.run_id + ".json")).string();
}

namespace {

// The command that runs one run: asgd train --config FILE, under mpiexec
// when it needs more than one rank; asgd_micro for a micro suite.
std::vector<std::string> train_command(const Suite& s, const Run& r, const std::string& config,
                                       const LocalOptions& opt, const SuitePaths& p) {
  if (s.mode == SuiteMode::micro) return micro_command(s, opt.self, micro_output(r, p));
  std::vector<std::string> argv;
  if (r.ranks > 1) argv = {opt.mpiexec, "-n", std::to_string(r.ranks)};
  argv.insert(argv.end(), {opt.self, "train", "--config", config, "--progress-every", "30"});
  return argv;
}

// Children end with the runner: each run is started in a process group of
// its own (its leader's pid), SIGTERM/SIGINT to the runner are forwarded to
// every group, and a child gets SIGTERM from the kernel if the runner dies
// without forwarding (kill -9; PR_SET_PDEATHSIG, kept across exec).
volatile std::sig_atomic_t g_signal = 0;
extern "C" void on_signal(int sig) { g_signal = sig; }

// The run's log is appended to, each attempt under a header line: a second
// runner that races for the same run (and loses the lock) cannot truncate
// the log the winner is writing.
pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
  const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out < 0) throw Error(fmt::format("{}: cannot write the run's log: {}", log, std::strerror(errno)));
  try {
    const std::time_t now = std::time(nullptr);
    char when[32] = "?";
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    const std::string head = fmt::format("== asgd sweep run (pid {}), {}\n", ::getpid(), when);
    if (::write(out, head.data(), head.size()) < 0)
      throw Error(fmt::format("{}: cannot write the run's log: {}", log, std::strerror(errno)));
    const pid_t pid = spawn_process(args, out, {.own_group = true, .die_with_parent = true});
    ::close(out);
    return pid;
  } catch (...) {
    ::close(out);
    throw;
  }
}

// Sends sig to every active run's process group, then waits up to 10 s for
// them and kills what is left.
template <class Map>
void stop_children(const Map& active, int sig) {
  for (const auto& [pid, a] : active) ::kill(-pid, sig);
  const auto t0 = Clock::now();
  std::size_t left = active.size();
  while (left > 0 && Clock::now() - t0 < std::chrono::seconds(10)) {
    const pid_t pid = ::waitpid(-1, nullptr, WNOHANG);
    if (pid > 0 && active.count(pid)) --left;
    if (pid <= 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (left > 0)
    for (const auto& [pid, a] : active) ::kill(-pid, SIGKILL);
}

}  // namespace

SuitePaths suite_paths(const Suite& s, const std::string& results_dir) {
  const fs::path root = fs::path(results_dir) / s.name;
  return {root.string(),           (root / "configs").string(), (root / "logs").string(),
          (root / "runs").string(), (root / "checkpoints").string(), (root / "slurm").string()};
}

std::vector<std::string> write_configs(const Suite& s, const SuitePaths& p) {
  make_dir(p.configs);
  std::vector<std::string> paths;
  paths.reserve(s.runs.size());
  for (const auto& r : s.runs) {
    const std::string path = (fs::path(p.configs) / (r.run_id + ".json")).string();
    const std::string text = nlohmann::json(r.config).dump(2) + "\n";
    std::ifstream in(path, std::ios::binary);
    const std::string old{std::istreambuf_iterator<char>(in), {}};
    if (old != text) write_file_atomic(path, text);  // unchanged files keep their time stamps
    paths.push_back(path);
  }
  return paths;
}

const char* to_string(RunState s) {
  switch (s) {
    case RunState::done: return "completed";
    case RunState::diverged: return "diverged";
    case RunState::failed: return "failed";
    case RunState::interrupted: return "interrupted";
    case RunState::pending: return "pending";
    case RunState::running: return "running";
  }
  return "?";
}

RunState run_state(const Run& r, const SuitePaths& p) {
  if (fs::exists(micro_output(r, p))) return RunState::done;  // a micro suite's JSON
  // a trainer holds the run's lock (io::RunLock), here or on a node sharing the folder
  if (io::RunLock::busy((fs::path(p.checkpoints) / (r.run_id + ".h5")).string()))
    return RunState::running;
  const fs::path result = fs::path(p.runs) / (r.run_id + ".h5");
  if (fs::exists(result)) {
    try {
      const auto res = io::read_results(result.string());
      if (res.status == RunStatus::diverged) return RunState::diverged;
      if (res.status == RunStatus::failed) return RunState::failed;
      return RunState::done;
    } catch (const Error&) {
      return RunState::failed;
    }
  }
  if (fs::exists(fs::path(p.logs) / (r.run_id + ".failed"))) return RunState::failed;
  if (fs::exists(fs::path(p.checkpoints) / (r.run_id + ".h5"))) return RunState::interrupted;
  return RunState::pending;
}

namespace {

// The local runner's state: what is to run, what runs, what came of it.
class LocalRun {
 public:
  LocalRun(const Suite& s, const SuitePaths& p, const std::vector<std::string>& configs, const LocalOptions& opt,
           std::vector<std::size_t> todo, int cores)
      : s_(s), p_(p), configs_(configs), opt_(opt), todo_(std::move(todo)), cores_(cores) {}

  // Runs everything; returns the failed count, or 128 + a signal that stopped it.
  int run() {
    while (next_ < todo_.size() || !active_.empty()) {
      if (g_signal != 0) return stop();
      start_what_fits();
      if (active_.empty()) continue;  // every remaining run failed to start
      int wstatus = 0;
      const pid_t pid = waitpid(-1, &wstatus, 0);
      if (pid < 0 && errno == EINTR) continue;  // a signal: handled at the top of the loop
      if (pid < 0) throw Error(fmt::format("waitpid: {}", std::strerror(errno)));
      finished(pid, wstatus);
    }
    return -1;
  }

  int count(const char* state) { return outcome_[state]; }

 private:
  struct Active {
    std::size_t index;
    int cores;  // ranks x threads per rank
    Clock::time_point start;
  };

  std::string failed_marker(const Run& r) const { return (fs::path(p_.logs) / (r.run_id + ".failed")).string(); }

  int stop() {
    const int sig = g_signal;
    fmt::print("suite {}: {} received: stopping {} running run{} (their checkpoints stay; run "
               "the suite again to resume)\n",
               s_.name, strsignal(sig), active_.size(), active_.size() == 1 ? "" : "s");
    std::fflush(stdout);
    stop_children(active_, sig);
    return 128 + sig;
  }

  // Starts what fits: at most `jobs` runs, at most `cores` cores, a run taking
  // ranks x threads per rank (OMP_NUM_THREADS, which the runs inherit,
  // included; one run always fits).
  void start_what_fits() {
    while (next_ < todo_.size() && static_cast<int>(active_.size()) < opt_.jobs) {
      const Run& r = s_.runs[todo_[next_]];
      const int need = r.ranks * threads_per_rank(r.config.threads);
      if (!active_.empty() && used_ + need > cores_) break;
      // another runner may have taken (or finished) it since the start
      if (const RunState st = run_state(r, p_); st == RunState::running || st == RunState::done ||
                                                st == RunState::diverged) {
        taken_elsewhere(r, st);
        ++next_;
        continue;
      }
      const std::string log = (fs::path(p_.logs) / (r.run_id + ".log")).string();
      fs::remove(failed_marker(r));
      pid_t pid = 0;
      try {
        pid = spawn(train_command(s_, r, configs_[todo_[next_]], opt_, p_), log);
      } catch (const Error& e) {  // e.g. no mpiexec: this run fails, the others go on
        write_file_atomic(failed_marker(r), "127\n");
        outcome_["failed"] += 1;
        ++finished_;
        ++next_;
        fmt::print("[{}/{}] {} failed to start: {}\n", finished_, todo_.size(), r.run_id, e.what());
        continue;
      }
      active_[pid] = {todo_[next_], need, Clock::now()};
      used_ += need;
      ++next_;
      fmt::print("[{}/{}] started {} ({} rank{})\n", next_, todo_.size(), r.run_id, r.ranks, r.ranks == 1 ? "" : "s");
      std::fflush(stdout);
    }
  }

  void finished(pid_t pid, int wstatus) {
    auto it = active_.find(pid);
    if (it == active_.end()) return;
    const Active a = it->second;
    active_.erase(it);
    used_ -= a.cores;
    ++finished_;
    const double took = std::chrono::duration<double>(Clock::now() - a.start).count();
    busy_s_ += took;
    const Run& r = s_.runs[a.index];
    const int code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    std::string state;
    // lost the race for the run's lock to another runner: not a failure
    if (code != 0 && run_state(r, p_) == RunState::running) {
      busy_s_ -= took;
      --finished_;
      return taken_elsewhere(r, RunState::running);
    }
    if (code != 0) {
      write_file_atomic(failed_marker(r), fmt::format("{}\n", code));
      state = "failed";
    } else {
      state = to_string(run_state(r, p_));
    }
    outcome_[state] += 1;
    const double mean = busy_s_ / static_cast<double>(finished_);
    const double eta = mean * static_cast<double>(todo_.size() - finished_) / std::max(1, opt_.jobs);
    fmt::print("[{}/{}] {} {} in {} (elapsed {}, ETA {}){}\n", finished_, todo_.size(), r.run_id, state,
               fmt_duration(took), fmt_duration(std::chrono::duration<double>(Clock::now() - t0_).count()),
               fmt_duration(eta), code != 0 ? fmt::format(" exit {}, see {}/{}.log", code, p_.logs, r.run_id) : "");
    std::fflush(stdout);
  }

  void taken_elsewhere(const Run& r, RunState st) {
    outcome_["skipped"] += 1;
    ++finished_;
    fmt::print("[{}/{}] {}: {} by another process, skipped\n", finished_, todo_.size(), r.run_id,
               st == RunState::running ? "being trained" : "finished");
    std::fflush(stdout);
  }

  const Suite& s_;
  const SuitePaths& p_;
  const std::vector<std::string>& configs_;
  const LocalOptions& opt_;
  const std::vector<std::size_t> todo_;
  const int cores_;
  std::map<pid_t, Active> active_;
  std::map<std::string, int> outcome_;
  std::size_t next_ = 0, finished_ = 0;
  double busy_s_ = 0;
  int used_ = 0;
  const Clock::time_point t0_ = Clock::now();
};

// SIGTERM and SIGINT set g_signal while it lives (no SA_RESTART: waitpid
// returns EINTR); the old handlers come back after.
class SignalsForwarded {
 public:
  SignalsForwarded() {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    g_signal = 0;
    sigaction(SIGTERM, &sa, &term_);
    sigaction(SIGINT, &sa, &intr_);
  }
  ~SignalsForwarded() {
    sigaction(SIGTERM, &term_, nullptr);
    sigaction(SIGINT, &intr_, nullptr);
  }
  SignalsForwarded(const SignalsForwarded&) = delete;
  SignalsForwarded& operator=(const SignalsForwarded&) = delete;

 private:
  struct sigaction term_ {}, intr_ {};
};

}  // namespace

int run_local(const Suite& s, const std::string& results_dir, const LocalOptions& opt) {
  // jobs < 1 would start nothing and wait forever
  if (opt.jobs < 1) throw Error(fmt::format("--jobs {} must be >= 1", opt.jobs));
  if (opt.cores < 0) throw Error(fmt::format("--cores {} must be >= 1 (0: this machine's cores)", opt.cores));
  const SuitePaths p = suite_paths(s, results_dir);
  const auto configs = write_configs(s, p);
  make_dir(p.logs);
  make_dir(p.runs);
  const int cores = opt.cores > 0 ? opt.cores : static_cast<int>(std::thread::hardware_concurrency());
  std::vector<std::size_t> todo;
  int skipped = 0;
  for (std::size_t i = 0; i < s.runs.size(); ++i) {
    const RunState st = run_state(s.runs[i], p);
    if (st == RunState::done || st == RunState::diverged) {
      ++skipped;
      continue;
    }
    if (st == RunState::running) {  // another runner trains it: not a second trainer
      ++skipped;
      fmt::print("{}: being trained by another process, skipped\n", s.runs[i].run_id);
      continue;
    }
    todo.push_back(i);
  }
  fmt::print("suite {}: {} runs, {} finished earlier, {} to run (jobs {}, {} cores)\n", s.name,
             s.runs.size(), skipped, todo.size(), opt.jobs, cores);
  if (opt.dry_run) {
    for (auto i : todo) {
      std::string line;
      for (const auto& a : train_command(s, s.runs[i], configs[i], opt, p)) line += a + " ";
      fmt::print("{}\n", line);
    }
    return 0;
  }
  SignalsForwarded signals;
  LocalRun runner(s, p, configs, opt, std::move(todo), cores);
  if (const int stopped = runner.run(); stopped >= 0) return stopped;
  fmt::print("suite {}: {} completed, {} diverged, {} failed, {} finished earlier or taken by another process\n",
             s.name, runner.count("completed"), runner.count("diverged"), runner.count("failed"),
             skipped + runner.count("skipped"));
  return runner.count("failed");
}

int status(const Suite& s, const std::string& results_dir) {
  std::error_code ec;
  for (const fs::path& at : {fs::path(results_dir), fs::path(results_dir) / s.name})
    if (fs::exists(at, ec) && !fs::is_directory(at, ec))
      throw Error(fmt::format("{}: is a file, not a results folder", at.string()));
  const SuitePaths p = suite_paths(s, results_dir);
  // Slurm's view, when it is there: array job name + task id -> state; the
  // run lists written by submit map task ids to runs.
  std::map<std::string, std::string> slurm;  // run id -> state
  std::map<std::string, std::vector<std::string>> lists;  // job name -> run ids by task
  std::vector<fs::path> files;
  if (fs::exists(p.slurm))
    for (const auto& e : fs::directory_iterator(p.slurm))
      if (e.path().extension() == ".runs") files.push_back(e.path());
  std::sort(files.begin(), files.end());  // submission stamps sort by time
  for (const auto& file : files) {
    std::ifstream in(file);
    std::string line;
    // <job name>.<submission>.runs: the newest submission of a job name wins
    const std::string stem = file.stem().string();
    auto& ids = lists[stem.substr(0, stem.find('.'))];
    ids.clear();
    while (std::getline(in, line)) ids.push_back(fs::path(line).stem().string());
  }
  if (!lists.empty())
    if (FILE* q = popen("squeue -h -o '%j %K %T' 2>/dev/null", "r")) {
      char buf[512];
      while (std::fgets(buf, sizeof buf, q)) {
        char job[256] = {}, task[64] = {}, state[64] = {};
        if (std::sscanf(buf, "%255s %63s %63s", job, task, state) != 3) continue;
        auto it = lists.find(job);
        if (it == lists.end()) continue;
        const std::string t = task;
        if (t.find_first_not_of("0123456789") != std::string::npos) {  // pending range "[0-7]"
          for (const auto& id : it->second) slurm.emplace(id, state);
          continue;
        }
        const auto k = static_cast<std::size_t>(std::stoul(t));
        if (k < it->second.size()) slurm[it->second[k]] = state;
      }
      pclose(q);
    }
  std::map<std::string, int> count;
  for (const auto& r : s.runs) {
    const RunState st = run_state(r, p);
    std::string shown = to_string(st);
    if (auto it = slurm.find(r.run_id); it != slurm.end() && st != RunState::done &&
                                        st != RunState::diverged)
      shown = "slurm:" + it->second;
    count[shown] += 1;
    fmt::print("{:<12} {}\n", shown, r.run_id);
  }
  std::string line;
  for (const auto& [k, v] : count) line += fmt::format("{} {}, ", v, k);
  if (!line.empty()) line.resize(line.size() - 2);
  fmt::print("suite {}: {} runs: {}\n", s.name, s.runs.size(), line);
  return count["failed"];
}

}  // namespace asgd::sweep
