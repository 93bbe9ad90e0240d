#pragma once
// Reports over a suite's results: speedup, convergence error, staleness,
// seeds, the papers' numbers beside ours; regression comparison; validation.
#include <string>
#include <vector>

namespace asgd::report {

struct ReportOptions {
  std::string suite_dir;   // <results>/<suite>: holds runs/*.h5
  std::string out_dir;     // default: <suite_dir>/report
  std::string reference_dir;  // papers' numbers (results/reference); empty: none
  std::string python = "/usr/bin/python3";  // runs tools/plot_report.py for PNG plots
  std::string plot_script;  // path of tools/plot_report.py; empty: no plots
  bool quiet = false;
};

// Writes <out_dir>/report.md and CSV tables (and PNGs via the plot script).
// Returns the number of result files read. Throws asgd::Error on an
// unreadable folder; an unreadable result file is listed in the report as
// failed (never silently dropped).
int write_report(const ReportOptions& opt);

struct CompareOptions {
  double threshold = 0.05;   // relative throughput drop that counts as a regression
  double alpha = 0.05;       // significance level of the rank test
  double error_band = 0.01;  // absolute test-error increase allowed
  // Timings from different CPU models or BLAS kernels are not a regression
  // test: refused (exit 2, with the reason) unless this is set.
  bool across_machines = false;
};
// BASELINE and CANDIDATE: result folders (runs/*.h5 matched by run id minus
// the repetition seed...) or Google Benchmark JSON files. Prints a table;
// returns 1 on a regression, 0 otherwise. Throws asgd::Error on bad input.
int compare(const std::string& baseline, const std::string& candidate, const CompareOptions& opt);

// Checks each file against the results schema; prints "ok <file>" or
// "<file>: <problem>". Returns the number of invalid files.
int validate(const std::vector<std::string>& files);

}  // namespace asgd::report
