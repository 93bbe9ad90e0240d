#include "common/files.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/error.hpp"

namespace asgd {

namespace {

// What write_file_atomic replaces for `path`: path itself, or the file a
// symbolic link points to (the link stays); a device, folder, socket or pipe
// there is refused, never replaced (`calibrate -o /dev/null` once made
// /dev/null a plain file).
std::string write_target(const std::string& path) {
  std::error_code ec;
  std::filesystem::path target = path;
  if (std::filesystem::is_symlink(target, ec)) {
    const std::filesystem::path to = std::filesystem::read_symlink(target, ec);
    if (ec) throw Error(fmt::format("{}: cannot read the link: {}", path, ec.message()));
    target = to.is_absolute() ? to : target.parent_path() / to;
  }
  const auto st = std::filesystem::status(target, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)  // a link loop, a path through a file
    throw Error(fmt::format("{}: cannot write there: {}", path, ec.message()));
  if (std::filesystem::exists(st) && !std::filesystem::is_regular_file(st))
    throw Error(fmt::format("{}: is not a regular file ({}): refusing to replace it", path,
                            std::filesystem::is_directory(st) ? "a folder" : "a device, socket or pipe"));
  return target.string();
}

}  // namespace

void check_writable(const std::string& path) {
  const std::string target = write_target(path);
  const std::string tmp = target + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(fmt::format("{}: cannot create {}: {}", path, tmp, std::strerror(errno)));
  ::close(fd);
  ::unlink(tmp.c_str());
}

void write_file_atomic(const std::string& where, const std::string& content, bool executable) {
  const std::string path = write_target(where);
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

std::string read_text_file(const std::string& path, const std::string& kind, const std::string& shown,
                           std::size_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw Error(fmt::format("{}: cannot open {}: {}", shown, kind, std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw Error(fmt::format("{}: is a folder, not a {}", shown, kind));
  if (!S_ISREG(st.st_mode))
    throw Error(fmt::format("{}: is not a regular file (a device, pipe or socket), not a {}", shown, kind));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("{}: cannot open {}: {}", shown, kind, std::strerror(errno)));
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw Error(fmt::format("{}: cannot read {}: {}", shown, kind, std::strerror(err)));
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > max_bytes) {
      ::close(fd);
      throw Error(fmt::format("{}: {} is larger than {} MiB", shown, kind, max_bytes >> 20));
    }
  }
  ::close(fd);
  return text;
}

}  // namespace asgd
