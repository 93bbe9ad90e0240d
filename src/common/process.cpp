#include "common/process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <thread>

#include "common/error.hpp"

extern char** environ;

namespace asgd {

namespace {

bool starts_with(const char* s, const char* prefix) { return std::strncmp(s, prefix, std::strlen(prefix)) == 0; }

// An environment entry NAME=VALUE that an MPI launcher set for this process.
bool launcher_set(const char* e) {
  for (const char* p : {"PMI_", "PMIX_", "ORTE_", "OPAL_", "HYDI_"})
    if (starts_with(e, p)) return true;
  if (!starts_with(e, "OMPI_")) return false;
  if (starts_with(e, "OMPI_ALLOW_RUN_AS_ROOT")) return false;
  if (!starts_with(e, "OMPI_MCA_")) return true;
  // the MCA settings of Open MPI's singleton start, not the user's
  for (const char* p : {"OMPI_MCA_ess", "OMPI_MCA_pmix", "OMPI_MCA_orte_"})
    if (starts_with(e, p)) return true;
  return false;
}

}  // namespace

pid_t spawn_process(const std::vector<std::string>& args, int out_fd, const SpawnOptions& opt) {
  if (args.empty()) throw Error("cannot start a process: nothing to run");
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;  // built before fork: only async-signal-safe calls in the child
  if (opt.without_launcher_env) {
    for (char** e = environ; *e != nullptr; ++e)
      if (!launcher_set(*e)) envp.push_back(*e);
    envp.push_back(nullptr);
  }
  int ready[2];  // exec failures come back through a close-on-exec pipe
  if (::pipe2(ready, O_CLOEXEC) != 0) throw Error(fmt::format("pipe: {}", std::strerror(errno)));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(ready[0]);
    ::close(ready[1]);
    throw Error(fmt::format("fork: {}", std::strerror(err)));
  }
  if (pid == 0) {  // child: only async-signal-safe calls until exec
    if (opt.own_group) ::setpgid(0, 0);
    if (opt.die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
    }
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(SIGTERM, &dfl, nullptr);
    ::sigaction(SIGINT, &dfl, nullptr);
    const int in = ::open("/dev/null", O_RDONLY);
    ::dup2(in, STDIN_FILENO);
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(out_fd, STDERR_FILENO);
    if (opt.without_launcher_env)
      ::execvpe(argv[0], argv.data(), envp.data());
    else
      ::execvp(argv[0], argv.data());
    const int err = errno;
    const ssize_t w = ::write(ready[1], &err, sizeof err);
    (void)w;
    ::_exit(127);
  }
  if (opt.own_group) ::setpgid(pid, pid);  // also here: no race with a signal sent right after fork
  ::close(ready[1]);
  int err = 0;
  const ssize_t got = ::read(ready[0], &err, sizeof err);
  ::close(ready[0]);
  if (got == static_cast<ssize_t>(sizeof err)) {
    ::waitpid(pid, nullptr, 0);
    throw Error(fmt::format("cannot start {}: {}", args[0], std::strerror(err)));
  }
  return pid;
}

std::string run_process(const std::vector<std::string>& argv, const std::string& log_path, int timeout_s) {
  if (argv.empty()) return "nothing to run";
  const int out = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) return fmt::format("cannot start {}: {}", argv[0], std::strerror(errno));
  pid_t pid = 0;
  try {
    pid = spawn_process(argv, out, {.without_launcher_env = true});
  } catch (const Error& e) {
    ::close(out);
    return e.what();
  }
  ::close(out);

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int status = 0;
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) return fmt::format("cannot wait for {}: {}", argv[0], std::strerror(errno));
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return fmt::format("timed out after {} s", timeout_s);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status))
    return WEXITSTATUS(status) == 0 ? "" : fmt::format("exit status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("killed by signal {}", WTERMSIG(status));
  return "ended abnormally";
}

std::string own_executable() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return !ec && ::access(p.c_str(), X_OK) == 0 ? p.string() : std::string();
}

}  // namespace asgd
