#pragma once
// Internals shared by report.cpp, papers.cpp and compare.cpp: the per-run
// facts read from a results file, configuration keys, aggregated cells,
// tables (CSV and Markdown), atomic file writes and running the plot script.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/results.hpp"
#include "report/report.hpp"
#include "report/stats.hpp"

namespace asgd::report::detail {

using nlohmann::json;

// Config fields that do not make a different configuration: the repetition
// seed and per-run bookkeeping.
inline constexpr const char* kNonKeyFields[] = {"seed", "run_id", "results_dir", "threads"};

// What the reports need from one results file. The series (/updates,
// /evals) are reduced on reading and not kept: 1,000 long runs would not fit.
struct RunInfo {
  std::string file;
  bool readable = false;
  std::string error;  // unreadable: the reader's message
  std::string run_id, suite, model, protocol, dataset;
  RunMode mode = RunMode::real;
  RunStatus status = RunStatus::failed;  // of a readable file
  json config;        // the `config` attribute parsed; null if it is not JSON
  std::string key;    // configuration key: config minus kNonKeyFields, dumped
  std::string config_id;  // 8 hex digits of a hash of key
  std::string seed;   // config.seed as JSON text ("" if absent)
  std::string identity;  // copy_identity: equal for copies of one file; "" unreadable or unparsable
  int learners = 0;   // config.learners, else the /learners row count
  std::string n, n_sync, lr_policy, batch;  // config fields as text ("" if absent)
  io::Summary summary;
  double mean_tau = kNaN;
  double smoothed_train_error = kNaN;
  // time_to_train_target at the run's /summary target_error (stats.hpp)
  double time_to_train_target = kNaN;
  double per_gradient = 1;  // minibatches in one pushed gradient: nsync's n_sync
  bool warm = false;        // warm_steps > 0
  std::string merge;        // nsync's merge rule ("sum" when not set)
  // the learning curve (training time, error) and, for virtual nsync runs,
  // the periodic component of the minibatch errors at period n_sync
  std::vector<io::UpdateRecord> updates;
  Periodic sawtooth;
  std::size_t n_updates = 0, n_evals = 0;
  std::vector<std::int64_t> histogram;
  std::vector<io::LearnerTiming> learner_rows;
  // virtual runs: what timed them, "profile NAME (PATH)" or "ideal clock (...)"
  std::string timing_model;
  // where and when it trained (results' `machine`, train_started/finished)
  std::string host, cpu_model, cpu, blas_kernel;  // cpu: short model ("Xeon 8375C")
  std::string backend;                            // Kokkos' host backend ("OpenMP"); "" not recorded
  int threads = 0;                                // threads per rank that ran; 0: not recorded
  double started = kNaN, finished = kNaN;          // Unix seconds; NaN: not recorded
  std::vector<std::string> shared_with;           // run ids whose training overlapped on this host
  bool timing_shared() const { return !shared_with.empty(); }

  bool completed() const { return readable && status == RunStatus::completed; }
  bool diverged() const { return readable && status == RunStatus::diverged; }
  // failed or unreadable
  bool failed() const { return !completed() && !diverged(); }
};

// Config key of a parsed config object; "" when config is not an object.
std::string config_key(const json& config);
// Short stable id of a key (FNV-1a, 8 hex digits).
std::string short_hash(const std::string& text);
// Text of a config field for tables: strings bare, numbers as JSON; "" if absent.
std::string field_text(const json& config, const char* name);

// A config value as text: strings bare, anything else as JSON.
std::string value_text(const json& v);

RunInfo load_run(const std::string& path);

// Measurement integrity (integrity.cpp). The machine and interval of one
// results file into info.
void read_machine(RunInfo& info, const io::RunResult& r);
// Marks real-mode runs whose training intervals overlapped on the same host
// (each one's shared_with lists the others): their timings were shared.
// Virtual runs are left alone (their clock is modelled).
void mark_overlaps(std::vector<RunInfo>& runs);
// "Kokkos OpenMP, 2 threads per rank"; "" when the file does not record both.
std::string execution_label(const RunInfo& r);
// `asgd compare`'s machine check: "CPU model (BLAS kernel K)" of each side's
// real runs or benchmark context (machines), "Kokkos B, T threads per rank"
// (executions); check_same_* refuse (asgd::Error) when the sides differ,
// unless opt.across_machines (then a note). A side without a record is not
// held against the other.
std::set<std::string> machines(const std::vector<RunInfo>& runs);
std::set<std::string> machines(const json& doc);
std::set<std::string> executions(const std::vector<RunInfo>& runs);
std::set<std::string> executions(const json& doc);
void check_same_machine(const std::set<std::string>& base, const std::set<std::string>& cand,
                        const CompareOptions& opt, const char* how = "on", const char* between = "machines");
void check_same_execution(const std::set<std::string>& base, const std::set<std::string>& cand,
                          const CompareOptions& opt);
// The "Measurement conditions" section of report.md: machines, and which
// runs' timings were shared and with whom.
std::string conditions_md(const std::vector<RunInfo>& runs);
std::vector<RunInfo> load_runs(const std::vector<std::string>& files);
// Copies of one results file (readable, the same configuration, seed, host,
// training start and end and summary figures, whatever their run ids: two
// runs do not start and end at the same microsecond) count once: the first in runs
// stays, the others leave runs. Returns one line per copy left out, naming it
// and the file kept. A copy counted again would be a second seed in every
// mean and interval, and a run whose timing overlapped its own.
std::vector<std::string> drop_copies(std::vector<RunInfo>& runs);
// What copies of one results file share and two runs never do: configuration
// key, seed, host, status, training interval and summary figures (exact
// doubles). "" when config is not an object (such a run stands alone).
// drop_copies and `asgd history` compare runs by it.
std::string copy_identity(const io::RunResult& r, const json& config);

// *.h5 files directly in dir, sorted by name. Throws asgd::Error if dir is
// not a readable folder.
std::vector<std::string> list_h5(const std::string& dir);

// A table cell aggregated over seeds: a mean with its 95% interval, nothing
// (blank), or the reason there is no number.
struct Agg {
  enum class State { number, blank, diverged, failed };
  State state = State::blank;
  Interval iv;
  std::string text() const;  // "diverged", "failed" or ""
};
// One run's contribution to an aggregated cell.
struct Value {
  Agg::State state = Agg::State::blank;
  double v = kNaN;
  static Value number(double x) { return {Agg::State::number, x}; }
  static Value of_state(Agg::State s) { return {s, kNaN}; }
};
// Numbers -> mean and interval over them; none: diverged if any value says
// so, else failed if any does, else blank.
Agg aggregate(const std::vector<Value>& values);

// Shortest round-trip text of x; "" for NaN; "inf"/"-inf".
std::string num(double x);
// CSV cells mean, ci_low, ci_high, n of an aggregate (state text in each of
// the first three when not a number; ci blank when n == 1).
std::vector<std::string> agg_csv(const Agg& a);
// Markdown cell: "18.23% [17.95, 18.51]" / "18.23% (n=1)" / "diverged" / "–".
// percent: show fractions as percentages; digits after the point.
std::string agg_md(const Agg& a, bool percent, int digits);

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};
std::string to_csv(const Table& t);
std::string to_markdown(const Table& t);
std::string csv_escape(const std::string& s);

// The GFLOP/s field of a Google Benchmark row ("GFLOP/s" or "gflops", any
// case, whatever it holds: a reader refuses or skips one that is not a
// positive finite number); "" when it has none.
std::string flops_key(const json& row);
// A Google Benchmark row's optional field, checked: def when absent, an
// asgd::Error naming the field and its value when it has another type
// (`"error_occurred": "true"`, `"run_type": 3`).
bool bench_flag(const json& row, const char* key, bool def);
std::string bench_text(const json& row, const char* key, const std::string& def);

// Runs a plot script: python script args..., its output in
// <out_dir>/plot.log (removed when it succeeds), up to 10 minutes. On failure
// problem is the sentence for the report ("`python script` failed (exit
// status 1); its output is in `plot.log`") and warning the line for stderr
// ("plot script failed (exit status 1): <the log's last line>").
struct PlotRun {
  std::string problem, warning;
};
PlotRun run_plot_script(const std::string& python, const std::string& script, const std::vector<std::string>& args,
                        const std::string& out_dir);

// Last max_lines non-empty lines of a text file ("" if unreadable).
std::string tail_lines(const std::string& path, int max_lines);

}  // namespace asgd::report::detail
