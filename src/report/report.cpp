// asgd report: runs.csv, speedup.csv, convergence.csv, staleness.csv and
// report.md for one suite folder, plus PNG plots through tools/plot_report.py.
#include "report/predicted.hpp"
#include "report/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/defaults.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "report/analysis.hpp"
#include "report/config_columns.hpp"
#include "report/detail.hpp"

namespace asgd::report {

namespace fs = std::filesystem;
using namespace detail;

namespace {

constexpr const char* kPlotFiles[] = {"error_vs_time.png", "error_vs_epochs.png", "speedup.png", "staleness.png",
                                      "paper.png"};

// An error-like figure of one run: the number if completed, else its status.
std::string run_error_cell(const RunInfo& r, double x) {
  if (!r.readable) return "failed";
  if (r.diverged()) return "diverged";
  if (!r.completed()) return "failed";
  return num(x);
}

// "exclusive", "shared with a;b" (overlapped on the same host), "modelled"
// (virtual clock) or "unknown" (no interval recorded).
std::string timing_cell(const RunInfo& r) {
  if (r.mode == RunMode::virtual_learners) return r.timing_model.empty() ? "modelled" : "modelled: " + r.timing_model;
  if (r.timing_shared()) return "shared with " + fmt::format("{}", fmt::join(r.shared_with, ";"));
  if (!std::isfinite(r.started) || !std::isfinite(r.finished)) return "unknown";
  return "exclusive";
}

Table runs_table(const std::vector<RunInfo>& runs) {
  Table t;
  t.header = {"run_id", "model", "mode", "protocol", "learners", "n", "n_sync", "lr_policy", "batch", "seed",
              "status", "updates", "epochs", "train_time_s", "samples_per_s", "final_test_error",
              "best_test_error", "time_to_target_s", "mean_tau", "smoothed_train_error", "file", "config",
              "error", "host", "cpu", "blas_kernel", "train_started", "train_finished", "timing", "backend",
              "threads_per_rank"};
  for (const auto& r : runs) {
    if (!r.readable) {
      std::vector<std::string> row(t.header.size());
      row[0] = fs::path(r.file).stem().string();
      row[10] = "unreadable";
      for (int c : {15, 16, 17, 19}) row[static_cast<std::size_t>(c)] = "failed";
      row[20] = r.file;
      row[22] = r.error;
      row[28] = "unknown";
      t.rows.push_back(std::move(row));
      continue;
    }
    const auto& s = r.summary;
    t.rows.push_back({r.run_id, r.model, std::string(to_text(r.mode)), r.protocol, std::to_string(r.learners), r.n, r.n_sync,
                      r.lr_policy, r.batch, r.seed, std::string(to_text(r.status)), std::to_string(s.updates), num(s.epochs),
                      num(s.train_time_s), num(s.samples_per_s), run_error_cell(r, s.final_test_error),
                      run_error_cell(r, s.best_test_error), run_error_cell(r, s.time_to_target_s), num(r.mean_tau),
                      run_error_cell(r, r.smoothed_train_error), r.file, r.config_id, "", r.host, r.cpu,
                      r.blas_kernel, num(r.started), num(r.finished), timing_cell(r), r.backend,
                      r.threads > 0 ? std::to_string(r.threads) : ""});
  }
  return t;
}

std::vector<std::string> config_cells(const ConfigGroup& g) {
  const RunInfo& r = g.rep();
  return {g.id, r.model, std::string(to_text(r.mode)), r.protocol, std::to_string(r.learners), r.n, r.n_sync, r.lr_policy, r.batch,
          std::to_string(g.runs.size()), std::to_string(g.completed), std::to_string(g.diverged),
          std::to_string(g.failed)};
}
const std::vector<std::string> kConfigHeader = {"config", "model", "mode", "protocol", "learners", "n", "n_sync",
                                                "lr_policy", "batch", "seeds", "completed", "diverged", "failed"};

void append(std::vector<std::string>& to, const std::vector<std::string>& from) {
  to.insert(to.end(), from.begin(), from.end());
}
std::vector<std::string> agg_header(const std::string& name) {
  return {name + "_mean", name + "_ci_low", name + "_ci_high", name + "_n"};
}
std::string join(const std::vector<std::string>& v, const char* sep) {
  return fmt::format("{}", fmt::join(v, sep));
}

// A speedup whose runs or baselines trained beside other runs says so in its
// note; where the suite spans machines the note names the CPU.
void mark_shared_speedups(std::vector<ConfigGroup>& groups, const std::vector<RunInfo>& runs) {
  std::map<std::string, const RunInfo*> by_id;
  std::set<std::string> cpus;
  for (const auto& r : runs)
    if (r.readable) {
      by_id[r.run_id] = &r;
      if (r.mode == RunMode::real) cpus.insert(r.cpu);
    }
  for (auto& g : groups) {
    std::set<std::string> shared;
    for (const RunInfo* r : g.runs)
      if (r->timing_shared()) shared.insert(r->run_id);
    for (const auto& b : g.baselines)
      if (auto it = by_id.find(b); it != by_id.end() && it->second->timing_shared()) shared.insert(b);
    std::vector<std::string> notes;
    if (!g.speedup_note.empty()) notes.push_back(g.speedup_note);
    if (g.rep().mode == RunMode::virtual_learners)
      notes.push_back("modelled: " + (g.rep().timing_model.empty() ? "virtual clock" : g.rep().timing_model));
    if (!shared.empty())
      notes.push_back(fmt::format("shared: {} trained beside other runs on the same host, timings not exclusive",
                                  fmt::join(shared, ", ")));
    if (cpus.size() > 1 && g.rep().mode == RunMode::real)
      notes.push_back(fmt::format("machine: {}", g.rep().cpu.empty() ? "unknown" : g.rep().cpu));
    g.speedup_note = fmt::format("{}", fmt::join(notes, "; "));
  }
}

Table speedup_csv(const std::vector<ConfigGroup>& groups) {
  Table t;
  t.header = kConfigHeader;
  for (const char* h : {"time_to_target_speedup", "throughput_speedup", "time_to_target_s", "samples_per_s",
                        "train_time_to_target_speedup", "time_to_train_target_s"})
    append(t.header, agg_header(h));
  append(t.header, {"baseline", "note"});
  for (const auto& g : groups) {
    auto row = config_cells(g);
    for (const Agg* a : {&g.tt_speedup, &g.tp_speedup, &g.time_to_target, &g.samples_per_s, &g.train_tt_speedup,
                         &g.time_to_train_target})
      append(row, agg_csv(*a));
    append(row, {join(g.baselines, ";"), g.speedup_note});
    t.rows.push_back(std::move(row));
  }
  return t;
}

Table convergence_csv(const std::vector<ConfigGroup>& groups) {
  Table t;
  t.header = kConfigHeader;
  append(t.header, agg_header("final_test_error"));
  append(t.header, agg_header("best_test_error"));
  append(t.header, {"gap_to_hardsync", "hardsync_config"});
  append(t.header, agg_header("smoothed_train_error"));
  t.header.push_back("mean_tau");
  for (const auto& g : groups) {
    auto row = config_cells(g);
    append(row, agg_csv(g.final_error));
    append(row, agg_csv(g.best_error));
    append(row, {g.gap.state == Agg::State::number ? num(g.gap.iv.mean) : g.gap.text(), g.hardsync ? g.hardsync->id : ""});
    append(row, agg_csv(g.smoothed_error));
    row.push_back(num(g.mean_tau));
    t.rows.push_back(std::move(row));
  }
  return t;
}

Table staleness_csv(const std::vector<RunInfo>& runs) {
  Table t;
  t.header = {"run_id", "kind", "tau", "count", "learner", "gradients", "samples"};
  for (const auto& r : runs) {
    if (!r.readable) continue;
    for (std::size_t tau = 0; tau < r.histogram.size(); ++tau) {
      t.rows.push_back({r.run_id, "tau", std::to_string(tau), std::to_string(r.histogram[tau]), "", "", ""});
    }
    for (const auto& l : r.learner_rows) {
      t.rows.push_back({r.run_id, "learner", "", "", std::to_string(l.learner), std::to_string(l.gradients),
                        std::to_string(l.samples)});
    }
  }
  return t;
}

std::string speedup_md(const std::vector<ConfigGroup>& groups) {
  Table t;
  const ConfigColumns cols(groups);
  t.header = cols.header();
  append(t.header, {"time-to-target speedup", "training-error time-to-target speedup", "throughput speedup",
                    "time to target (s)", "samples/s", "note"});
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const ConfigGroup& g = groups[i];
    auto row = cols.cells(groups, i);
    append(row, {agg_md(g.tt_speedup, false, 2), agg_md(g.train_tt_speedup, false, 2), agg_md(g.tp_speedup, false, 2),
                 agg_md(g.time_to_target, false, 1), agg_md(g.samples_per_s, false, 1), g.speedup_note});
    t.rows.push_back(std::move(row));
  }
  return to_markdown(t);
}

std::string convergence_md(const std::vector<ConfigGroup>& groups) {
  Table t;
  const ConfigColumns cols(groups);
  t.header = cols.header();
  append(t.header, {"final test error", "best test error", "gap to hardsync", "smoothed train error", "mean tau"});
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const ConfigGroup& g = groups[i];
    auto row = cols.cells(groups, i);
    std::string gap = "–";
    if (g.gap.state == Agg::State::number) gap = fmt::format("{:+.2f} pp", 100 * g.gap.iv.mean);
    else if (g.gap.state != Agg::State::blank) gap = g.gap.text();
    append(row, {agg_md(g.final_error, true, 2), agg_md(g.best_error, true, 2), gap, agg_md(g.smoothed_error, true, 2),
                 std::isfinite(g.mean_tau) ? fmt::format("{:.2f}", g.mean_tau) : "–"});
    t.rows.push_back(std::move(row));
  }
  return to_markdown(t);
}

std::string staleness_md(const std::vector<ConfigGroup>& groups) {
  Table t;
  t.header = {"model", "mode", "protocol", "L", "n", "n_sync", "lr policy", "batch", "gradients", "mean tau",
              "median tau", "95th pct tau", "max tau"};
  const ConfigColumns cols(groups);
  if (cols.any) t.header.insert(t.header.begin() + 8, "other settings");
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const ConfigGroup& g = groups[i];
    const RunInfo& r = g.rep();
    std::int64_t total = 0;
    std::size_t max_tau = 0;
    for (std::size_t tau = 0; tau < g.histogram.size(); ++tau) {
      total += g.histogram[tau];
      if (g.histogram[tau] > 0) max_tau = tau;
    }
    auto q = [&](double p) {
      const double v = histogram_quantile(g.histogram, p);
      return std::isnan(v) ? std::string("–") : fmt::format("{}", v);
    };
    t.rows.push_back({r.model, std::string(to_text(r.mode)), r.protocol, std::to_string(r.learners), r.n, r.n_sync, r.lr_policy, r.batch,
                      std::to_string(total), std::isfinite(g.mean_tau) ? fmt::format("{:.2f}", g.mean_tau) : "–",
                      q(0.5), q(0.95), total > 0 ? std::to_string(max_tau) : "–"});
    if (cols.any) t.rows.back().insert(t.rows.back().begin() + 8, cols.other[i].empty() ? "–" : cols.other[i]);
  }
  return to_markdown(t);
}

// The suite's name: the one most runs name, else the folder's name.
std::string suite_name(const std::vector<RunInfo>& runs, const std::string& suite_dir, std::vector<std::string>& all) {
  std::map<std::string, int> count;
  for (const auto& r : runs)
    if (r.readable) ++count[r.suite];
  std::string best;
  int best_n = 0;
  for (const auto& [name, n] : count) {
    all.push_back(name);
    if (n > best_n) best = name, best_n = n;
  }
  if (!best.empty()) return best;
  return fs::path(suite_dir).lexically_normal().filename().string();
}

constexpr const char* kDefinitions = R"(## Definitions

- **Configuration**: runs whose `config` JSON is identical except for `seed`, `run_id`, `results_dir`
  and `threads` (the repetitions of one setting). `config` in the CSVs is a short hash of it.
- **Mean and 95% interval** over the seeds of a configuration: mean ± t(0.975, k−1)·s/√k with s the
  sample standard deviation of the k values (Student's t quantile from Boost.Math).
  With one value the table says `n=1` and the CSV leaves the interval empty. Only completed runs give
  numbers; diverged and failed seeds are counted in the `diverged`/`failed` columns and named in the
  note. A cell whose runs all diverged reads `diverged` (all failed: `failed`), never a number.
- **Speedup** of a run with L learners, per seed, against the 1-learner run of the same suite, model
  and seed (a completed one preferred, then the same protocol, then the most config fields in common):
  time-to-target speedup T1/TL from `/summary/time_to_target_s` (test error, at the evaluations; empty
  when either run did not reach the target); training-error time-to-target speedup T1/TL from the first
  update at which the smoothed training error (below) is at or below `/summary/target_error`, read once
  400 minibatches have been trained (every update counts, so runs that reach the target between the
  same two evaluations are told apart); throughput speedup (samples/s of L)/(samples/s of 1). Empty
  with the note `no 1-learner baseline` when the suite has none; `diverged`/`failed` when the run or its baseline did.
- **Gap to hardsync**: mean final test error of the configuration minus that of the hardsync
  configuration with the same model, mode and learner count (the one with the most config fields in
  common), in percentage points.
- **Smoothed training error** (per run, then averaged over seeds): the weighted mean of
  `/updates/train_error` over the last 400 minibatches. Each update row stands for `gradients`
  minibatches and is weighted by that number; rows are taken from the last update backwards until the
  weights reach 400, and the row crossing the window's start counts only with the minibatches inside
  the window. Runs with fewer than 400 minibatches in all use every row.
- **Mean tau**: sum of tau·count over sum of count of `/staleness/histogram` (from `/updates/mean_tau`
  weighted by `gradients` when the histogram is empty), averaged over the configuration's runs.
)";

// The report folder (made), after checking the suite folder and listing its
// runs/ into files.
std::string report_folder(const ReportOptions& opt, std::vector<std::string>& files) {
  if (opt.suite_dir.empty()) throw Error("report: no suite folder given");
  std::error_code ec;
  if (!fs::is_directory(opt.suite_dir, ec)) throw Error(opt.suite_dir + ": no such folder");
  const std::string runs_dir = (fs::path(opt.suite_dir) / "runs").string();
  if (!fs::is_directory(runs_dir, ec)) throw Error(opt.suite_dir + ": no runs/ folder (expected runs/*.h5)");
  files = list_h5(runs_dir);
  const std::string out_dir = opt.out_dir.empty() ? (fs::path(opt.suite_dir) / "report").string() : opt.out_dir;
  fs::create_directories(out_dir, ec);
  if (ec || !fs::is_directory(out_dir, ec)) {
    throw Error(fmt::format("{}: cannot create the report folder: {}", out_dir, ec ? ec.message() : "not a folder"));
  }
  return out_dir;
}

struct Counts {
  int completed = 0, diverged = 0, failed = 0, unreadable = 0;
};

Counts count_runs(const std::vector<RunInfo>& runs) {
  Counts n;
  for (const auto& r : runs) {
    n.completed += r.completed();
    n.diverged += r.diverged();
    n.failed += r.failed();
    n.unreadable += !r.readable;
  }
  return n;
}

// What report.md says before its tables, and the tables' sections.
std::string summary_md(const ReportOptions& opt, const std::string& suite, const std::vector<std::string>& suites,
                       const std::vector<RunInfo>& runs, const std::vector<ConfigGroup>& groups, const Counts& n) {
  std::string md = fmt::format("# Report: {}\n\n", suite);
  md += fmt::format("Suite `{}`, folder `{}`.", suite, opt.suite_dir);
  if (suites.size() > 1) md += fmt::format(" Runs name several suites: {}.", join(suites, ", "));
  md += "\n\n";
  md += fmt::format("| runs | completed | diverged | failed | configurations |\n|---|---|---|---|---|\n"
                    "| {} | {} | {} | {}{} | {} |\n\n",
                    runs.size(), n.completed, n.diverged, n.failed,
                    n.unreadable ? fmt::format(" ({} unreadable)", n.unreadable) : "", groups.size());
  if (runs.empty()) md += "No results files in `runs/`.\n\n";

  md += "## Speedup\n\nAgainst the 1-learner run of the same model, seed and mode (real or virtual); mean [95% interval] over seeds. "
        "`–`: not available (target not reached, or no 1-learner baseline). "
        "Table: [speedup.csv](speedup.csv).\n\n";
  md += speedup_md(groups) + "\n";
  md += "## Convergence\n\nTest errors at the last and the best evaluation, mean [95% interval] over seeds; "
        "gap to hardsync in percentage points; training error smoothed over the last 400 minibatches. "
        "Table: [convergence.csv](convergence.csv).\n\n";
  md += convergence_md(groups) + "\n";
  md += "## Staleness\n\nHistograms summed over seeds. Per run and per learner: [staleness.csv](staleness.csv).\n\n";
  md += staleness_md(groups) + "\n";
  return md;
}

// The plots, files and unreadable-files sections, and the definitions.
std::string files_md(const ReportOptions& opt, const std::string& plot_problem, const std::vector<std::string>& pngs,
                     const std::vector<RunInfo>& runs, const std::vector<std::string>& copies, const Counts& n) {
  std::string md = "## Plots\n\n";
  if (opt.plot_script.empty()) md += "Not made (no plot script given).\n";
  if (!plot_problem.empty()) md += "**The plot script failed:** " + plot_problem + ".\n";
  for (const auto& p : pngs) md += fmt::format("![{0}]({0})\n", p);
  md += "\n## Files\n\n"
        "- [runs.csv](runs.csv): one row per results file (unreadable files included, with the reader's error; "
        "a copy of another file left out)\n"
        "- [speedup.csv](speedup.csv), [convergence.csv](convergence.csv): one row per configuration\n"
        "- [staleness.csv](staleness.csv): per run, the staleness histogram (`tau`, `count`) and per-learner "
        "gradient and sample counts\n";
  for (const auto& p : pngs) md += fmt::format("- [{0}]({0})\n", p);
  md += "\n";
  if (!copies.empty()) {
    md += "## Copies counted once\n\n";
    for (const auto& c : copies) md += "- " + c + "\n";
    md += "\n";
  }
  if (n.unreadable) {
    md += "## Unreadable files\n\n";
    for (const auto& r : runs)
      if (!r.readable)  // the reader's message starts with the path: said once
        md += fmt::format("- `{}`: {}\n", r.file,
                          r.error.starts_with(r.file + ": ") ? r.error.substr(r.file.size() + 2) : r.error);
    md += "\n";
  }
  return md + kDefinitions;
}

// Runs the plot script (when given) over a folder cleared of its plots; the
// PNG files the folder then holds, sorted.
std::vector<std::string> make_plots(const ReportOptions& opt, const std::string& suite, const std::string& out_dir,
                                    std::string& problem, std::vector<std::string>& warnings) {
  std::error_code ec;
  if (!opt.plot_script.empty()) {
    for (const char* f : kPlotFiles) fs::remove(fs::path(out_dir) / f, ec);
    std::vector<std::string> args = {opt.suite_dir, out_dir, "--default-merge", kDefaultMerge};
    if (const std::string ref = paper_reference(suite, opt.reference_dir); !ref.empty())
      args.insert(args.end(), {"--reference", ref});
    const PlotRun run = run_plot_script(opt.python, opt.plot_script, args, out_dir);
    problem = run.problem;
    if (!run.warning.empty()) warnings.push_back(run.warning);
  }
  std::vector<std::string> pngs;
  for (const auto& entry : fs::directory_iterator(out_dir, ec))
    if (entry.path().extension() == ".png") pngs.push_back(entry.path().filename().string());
  std::sort(pngs.begin(), pngs.end());
  return pngs;
}

}  // namespace

int write_report(const ReportOptions& opt) {
  std::vector<std::string> files;
  const std::string out_dir = report_folder(opt, files);
  auto out = [&](const char* name) { return (fs::path(out_dir) / name).string(); };

  // every output checked before the first is written: a refused one leaves no mix of new and old tables
  for (const char* f : {"runs.csv", "speedup.csv", "convergence.csv", "staleness.csv", "predicted.csv", "report.md"})
    check_writable(out(f));
  std::vector<RunInfo> runs = load_runs(files);
  const std::vector<std::string> copies = drop_copies(runs);
  mark_overlaps(runs);
  std::vector<ConfigGroup> groups = analyse(runs);
  mark_shared_speedups(groups, runs);

  write_file_atomic(out("runs.csv"), to_csv(runs_table(runs)));
  write_file_atomic(out("speedup.csv"), to_csv(speedup_csv(groups)));
  write_file_atomic(out("convergence.csv"), to_csv(convergence_csv(groups)));
  write_file_atomic(out("staleness.csv"), to_csv(staleness_csv(runs)));
  const std::string predicted = predicted_md(groups);
  if (!predicted.empty()) write_file_atomic(out("predicted.csv"), to_csv(predicted_csv(groups)));

  std::vector<std::string> warnings;
  std::vector<std::string> suites;
  const std::string suite = suite_name(runs, opt.suite_dir, suites);

  // Plots: after the CSVs (the script reads speedup.csv), before report.md (which links them).
  std::string plot_problem;
  const std::vector<std::string> pngs = make_plots(opt, suite, out_dir, plot_problem, warnings);

  const Counts n = count_runs(runs);
  std::string md = summary_md(opt, suite, suites, runs, groups, n);
  md += predicted;
  md += conditions_md(runs);
  md += papers_section(groups, suite, opt.reference_dir, warnings);
  md += files_md(opt, plot_problem, pngs, runs, copies, n);
  write_file_atomic(out("report.md"), md);

  for (const auto& c : copies) std::fprintf(stderr, "warning: %s\n", c.c_str());
  for (const auto& w : warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  for (const auto& r : runs)  // counted as failed runs and listed in report.md: said here too
    if (!r.readable) std::fprintf(stderr, "warning: %s (counted as failed)\n", r.error.c_str());
  if (!opt.quiet)
    fmt::print("report: {} runs ({} completed, {} diverged, {} failed{}) -> {}\n", runs.size(), n.completed,
               n.diverged, n.failed, copies.empty() ? "" : fmt::format("; {} copies left out", copies.size()),
               out("report.md"));
  return static_cast<int>(runs.size());
}

}  // namespace asgd::report
