#include "io/run_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "common/error.hpp"

namespace asgd::io {

namespace fs = std::filesystem;

namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// `name` is `<stem>.tmp.<digits>` for one of the stems: a write_atomic leftover.
bool leftover_of(const std::string& name, const std::vector<std::string>& stems) {
  const auto at = name.rfind(".tmp.");
  if (at == std::string::npos || !all_digits(std::string_view(name).substr(at + 5))) return false;
  const std::string stem = name.substr(0, at);
  for (const auto& s : stems)
    if (stem == s) return true;
  return false;
}

// `<id>.shard<k>.h5`
bool shard_checkpoint_of(const std::string& stem, const std::string& id) {
  const std::string pre = id + ".shard", post = ".h5";
  return stem.size() > pre.size() + post.size() && stem.compare(0, pre.size(), pre) == 0 &&
         stem.compare(stem.size() - post.size(), post.size(), post) == 0 &&
         all_digits(std::string_view(stem).substr(pre.size(), stem.size() - pre.size() - post.size()));
}

int remove_leftovers(const fs::path& dir, const std::string& id, const std::string& file) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const auto at = name.rfind(".tmp.");
    if (at == std::string::npos) continue;
    const std::string stem = name.substr(0, at);
    if (!leftover_of(name, {file}) &&
        !(shard_checkpoint_of(stem, id) && all_digits(std::string_view(name).substr(at + 5))))
      continue;
    if (fs::remove(e.path(), ec)) ++n;
  }
  return n;
}

}  // namespace

std::string RunLock::lock_path(const std::string& checkpoint) {
  fs::path p(checkpoint);
  p.replace_extension(".lock");
  return p.string();
}

RunLock::RunLock(const std::string& checkpoint, const std::string& results,
                 const std::string& run_id)
    : path_(lock_path(checkpoint)) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd_ < 0)
    throw Error(fmt::format("{}: cannot open the run's lock file: {}", path_, std::strerror(errno)));
  // A requeued Slurm task may start while its killed predecessor is still
  // exiting (and holding the lock): wait for it up to 60 s, then refuse.
  int tries = 0;
  const char* restarts = std::getenv("SLURM_RESTART_COUNT");
  const int max_tries = restarts != nullptr && std::atoi(restarts) > 0 ? 120 : 0;
  while (::flock(fd_, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK && tries < max_tries) {
    ++tries;
    ::usleep(500000);
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::ifstream in(path_);
    std::string owner{std::istreambuf_iterator<char>(in), {}};
    while (!owner.empty() && (owner.back() == '\n' || owner.back() == ' ')) owner.pop_back();
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK)
      throw Error(fmt::format("run {} is being trained by another process ({}; lock {}): not "
                              "starting a second trainer of the same run",
                              run_id, owner.empty() ? "owner unknown" : owner, path_));
    throw Error(fmt::format("{}: cannot lock: {}", path_, std::strerror(err)));
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string me = fmt::format("host {} pid {}\n", host, ::getpid());
  if (::ftruncate(fd_, 0) == 0) {
    const ssize_t w = ::pwrite(fd_, me.data(), me.size(), 0);
    (void)w;  // the owner note is informative only
  }
  const fs::path ck(checkpoint), res(results);
  removed_ = remove_leftovers(ck.parent_path(), run_id, ck.filename().string()) +
             remove_leftovers(res.parent_path(), run_id, res.filename().string());
}

RunLock::~RunLock() {
  if (fd_ >= 0) {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
}

bool RunLock::busy(const std::string& checkpoint) {
  const std::string p = lock_path(checkpoint);
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);  // a shared lock we took (if any) goes with the descriptor
  return held;
}

}  // namespace asgd::io
