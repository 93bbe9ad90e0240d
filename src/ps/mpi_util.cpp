#include "ps/mpi_util.hpp"

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI: MPIX_CUDA_AWARE_SUPPORT
#endif
#include <cstdlib>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <random>
#include <thread>

#include "ps/doorbell.hpp"

namespace asgd::ps {

namespace {
using Clock = std::chrono::steady_clock;
constexpr auto kSpinEvent = std::chrono::microseconds(50);
constexpr auto kSpinTransfer = std::chrono::microseconds(20000);
constexpr auto kMaxPause = std::chrono::microseconds(500);

double g_stall_s = 0;
std::string g_label = "this rank";

// How a rank waits (ASGD_WAIT, docs/PERFORMANCE.md). `yield` (the default)
// polls for a while first and gives the core to any other runnable thread
// between polls, which costs nothing where a core is spare; `spin` polls
// without yielding; `sleep` skips the polling phase and sleeps between polls
// from the start, for ranks that share few cores with many others (the
// emulated cluster's nodes all share this machine's cores), where a polling
// rank takes time from the ones that compute.
enum class Policy { yield, spin, sleep };

Policy wait_policy() {
  static const Policy policy = [] {
    const char* env = std::getenv("ASGD_WAIT");
    const std::string v = env == nullptr ? "" : env;
    if (v.empty() || v == "yield") return Policy::yield;
    if (v == "spin") return Policy::spin;
    if (v == "sleep") return Policy::sleep;
    throw Error(fmt::format("ASGD_WAIT='{}': want yield, spin or sleep", v));
  }();
  return policy;
}

// How long a wait of this kind polls before it sleeps.
Clock::duration spin_phase(Policy policy, Wait kind) {
  if (policy == Policy::sleep) return Clock::duration::zero();
  return kind == Wait::transfer ? Clock::duration(kSpinTransfer) : Clock::duration(kSpinEvent);
}

[[noreturn]] void stalled(double waited, const char* what) {
  throw Stalled(fmt::format("{}: no progress for {:.0f} s while waiting for {} (--stall-timeout {:g}); "
                            "giving up",
                            g_label, waited, what, g_stall_s));
}

// Calls done() until it returns true: first polling (with a yield between
// polls unless ASGD_WAIT=spin; no polling phase with ASGD_WAIT=sleep), then
// sleeping 1, 2, 4, ... up to kMaxPause microseconds between calls (on this
// rank's doorbell where it has one: a send from a rank of the node ends the
// sleep, ps/doorbell.hpp). Throws
// Stalled once the watchdog's timeout has passed.
template <class Done>
void backoff(Done&& done, Wait kind, const char* what) {
  const auto t0 = Clock::now();
  const Policy policy = wait_policy();
  const auto poll_for = [&](Clock::duration d) {
    const auto from = Clock::now();
    while (Clock::now() - from < d) {
      if (done()) return true;
      if (policy == Policy::yield) std::this_thread::yield();
    }
    return false;
  };
  if (poll_for(spin_phase(policy, kind))) return;
  auto pause = std::chrono::microseconds(1);
  int polls = 0;
  const std::uint32_t* bell = own_bell();
  for (;;) {
    // the bell is read before the poll: a ring after it ends the sleep at once
    const std::uint32_t seen = bell != nullptr ? bell_value(bell) : 0;
    if (done()) return;
    if (bell != nullptr)
      sleep_on_bell(bell, seen, std::chrono::duration<double>(pause).count());
    else
      std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, kMaxPause);
    // Rung: a message is on its way. The ring follows MPI_Isend's return, and
    // the message may not be visible to this rank's probe for some
    // microseconds more: poll for it (one event's spin phase), then sleep
    // from the shortest pause again, instead of the next, longer one.
    if (bell != nullptr && bell_value(bell) != seen) {
      if (poll_for(spin_phase(policy, Wait::event))) return;
      pause = std::chrono::microseconds(1);
    }
    if (g_stall_s > 0 && ++polls % 256 == 0) {
      const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
      if (waited > g_stall_s) stalled(waited, what);
    }
  }
}
}  // namespace

WaitSchedule event_wait_schedule() {
  const Policy policy = wait_policy();
  const double spin = std::chrono::duration<double>(spin_phase(policy, Wait::event)).count();
  return {spin, std::chrono::duration<double>(kMaxPause).count(),
          policy == Policy::sleep ? "sleep" : policy == Policy::spin ? "spin" : "yield"};
}

void set_stall_timeout(double seconds) { g_stall_s = seconds; }
double stall_timeout() { return g_stall_s; }
void set_rank_label(std::string label) { g_label = std::move(label); }

namespace {

// The injection settings of this rank, parsed once (asgd::Error when bad).
struct Injection {
  bool delay = false;
  double max_ms = 0, prob = 0.5;
  std::mt19937_64 rng;
  long long stall_rank = -1, stall_at = 0, calls = 0;  // ASGD_INJECT_STALL="RANK:N"
  Injection() {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char tail = 0;
    if (const char* env = std::getenv("ASGD_INJECT_DELAY"); env != nullptr && *env != '\0') {
      unsigned long long seed = 0;
      double ms = 0, p = 0.5;
      int used = 0, used_p = 0;
      bool ok = *env != '-' && std::sscanf(env, "%llu:%lf%n", &seed, &ms, &used) == 2;
      if (ok && env[used] == ':') {
        ok = std::sscanf(env + used + 1, "%lf%n", &p, &used_p) == 1;
        used += 1 + used_p;
      }
      if (!ok || env[used] != '\0' || !(ms >= 0 && ms < 1e6) || !(p >= 0 && p <= 1))
        throw Error(fmt::format("ASGD_INJECT_DELAY='{}': want SEED:MAX_MS[:PROB]", env));
      rng.seed(seed * 0x9E3779B97F4A7C15ULL + static_cast<unsigned long long>(rank));
      max_ms = ms;
      prob = p;
      delay = true;
    }
    if (const char* env = std::getenv("ASGD_INJECT_STALL"); env != nullptr && *env != '\0') {
      if (std::sscanf(env, "%lld:%lld%c", &stall_rank, &stall_at, &tail) != 2)
        throw Error(fmt::format("ASGD_INJECT_STALL='{}': want RANK:N", env));
      if (rank != stall_rank) stall_rank = -1;
    }
  }
};

Injection& injection() {
  static Injection inj;
  return inj;
}

}  // namespace

void check_injection() {
  try {
    (void)injection();
    (void)injected_server_costs();
    (void)wait_policy();
    for (const char* name : {"ASGD_DOORBELL", "ASGD_SHM", "ASGD_IN_PLACE", "ASGD_CUDA_AWARE"}) (void)env_switch(name);
  } catch (const Error& e) {
    throw CollectiveError(e.what());
  }
}

void inject_delay() {
  Injection& inj = injection();
  if (inj.stall_rank >= 0 && ++inj.calls >= inj.stall_at)
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  if (!inj.delay) return;
  std::uniform_real_distribution<double> u(0, 1);
  if (u(inj.rng) >= inj.prob) return;
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(u(inj.rng) * inj.max_ms));
}

const ServerCosts& injected_server_costs() {
  static const ServerCosts costs = [] {
    ServerCosts c;
    const char* env = std::getenv("ASGD_INJECT_SERVER");
    if (env == nullptr || *env == '\0') return c;
    char tail = 0;
    if (std::sscanf(env, "%lf:%lf%c", &c.update_s, &c.byte_s, &tail) != 2 || !(c.update_s >= 0 && c.update_s < 10) ||
        !(c.byte_s >= 0 && c.byte_s < 1e-3))
      throw Error(fmt::format("ASGD_INJECT_SERVER='{}': want UPDATE_S:BYTE_S (seconds per update, below 10; "
                              "seconds per byte, below 1e-3)", env));
    return c;
  }();
  return costs;
}

void sleep_s(double s) {
  if (s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

void mpi_check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw Error(fmt::format("MPI {} failed: {}", what, std::string(msg, static_cast<std::size_t>(len))));
}

Comm::Comm(MPI_Comm parent) {
  mpi_check(MPI_Comm_dup(parent, &comm_), "Comm_dup");
  mpi_check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "Comm_set_errhandler");
  mpi_check(MPI_Comm_rank(comm_, &rank_), "Comm_rank");
  mpi_check(MPI_Comm_size(comm_, &size_), "Comm_size");
}

Comm::~Comm() {
  // MPI_Comm_free is collective: not while an exception unwinds (main() then aborts the job).
  if (comm_ != MPI_COMM_NULL && std::uncaught_exceptions() == 0) MPI_Comm_free(&comm_);
}

MPI_Status polite_wait(MPI_Request& req, Wait kind, const char* what) {
  MPI_Status st{};
  backoff(
      [&] {
        int flag = 0;
        mpi_check(MPI_Test(&req, &flag, &st), "Test");
        return flag != 0;
      },
      kind, what);
  return st;
}

void polite_wait_all(int n, MPI_Request* reqs, Wait kind, const char* what) {
  backoff(
      [&] {
        int flag = 0;
        mpi_check(MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE), "Testall");
        return flag != 0;
      },
      kind, what);
}

int polite_wait_any(int n, MPI_Request* reqs, Wait kind, const char* what) {
  int index = MPI_UNDEFINED;
  backoff(
      [&] {
        int flag = 0;
        mpi_check(MPI_Testany(n, reqs, &index, &flag, MPI_STATUS_IGNORE), "Testany");
        return flag != 0;
      },
      kind, what);
  if (index == MPI_UNDEFINED) throw Error(fmt::format("wait for {}: no active request", what));
  return index;
}

MPI_Status polite_probe(int source, int tag, MPI_Comm comm, const char* what) {
  return polite_probe_any({{source, tag}}, comm, what);
}

bool polite_probe_for(int source, int tag, MPI_Comm comm, double seconds) {
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  int flag = 0;
  backoff(
      [&] {
        mpi_check(MPI_Iprobe(source, tag, comm, &flag, MPI_STATUS_IGNORE), "Iprobe");
        return flag != 0 || Clock::now() >= until;
      },
      Wait::event, "a message");
  return flag != 0;
}

MPI_Status polite_probe_any(std::initializer_list<Want> wants, MPI_Comm comm, const char* what) {
  MPI_Status st{};
  backoff(
      [&] {
        for (const Want& w : wants) {
          int flag = 0;
          mpi_check(MPI_Iprobe(w.source, w.tag, comm, &flag, &st), "Iprobe");
          if (flag != 0) return true;
        }
        return false;
      },
      Wait::event, what);
  return st;
}

std::string mpi_library_version() {
  char v[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(v, &len);
  std::string s(v, static_cast<std::size_t>(len));
  if (auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  // "MPICH Version:\t4.0.2": one space for the tab (it is stored in every results file)
  for (char& c : s)
    if (c == '\t') c = ' ';
  return s;
}

bool env_switch(const char* name) {
  const char* env = std::getenv(name);
  const std::string v = env == nullptr ? "" : env;
  if (v.empty() || v == "1") return true;
  if (v == "0") return false;
  throw Error(fmt::format("{}='{}': want 1 (on, the default) or 0 (off)", name, v));
}

bool mpi_cuda_aware() {
  if (!env_switch("ASGD_CUDA_AWARE")) return false;
#if defined(MPIX_GPU_SUPPORT_CUDA)
  int yes = 0;
  return MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &yes) == MPI_SUCCESS && yes != 0;
#elif defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() == 1;
#else
  return false;
#endif
}

// The host name of every rank (rank 0 gets them all; others get an empty list).
std::vector<std::string> rank_hosts(const Comm& comm) {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  mpi_check(MPI_Get_processor_name(name, &len), "Get_processor_name");
  std::vector<char> all(comm.rank() == 0 ? static_cast<std::size_t>(comm.size()) * MPI_MAX_PROCESSOR_NAME : 1);
  mpi_check(MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME,
                       MPI_CHAR, 0, comm.get()),
            "Gather");
  std::vector<std::string> hosts;
  if (comm.rank() == 0)
    for (int r = 0; r < comm.size(); ++r) {
      const char* p = all.data() + static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME;
      hosts.emplace_back(p, strnlen(p, MPI_MAX_PROCESSOR_NAME));
    }
  return hosts;
}

// Every rank stops when any failed; the lowest failing rank reports it, so a
// problem every rank meets (a truncated data file) is printed once, not once
// per rank.
void stop_if_any_failed(const Comm& comm, const std::string& error, const char* elsewhere) {
  const int mine = error.empty() ? comm.size() : comm.rank();
  int first = 0;
  mpi_check(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm.get()), "Allreduce");
  if (first == comm.size()) return;
  if (first == comm.rank()) throw SetupFailed(error);
  throw ReportedElsewhere(elsewhere);
}

}  // namespace asgd::ps
