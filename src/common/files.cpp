#include "common/files.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/error.hpp"

namespace asgd {

void write_file_atomic(const std::string& path, const std::string& content, bool executable) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(fmt::format("{}: cannot create {}: {}", path, tmp, std::strerror(errno)));
  auto fail = [&](const char* what) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error(fmt::format("{}: cannot {} {}: {}", path, what, tmp, std::strerror(err)));
  };
  const char* p = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write");
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (executable) {
    struct stat st {};
    if (::fstat(fd, &st) != 0 || ::fchmod(fd, (st.st_mode & 07777) | S_IXUSR | S_IXGRP) != 0)
      fail("make executable");
  }
  if (::fsync(fd) != 0) fail("flush");
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(fmt::format("{}: cannot flush {}: {}", path, tmp, std::strerror(err)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(fmt::format("{}: cannot rename {} onto it: {}", path, tmp, std::strerror(err)));
  }
}

}  // namespace asgd
