#include "ps/doorbell.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <ctime>
#include <utility>

#include "ps/mpi_util.hpp"

namespace asgd::ps {
namespace {

struct Bells {
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<std::uint32_t*> words;
  std::uint32_t* self = nullptr;
};
Bells g_bells;

long futex(const std::uint32_t* word, int op, std::uint32_t val, const timespec* timeout) {
  // Not FUTEX_PRIVATE_FLAG: the word lives in memory shared between processes.
  return syscall(SYS_futex, word, op, val, timeout, nullptr, 0);
}

}  // namespace

bool doorbells_wanted() { return env_switch("ASGD_DOORBELL"); }

void set_doorbells(MPI_Comm comm, std::vector<std::uint32_t*> bells, int self) {
  if (comm == MPI_COMM_NULL || bells.empty() || self < 0 || self >= static_cast<int>(bells.size())) {
    g_bells = Bells{};
    return;
  }
  g_bells.comm = comm;
  g_bells.self = bells[static_cast<std::size_t>(self)];
  g_bells.words = std::move(bells);
}

void ring(int dest, MPI_Comm comm) noexcept {
  if (comm != g_bells.comm || dest < 0 || dest >= static_cast<int>(g_bells.words.size())) return;
  std::uint32_t* w = g_bells.words[static_cast<std::size_t>(dest)];
  if (w == nullptr || w == g_bells.self) return;
  ring_bell(w);
}

void ring_bell(std::uint32_t* bell) noexcept {
  std::atomic_ref<std::uint32_t>(*bell).fetch_add(1, std::memory_order_seq_cst);
  futex(bell, FUTEX_WAKE, INT_MAX, nullptr);
}

const std::uint32_t* own_bell() noexcept { return g_bells.self; }

std::uint32_t bell_value(const std::uint32_t* bell) noexcept {
  return std::atomic_ref<std::uint32_t>(*const_cast<std::uint32_t*>(bell)).load(std::memory_order_seq_cst);
}

void sleep_on_bell(const std::uint32_t* bell, std::uint32_t seen, double seconds) noexcept {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(seconds);
  ts.tv_nsec = static_cast<long>((seconds - static_cast<double>(ts.tv_sec)) * 1e9);
  futex(bell, FUTEX_WAIT, seen, &ts);  // returns at once when the word is no longer `seen`
}

}  // namespace asgd::ps
