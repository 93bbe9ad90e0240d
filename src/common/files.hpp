#pragma once
// Whole-file writes that readers never see half done.
#include <string>

namespace asgd {

// Writes content to path atomically: "<path>.tmp.<pid>", fsync, rename(2),
// so a reader (or a crash) sees the old file or the whole new one. executable
// adds execute permission for owner and group (scripts). Throws asgd::Error
// naming path; the temporary file is removed on failure.
void write_file_atomic(const std::string& path, const std::string& content, bool executable = false);

}  // namespace asgd
