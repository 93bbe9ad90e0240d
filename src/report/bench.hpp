#pragma once
// Google Benchmark JSON files (--benchmark_out_format=json): the one reader
// that `asgd compare` and `asgd history` share (and tests/fuzz/fuzz_bench).
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/stats.hpp"

namespace asgd::report {

// Largest figure taken (GFLOP/s, or real_time in ns: 31 years): beyond it a
// relative change is no longer finite (1.7e308 against 1 is +inf%).
inline constexpr double kMaxBenchFigure = 1e18;

// A benchmark file's text read: the document and its benchmarks. problem is
// why the text is not a benchmark file ("" when it is), naming the file: not
// valid JSON, nested deeper than kMaxNesting, no "benchmarks" array, none
// in it. Not copyable: series points into doc.
struct BenchFile {
  nlohmann::json doc;
  std::string problem;
  bool json_valid = false;  // the text is JSON (and not too deep)
  // per benchmark (run_name, else name): its iteration rows, or its median
  // (else mean) aggregate when the file holds aggregates only
  std::map<std::string, std::vector<const nlohmann::json*>> series;
  std::map<std::string, std::string> errors;  // error_message of benchmarks that failed and have no rows
  int error_entries = 0;                      // rows with error_occurred
  std::vector<std::string> bad_entries;       // "<file>: benchmark X: field ..." for entries left out

  BenchFile() = default;
  BenchFile(BenchFile&&) = default;
  BenchFile& operator=(BenchFile&&) = default;
  BenchFile(const BenchFile&) = delete;
  BenchFile& operator=(const BenchFile&) = delete;
};
BenchFile read_bench_file(const std::string& bytes, const std::string& path);

// A row's figure: GFLOP/s (flops: the row's "GFLOP/s" or "gflops" key) or
// real_time in ns (time_unit converted). problem names the key and value
// when it is missing, not a number, in an unknown unit, or not a positive
// finite number up to kMaxBenchFigure ("" when good).
struct BenchFigure {
  std::string key;
  double value = kNaN;
  std::string problem;
};
BenchFigure bench_figure(const nlohmann::json& row, bool flops);

// Nanoseconds in one time_unit ("ns", "us", "ms", "s"; "" is ns); NaN for another.
double unit_ns(const std::string& unit);

}  // namespace asgd::report
