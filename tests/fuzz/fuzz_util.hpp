#pragma once
// Shared by the libFuzzer targets of tests/fuzz (one per reader; docs/TESTING.md
// "Fuzzing"). The readers take file names, so each target writes the fuzzed
// bytes to files in a private temporary folder and calls the reader the way
// `asgd` does.
//
// What counts as a finding (abort, so libFuzzer saves the input):
//  - anything the sanitizers report (ASan, UBSan, LeakSanitizer), a crash;
//  - an exception other than asgd::Error leaving a reader: `asgd` reports
//    asgd::Error as bad input (one line, exit 2) and anything else as an
//    internal failure (exit 1), so bad input must only ever raise asgd::Error;
//  - a broken invariant of what a reader accepted (each target says which).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <typeinfo>

#include "common/error.hpp"

namespace asgd::fuzz {

// Prints the reason and aborts: libFuzzer (and a replay) report it as a crash.
[[noreturn]] inline void bug(const std::string& what) {
  std::fprintf(stderr, "\nFUZZ FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// This process's scratch folder (under $TMPDIR or /tmp), removed at exit.
inline const std::string& work_dir() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/asgd-fuzz-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) bug("cannot create a temporary folder " + pattern);
    static std::string keep;
    keep = pattern;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(keep, ec);
    });
    return pattern;
  }();
  return dir;
}

// A fresh empty folder work_dir()/name (its old content removed).
inline std::string fresh_dir(const std::string& name) {
  const std::string d = work_dir() + "/" + name;
  std::error_code ec;
  std::filesystem::remove_all(d, ec);
  std::filesystem::create_directories(d);
  return d;
}

inline void write_file(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.flush()) bug("cannot write " + path);
}

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs a reader: returns true when it accepted the input, false when it
// refused it with asgd::Error; any other exception is a finding.
// ASGD_FUZZ_VERBOSE=1 in the environment prints each refusal (to see what a
// seed or a replayed input reaches).
template <class F>
bool accepted(const char* reader, F&& fn) {
  try {
    fn();
    return true;
  } catch (const asgd::Error& e) {
    static const bool verbose = std::getenv("ASGD_FUZZ_VERBOSE") != nullptr;
    if (verbose) std::fprintf(stderr, "%s refused: %s\n", reader, e.what());
    return false;
  } catch (const std::exception& e) {
    bug(std::string(reader) + ": an exception other than asgd::Error escaped (" + typeid(e).name() +
        "): " + e.what());
  } catch (...) {
    bug(std::string(reader) + ": a non-std exception escaped");
  }
}

// Splits an input into pieces the way FuzzedDataProvider's
// ConsumeRandomLengthString does (a backslash followed by anything but a
// backslash ends a piece; "\\\\" is one backslash), so that seeds made of
// several files can be written by hand (tests/fuzz/make_seeds.py).
class Pieces {
 public:
  Pieces(const std::uint8_t* data, std::size_t size) : p_(data), n_(size) {}
  std::string next() {
    std::string out;
    while (i_ < n_) {
      char c = static_cast<char>(p_[i_++]);
      if (c == '\\' && i_ < n_) {
        const char d = static_cast<char>(p_[i_++]);
        if (d != '\\') break;
      }
      out += c;
    }
    return out;
  }
  std::string rest() {
    std::string out(reinterpret_cast<const char*>(p_) + i_, n_ - i_);
    i_ = n_;
    return out;
  }
  bool empty() const { return i_ >= n_; }

 private:
  const std::uint8_t* p_;
  std::size_t n_, i_ = 0;
};

}  // namespace asgd::fuzz
