#include "common/fatal.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstring>

#include "common/error.hpp"
#include "common/text.hpp"

namespace asgd {

namespace {

struct SignalName {
  int sig;
  const char* name;   // SIGSEGV
  const char* short_name;  // SEGV, as ASGD_INJECT_SIGNAL names it
  const char* what;
};

constexpr std::array<SignalName, 5> kFatal = {{
    {SIGSEGV, "SIGSEGV", "SEGV", "invalid memory access, or a stack overflow"},
    {SIGBUS, "SIGBUS", "BUS", "bus error: a mapped file shrank, or a misaligned access"},
    {SIGFPE, "SIGFPE", "FPE", "arithmetic fault"},
    {SIGILL, "SIGILL", "ILL", "illegal instruction: a binary built for another CPU?"},
    {SIGABRT, "SIGABRT", "ABRT", "abort: a failed assertion or a library's abort()"},
}};

// The alternate stack the handler runs on (the thread's own may be the one
// that overflowed). Static: nothing is allocated at fault time.
alignas(16) char g_alt_stack[1 << 16];
// " [rank N]" when a launcher gave this process a rank, set at install time.
char g_rank_text[32] = "";

void put(const char* s) {
  std::size_t left = std::strlen(s);
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, s, left);
    if (n <= 0) return;
    s += n;
    left -= static_cast<std::size_t>(n);
  }
}

// Decimal digits of v (0..999) into buf.
void digits(int v, char* buf) {
  char tmp[8];
  int n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v > 0 && n < 7);
  for (int i = 0; i < n; ++i) buf[i] = tmp[n - 1 - i];
  buf[n] = '\0';
}

extern "C" void on_fatal_signal(int sig) {
  const char* name = "a fatal signal";
  const char* what = "";
  for (const auto& s : kFatal)
    if (s.sig == sig) {
      name = s.name;
      what = s.what;
    }
  char code[8];
  digits(128 + sig, code);
  put("asgd: fatal: signal ");
  put(name);
  put(" (");
  put(what);
  put(")");
  put(g_rank_text);
  put("; exit ");
  put(code);
  put("\n");
  ::_exit(128 + sig);
}

const char* launcher_rank_text() {
  for (const char* name : {"PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"})
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') return v;
  return nullptr;
}

struct Injection {
  int sig = 0;  // 0: none; -1: stack overflow
  std::string point;
};

Injection parse_injection() {
  const char* env = std::getenv("ASGD_INJECT_SIGNAL");
  if (env == nullptr || *env == '\0') return {};
  const std::string v = env;
  const auto colon = v.find(':');
  const std::string sig = v.substr(0, colon), point = colon == std::string::npos ? "" : v.substr(colon + 1);
  Injection in;
  in.point = point;
  if (sig == "STACK") in.sig = -1;
  for (const auto& s : kFatal)
    if (sig == s.short_name) in.sig = s.sig;
  const bool known_point = point == "main" || point == "train" || point == "learner" || point == "server";
  if (in.sig == 0 || !known_point)
    throw Error(fmt::format("ASGD_INJECT_SIGNAL='{}': want SIGNAL:POINT, SIGNAL one of SEGV, BUS, FPE, ILL, ABRT, "
                            "STACK and POINT one of main, train, learner, server",
                            shorten(v)));
  return in;
}

// Deep enough to overflow any stack: each frame holds a kilobyte the
// compiler cannot drop.
[[gnu::noinline]] int recurse(int depth) {
  volatile char frame[1024];
  frame[0] = static_cast<char>(depth);
  if (depth == 1 << 30) return frame[0];
  return recurse(depth + 1) + frame[0];
}

}  // namespace

void install_fatal_handlers() {
  static bool stack_set = false;
  if (!stack_set) {
    stack_t ss{};
    ss.ss_sp = g_alt_stack;
    ss.ss_size = sizeof g_alt_stack;
    ss.ss_flags = 0;
    stack_set = ::sigaltstack(&ss, nullptr) == 0;
    if (const char* r = launcher_rank_text(); r != nullptr && std::strlen(r) < 16) {
      std::strcpy(g_rank_text, " [rank ");
      std::strcat(g_rank_text, r);
      std::strcat(g_rank_text, "]");
    }
  }
  struct sigaction sa {};
  sa.sa_handler = on_fatal_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_ONSTACK | SA_RESETHAND | SA_NODEFER;
  for (const auto& s : kFatal) ::sigaction(s.sig, &sa, nullptr);
}

void prepare_mpi_error_handling() {
  // overwrite 0: a user who set them (to debug UCX itself) keeps theirs
  ::setenv("UCX_HANDLE_ERRORS", "none", 0);
  ::setenv("UCX_ERROR_SIGNALS", "", 0);
}

void check_signal_injection() { (void)parse_injection(); }

void inject_signal(const char* point) {
  static const Injection in = [] {
    try {
      return parse_injection();
    } catch (const Error&) {
      return Injection{};  // check_signal_injection() said so before any work
    }
  }();
  if (in.sig == 0 || in.point != point) return;
  if (in.sig == -1) {
    (void)recurse(0);
    return;
  }
  ::raise(in.sig);
}

}  // namespace asgd
