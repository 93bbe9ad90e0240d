#pragma once
// Whole-file writes that readers never see half done; small text files read
// whole, with the checks every input file gets.
#include <cstddef>
#include <string>

namespace asgd {

// Writes content to path atomically: "<path>.tmp.<pid>", fsync, rename(2),
// so a reader (or a crash) sees the old file or the whole new one. executable
// adds execute permission for owner and group (scripts). Throws asgd::Error
// naming path; the temporary file is removed on failure.
// A symbolic link is written through (its target replaced, the link kept);
// a device, folder, socket or pipe at path is refused, never replaced.
void write_file_atomic(const std::string& path, const std::string& content, bool executable = false);
// Throws what write_file_atomic(path, ...) would (a path it must not
// replace, a folder where the temporary file cannot be made), before any
// work: creates and removes the temporary file.
void check_writable(const std::string& path);

// The whole of a small text input file (a suite, site, profile, config or
// benchmark JSON): throws asgd::Error "<shown>: ..." when path is missing, a
// folder ("is a folder, not a <kind>"), not a regular file (a device such as
// /dev/zero, a pipe, which could block forever, a socket), unreadable
// (/proc/self/mem), or larger than max_bytes.
inline constexpr std::size_t kMaxInputFileBytes = std::size_t{64} << 20;
std::string read_text_file(const std::string& path, const std::string& kind, const std::string& shown,
                           std::size_t max_bytes = kMaxInputFileBytes);

}  // namespace asgd
