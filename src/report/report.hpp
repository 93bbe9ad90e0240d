#pragma once
// Reports over a suite's results: speedup, convergence error, staleness,
// seeds, the papers' numbers beside ours; regression comparison; validation.
#include <cstddef>
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

// The names a run's stored configuration may hold (the command line passes
// the model zoo's and the protocol registry's); an empty list checks nothing.
struct KnownNames {
  std::vector<std::string> models, protocols;
};
// Checks each file against the results schema, and its configuration's model
// and protocol against `known`; prints "ok <file>" or "<file>: <problem>".
// Returns the number of invalid files.
int validate(const std::vector<std::string>& files, const KnownNames& known = {});

// ---- asgd history (history.cpp): per-figure series over commits, steps ----

// Where a series changes level. Binary segmentation over the points of a
// series (in time order; each point: the samples of one commit): within a
// segment, every split leaving at least min_samples samples on each side is a
// candidate; among candidates whose segment medians differ by at least
// min_effect (relative to the earlier side's median when relative, else
// absolute), the one with the smallest two-sided Mann-Whitney p-value is a
// step when that p-value times the number of candidates (Bonferroni) is at
// most alpha; both sides are then searched again. Finally each step is tested
// again between its neighbouring steps (weakest failing one dropped, repeat).
struct StepOptions {
  double min_effect = 0.05;  // smallest change of the medians that counts
  bool relative = true;      // min_effect relative (throughput, time) or absolute (error)
  double alpha = 0.01;       // per series and segment, after the Bonferroni factor
  int min_samples = 2;       // samples on each side of a split, at least
};
struct Step {
  std::size_t at = 0;        // index of the first point of the new level
  double before = 0, after = 0;  // medians of the samples of the neighbouring segments
  double change = 0;         // (after - before) / |before| when relative, else after - before
  double p = 1;              // rank-test p-value times the Bonferroni factor (at most 1)
};
std::vector<Step> detect_steps(const std::vector<std::vector<double>>& points, const StepOptions& opt);

struct HistoryOptions {
  std::vector<std::string> inputs;  // results files (.h5), Google Benchmark JSON, folders of them
  std::string out_dir = "history";  // history.md, history.csv, steps.csv, history-*.png
  double min_effect = 0.05;         // relative, for throughput and time series
  double error_band = 0.01;         // absolute, for test-error series
  double alpha = 0.01;
  int min_samples = 2;
  bool by_input = false;            // one point per input argument instead of per commit
  std::string python = "/usr/bin/python3";
  std::string plot_script;          // tools/ci/plot_history.py; empty: no plots
  bool quiet = false;
};
struct HistorySummary {
  int series = 0, points = 0, steps = 0, regressions = 0;
  int latest_regressions = 0;  // regression steps that start at a series' newest point
};
// Reads every input, builds the series, detects steps, writes the tables (and
// plots). Throws asgd::Error on bad input or when no sample was found.
HistorySummary history(const HistoryOptions& opt);

}  // namespace asgd::report
