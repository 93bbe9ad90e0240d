#include "common/runinfo.hpp"

#include <Kokkos_Core.hpp>
#include <fmt/format.h>
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/blas_env.hpp"

#include "git_commit.h"  // generated at every build: ASGD_GIT_COMMIT

namespace asgd {

namespace {
std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// The instruction sets that change kernel speed (and so a figure).
constexpr const char* kFlags[] = {"sse4_2",      "avx",         "avx2",        "fma",
                                  "avx512f",     "avx512bw",    "avx512vl",    "avx512_vnni",
                                  "avx512_bf16", "avx512_fp16", "amx_tile",    "amx_bf16",
                                  "amx_int8",    "sve",         "asimd"};

void read_cpuinfo(RunInfo& r) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::set<std::string> have;
  bool flags_done = false;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (r.cpu_model.empty() && (key == "model name" || key == "Model name" || key == "cpu model"))
      r.cpu_model = value;
    if (!flags_done && (key == "flags" || key == "Features")) {
      std::istringstream words(value);
      std::string w;
      while (words >> w) have.insert(w);
      flags_done = true;
    }
  }
  for (const char* f : kFlags)
    if (have.count(f)) r.cpu_flags.emplace_back(f);
}

double meminfo_bytes(const std::string& field) {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kb = 0;
  std::string unit;
  while (in >> key >> kb) {
    std::getline(in, unit);
    if (key == field + ":") return kb * 1024;
  }
  return 0;
}

std::string os_name() {
  std::ifstream in("/etc/os-release");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("PRETTY_NAME=", 0) == 0) {
      std::string v = line.substr(12);
      if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
      return v;
    }
  return "";
}
}  // namespace

RunInfo collect_run_info() {
  RunInfo r;
  r.git_commit = ASGD_GIT_COMMIT;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) r.host = host;
  r.kokkos_version = fmt::format("{}.{}.{} ({})", KOKKOS_VERSION / 10000, KOKKOS_VERSION / 100 % 100,
                                 KOKKOS_VERSION % 100, Kokkos::DefaultExecutionSpace::name());
  r.kokkos_backend = Kokkos::DefaultExecutionSpace::name();
  r.kokkos_concurrency = Kokkos::DefaultExecutionSpace::concurrency();
  r.blas = blas_info();
  r.slurm_job_id = env("SLURM_JOB_ID");
  r.slurm_array_job_id = env("SLURM_ARRAY_JOB_ID");
  r.slurm_array_task_id = env("SLURM_ARRAY_TASK_ID");
  r.slurm_nodelist = env("SLURM_JOB_NODELIST");
  read_cpuinfo(r);
  r.cpus_online = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  cpu_set_t set;
  CPU_ZERO(&set);
  r.cpus_allowed = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : r.cpus_online;
  r.mem_total_bytes = meminfo_bytes("MemTotal");
  r.mem_available_bytes = meminfo_bytes("MemAvailable");
  if (std::ifstream la("/proc/loadavg"); la) la >> r.load1 >> r.load5 >> r.load15;
  struct utsname u {};
  if (uname(&u) == 0) r.kernel = fmt::format("{} {} {}", u.sysname, u.release, u.machine);
  r.os = os_name();
  return r;
}

std::string machine_json(const RunInfo& info, const RunShape& shape) {
  // Every rank's host in rank order (this host alone outside MPI), and the distinct ones sorted.
  const std::vector<std::string> rank_nodes =
      shape.nodes.empty() ? std::vector<std::string>{info.host} : shape.nodes;
  std::vector<std::string> nodes = rank_nodes;
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  const nlohmann::json j = {
      {"host", info.host},
      {"nodes", nodes},
      {"rank_nodes", rank_nodes},
      {"slurm_nodelist", info.slurm_nodelist},
      {"cpu_model", info.cpu_model},
      {"cpu_short", short_cpu(info.cpu_model)},
      {"cpu_flags", info.cpu_flags},
      {"cpus_online", info.cpus_online},
      {"cpus_allowed", info.cpus_allowed},
      {"ranks", shape.ranks},
      {"threads_per_rank", threads_per_rank(shape.threads_per_rank)},  // what ran, OMP_NUM_THREADS included
      {"mem_total_bytes", info.mem_total_bytes},
      {"mem_available_bytes", info.mem_available_bytes},
      {"load_at_start", {info.load1, info.load5, info.load15}},
      {"blas", info.blas},
      {"kokkos", {{"version", info.kokkos_version}, {"backend", info.kokkos_backend},
                  {"concurrency", info.kokkos_concurrency}}},
      {"mpi", shape.mpi},
      {"gpu", shape.gpu},
      {"kernel", info.kernel},
      {"os", info.os},
  };
  return j.dump();
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double machine_busy_seconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0;
  if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq) || cpu != "cpu") return -1;
  const long tick = ::sysconf(_SC_CLK_TCK);
  return tick > 0 ? static_cast<double>(user + nice + system + irq + softirq) / static_cast<double>(tick) : -1;
}

std::string machine_boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  in >> id;
  return id;
}

}  // namespace asgd
