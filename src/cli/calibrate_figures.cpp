// asgd calibrate's in-process figures (cli/calibrate_figures.hpp).
#include "cli/calibrate_figures.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <ctime>
#include <thread>
#include <vector>

#include "cli/stepper.hpp"
#include "common/clock.hpp"
#include "config/config.hpp"
#include "common/error.hpp"
#include "ps/doorbell.hpp"
#include "ps/mpi_util.hpp"
#include "ps/shard_core.hpp"
#include "report/stats.hpp"

namespace asgd::cli {

std::string today() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return buf;
}

perf::Figure measured(double v, std::string how) { return {v, "measured", std::move(how)}; }

// ShardCore::accept of P parameters: softsync with c = 2 alternates an
// accumulate-only push and one that also applies the update.
void server_figures(perf::Profile& p, index_t P, const std::function<void()>& between, const std::string& what) {
  TrainConfig cfg;
  cfg.protocol = "softsync";
  cfg.learners = 2;
  cfg.softsync_n = 1;
  cfg.max_steps = 1 << 30;
  check(cfg);
  ps::ShardCore core(cfg, P, 2, 1 << 30);
  nn::View grad("calibrate::grad", P);
  Kokkos::deep_copy(grad, 1e-6f);
  std::vector<double> acc, upd;
  for (int i = 0; i < 12; ++i) {
    for (int l = 0; l < 2; ++l) {
      between();
      const auto t0 = Clock::now();
      core.accept({l, core.clock(), 1, 0.0, 0, {}}, 0.0, &grad);
      Kokkos::fence();
      (l == 0 ? acc : upd).push_back(seconds_since(t0));
    }
  }
  std::sort(acc.begin(), acc.end());
  std::sort(upd.begin(), upd.end());
  const double a = acc[acc.size() / 2], u = std::max(0.0, upd[upd.size() / 2] - a);
  const std::string how = fmt::format("asgd calibrate {}: ps::ShardCore::accept of {} parameters, median of 12, "
                                      "softsync c = 2 (every other push applies the update), each after {}",
                                      today(), P, what);
  p.accumulate_s_per_param = measured(a / static_cast<double>(P), "a push without the update: " + how);
  p.update_s_per_param = measured(u / static_cast<double>(P), "a push with the update, less one without: " + how);
  spdlog::info("server   accumulate {:.3f} ns/param, update {:.3f} ns/param", 1e9 * a / static_cast<double>(P),
               1e9 * u / static_cast<double>(P));
}

// A shard's cost per push apart from its parameters: ShardCore::accept of a
// gradient of 16 parameters (the rule's bookkeeping; the message's own cost
// is in the link probe's latency).
void per_push_figure(perf::Profile& p) {
  TrainConfig cfg;
  cfg.protocol = "softsync";
  cfg.learners = 1;
  cfg.max_steps = 1 << 30;
  check(cfg);
  constexpr index_t P = 16;
  ps::ShardCore core(cfg, P, 1, 1 << 30);
  nn::View grad("calibrate::small_grad", P);
  Kokkos::deep_copy(grad, 1e-6f);
  std::vector<double> t;
  for (int i = 0; i < 201; ++i) {
    const auto t0 = Clock::now();
    core.accept({0, core.clock(), 1, 0.0, 0, {}}, 0.0, &grad);
    Kokkos::fence();
    t.push_back(seconds_since(t0));
  }
  std::nth_element(t.begin(), t.begin() + 100, t.end());
  p.per_push_s = measured(t[100], fmt::format("asgd calibrate {}: ps::ShardCore::accept of a {}-parameter gradient "
                                              "(softsync, c = 1), median of 201",
                                              today(), P));
  spdlog::info("server   {:.2f} us per push apart from its parameters", 1e6 * t[100]);
}

namespace {

// The CPUs this process may run on (its affinity mask), in order.
std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

// Runs the calling thread on CPU `cpu` only (no-op for cpu < 0).
void pin_to(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

// A doorbell's wake-up (ps/doorbell.hpp): a thread sleeps on a bell in
// process-shared memory as a waiting rank does, another rings it 200 us
// later; the seconds from the ring to the sleeper's return, median of `n`.
// Ranks wait on other cores than the ones that ring them: where `cpus` holds
// two CPUs the two threads run on the first two (an idle CPU's wake-up is
// most of the figure in a virtual machine), else where the kernel puts them.
double doorbell_wake_s(int n, const std::vector<int>& cpus) {
  void* mem = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) throw Error("asgd calibrate: mmap of one page for the doorbell probe failed");
  auto* bell = static_cast<std::uint32_t*>(mem);
  const int ringer_cpu = cpus.size() >= 2 ? cpus[0] : -1, sleeper_cpu = cpus.size() >= 2 ? cpus[1] : -1;
  std::atomic<int> asleep{0};
  std::atomic<Clock::time_point::rep> rung{0};
  std::vector<double> took;
  std::thread sleeper([&] {
    pin_to(sleeper_cpu);
    for (int i = 0; i < n; ++i) {
      const std::uint32_t seen = ps::bell_value(bell);
      asleep.store(i + 1);
      ps::sleep_on_bell(bell, seen, 1.0);
      const auto woke = Clock::now().time_since_epoch().count();
      took.push_back(std::max(0.0, 1e-9 * static_cast<double>(woke - rung.load())));
    }
  });
  std::thread ringer([&] {
    pin_to(ringer_cpu);
    for (int i = 0; i < n; ++i) {
      while (asleep.load() != i + 1) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      rung.store(Clock::now().time_since_epoch().count());
      ps::ring_bell(bell);
    }
  });
  ringer.join();
  sleeper.join();
  munmap(mem, 4096);
  std::nth_element(took.begin(), took.begin() + n / 2, took.end());
  return took[static_cast<std::size_t>(n / 2)];
}

}  // namespace

// How a waiting rank polls (the MPI core's schedule under this ASGD_WAIT),
// how much longer than asked its sleeps last here (median over sleeps
// of 1, 16 and 256 us) and, with doorbells (ASGD_DOORBELL not 0), how soon a
// ring ends a sleep.
void wake_figures(perf::Profile& p) {
  const ps::WaitSchedule w = ps::event_wait_schedule();
  std::vector<double> over;
  for (int asked : {1, 16, 256})
    for (int i = 0; i < 67; ++i) {
      const auto t0 = Clock::now();
      std::this_thread::sleep_for(std::chrono::microseconds(asked));
      over.push_back(std::max(0.0, seconds_since(t0) - 1e-6 * asked));
    }
  std::nth_element(over.begin(), over.begin() + over.size() / 2, over.end());
  const std::string code = fmt::format("the MPI core's wait for an event (ps/mpi_util.cpp) under ASGD_WAIT={}",
                                        w.policy);
  p.wake = perf::Wake{perf::Figure{w.spin_s, "stated", "polls without pause this long: " + code},
                      perf::Figure{w.max_pause_s, "stated", "the longest pause between polls: " + code},
                      measured(over[over.size() / 2],
                               fmt::format("asgd calibrate {}: a sleep of 1, 16 or 256 us less what was asked, "
                                           "median of {}", today(), over.size())),
                      std::nullopt};
  spdlog::info("wake     polls for {:.0f} us, then sleeps up to {:.0f} us; a sleep lasts {:.1f} us longer than asked",
               1e6 * w.spin_s, 1e6 * w.max_pause_s, 1e6 * p.wake->overshoot_s.value);
  if (!ps::doorbells_wanted()) return;
  const int n = 201;
  const std::vector<int> cpus = allowed_cpus();
  p.wake->doorbell_s = measured(doorbell_wake_s(n, cpus),
                                fmt::format("asgd calibrate {}: from a doorbell's ring to the return of a thread "
                                            "sleeping on it (ps/doorbell.hpp) on {}, a ring 200 us into each "
                                            "sleep, median of {}", today(),
                                            cpus.size() >= 2 ? "another CPU" : "the same CPU", n));
  spdlog::info("wake     a doorbell ends a sleep {:.1f} us after its ring", 1e6 * p.wake->doorbell_s->value);
}

// The minibatches are timed in kComputeRounds rounds of `steps` each (at least
// Stepper::kTimedAtLeast_s a round), and the figures are the median of the
// rounds' means and of their coefficients of variation: another process that
// takes the cores for a moment (a daemon starting, a page cache flush) moves
// one round, not the figure, while a spread the steps always have is in every
// round.
constexpr int kComputeRounds = 5;

perf::ComputeEntry compute_entry(const std::string& model, int batch, int threads, int steps, index_t& n_params) {
  Stepper st(model, batch, threads);
  n_params = st.n_params();
  std::vector<double> means, cvs;
  std::size_t timed = 0;
  for (int r = 0; r < kComputeRounds; ++r) {
    const std::vector<double> t = st.times_lasting(r == 0 ? 2 : 0, steps);
    const Stats s = stats(t);
    means.push_back(s.mean);
    cvs.push_back(s.cv);
    timed += t.size();
  }
  const double mean = report::median(means), cv = report::median(cvs);
  perf::ComputeEntry e;
  e.model = model;
  e.batch = batch;
  e.threads = threads;
  const std::string how = fmt::format("asgd calibrate {}: {} rounds of minibatch gradients of {} (forward, loss, "
                                      "backward; {} timed in all, after 2 untimed), {} thread{}, one process",
                                      today(), kComputeRounds, model, timed, threads, threads == 1 ? "" : "s");
  e.seconds = measured(mean, "median of the rounds' means: " + how);
  e.cv = measured(cv, "median of the rounds' standard deviation over mean: " + how);
  spdlog::info("compute  {:<14} batch {:<4} {:8.2f} ms  (cv {:.3f}; rounds {:.2f}..{:.2f} ms)", model, batch,
               1e3 * mean, cv, 1e3 * *std::min_element(means.begin(), means.end()),
               1e3 * *std::max_element(means.begin(), means.end()));
  return e;
}

}  // namespace asgd::cli
