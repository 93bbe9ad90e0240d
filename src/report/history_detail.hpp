#pragma once
// Internal to asgd history: the samples read from results files and Google
// Benchmark JSON (history_inputs.cpp), their series over commits, and the
// step search (steps.cpp) that history.cpp tabulates.
#include <string>
#include <vector>

#include "report/detail.hpp"
#include "report/report.hpp"

namespace asgd::report::detail {

// One measurement of one figure.
struct Sample {
  std::string figure, unit, machine, commit;
  bool higher_is_better = true;
  bool absolute = false;  // test error: steps by an absolute band
  double time = kNaN;     // Unix seconds
  double value = kNaN;
  std::size_t input = 0;  // index of the command-line input it came from
};

struct Inputs {
  std::vector<Sample> samples;
  std::vector<std::string> skipped;  // "file: why"
  std::size_t files = 0;
};

// Every sample of the inputs (files, or folders searched recursively).
// Throws asgd::Error for an input that is neither.
Inputs read_inputs(const std::vector<std::string>& inputs);

// "2026-11-30T12:34:56Z"; "" for NaN.
std::string iso_utc(double t);

// (after - before) / |before| when relative, else after - before; NaN when
// either is not finite (or before is 0, relative).
double effect_of(double before, double after, bool relative);

}  // namespace asgd::report::detail
