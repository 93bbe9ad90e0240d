// asgd history: per-figure series over commits from results files and Google
// Benchmark JSON (a CI job's stored outputs; history_inputs.cpp), steps found
// by binary segmentation with a rank test and a minimum effect (steps.cpp),
// tables and plots.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "common/error.hpp"
#include "common/files.hpp"
#include "report/history_detail.hpp"

namespace asgd::report {

namespace fs = std::filesystem;
using namespace detail;

namespace {

struct Point {
  std::string commit, label;  // label: the commit, or the input when by_input
  double time = kNaN;
  std::vector<double> samples;
};

struct Series {
  std::string figure, unit, machine;
  bool higher_is_better = true, absolute = false;
  std::vector<Point> points;
  std::vector<Step> steps;
  double median_all = kNaN;
  bool regression(const Step& s) const { return higher_is_better ? s.after < s.before : s.after > s.before; }
};

std::vector<Series> build_series(const Inputs& in, const HistoryOptions& opt) {
  std::map<std::pair<std::string, std::string>, Series> by_key;  // (figure, machine)
  std::map<std::pair<std::string, std::string>, std::map<std::string, Point>> points;
  for (const Sample& s : in.samples) {
    const auto key = std::make_pair(s.figure, s.machine);
    Series& se = by_key[key];
    se.figure = s.figure;
    se.unit = s.unit;
    se.machine = s.machine;
    se.higher_is_better = s.higher_is_better;
    se.absolute = s.absolute;
    const std::string label = opt.by_input ? fmt::format("{}@{}", s.commit, opt.inputs[s.input]) : s.commit;
    Point& p = points[key][label];
    p.commit = s.commit;
    p.label = label;
    if (!(p.time <= s.time)) p.time = s.time;  // the earliest sample (NaN replaced)
    p.samples.push_back(s.value);
  }
  std::vector<Series> out;
  for (auto& [key, se] : by_key) {
    for (auto& [label, p] : points[key]) se.points.push_back(std::move(p));
    std::stable_sort(se.points.begin(), se.points.end(), [](const Point& a, const Point& b) {
      const bool fa = std::isfinite(a.time), fb = std::isfinite(b.time);
      if (fa != fb) return fa;  // unknown times last
      return fa && a.time < b.time;
    });
    std::vector<double> all;
    std::vector<std::vector<double>> values;
    for (const auto& p : se.points) {
      all.insert(all.end(), p.samples.begin(), p.samples.end());
      values.push_back(p.samples);
    }
    se.median_all = median(all);
    StepOptions so;
    so.relative = !se.absolute;
    so.min_effect = se.absolute ? opt.error_band : opt.min_effect;
    so.alpha = opt.alpha;
    so.min_samples = opt.min_samples;
    se.steps = detect_steps(values, so);
    out.push_back(std::move(se));
  }
  return out;
}

std::string short_commit(const std::string& c) { return c.size() > 12 ? c.substr(0, 12) : c; }

// A value for tables: the figure's unit (ns shown in the largest unit that keeps it >= 1).
std::string show(const Series& se, double v) {
  if (!std::isfinite(v)) return "";
  if (se.unit == "error") return fmt::format("{:.2f}%", 100 * v);
  if (se.unit == "ns") {
    if (v >= 1e9) return fmt::format("{:.4g} s", v / 1e9);
    if (v >= 1e6) return fmt::format("{:.4g} ms", v / 1e6);
    if (v >= 1e3) return fmt::format("{:.4g} us", v / 1e3);
    return fmt::format("{:.4g} ns", v);
  }
  return fmt::format("{:.4g} {}", v, se.unit);
}

std::string show_change(const Series& se, double change) {
  return se.absolute ? fmt::format("{:+.2f} pp", 100 * change) : fmt::format("{:+.1f}%", 100 * change);
}


// What the series give: the tables, the Markdown rows and the lines printed.
struct Tabulated {
  HistorySummary sum;
  std::set<std::string> commits, machines;
  Table hist{{"figure", "machine", "unit", "better", "point", "commit", "label", "time", "n", "median", "min", "max",
              "normalised", "level", "step"},
             {}};
  Table steps{{"figure", "machine", "unit", "better", "commit_before", "commit", "time", "before", "after", "change",
               "p_adjusted", "verdict"},
              {}};
  std::string steps_md_rows, series_md_rows;
  std::vector<std::string> lines;  // printed at the end
};

// The segment level of each point: the median of its segment's samples.
std::vector<double> levels(const Series& se) {
  std::vector<double> level(se.points.size(), kNaN);
  std::size_t lo = 0;
  for (std::size_t j = 0; j <= se.steps.size(); ++j) {
    const std::size_t hi = j < se.steps.size() ? se.steps[j].at : se.points.size();
    std::vector<double> seg;
    for (std::size_t i = lo; i < hi; ++i) seg.insert(seg.end(), se.points[i].samples.begin(), se.points[i].samples.end());
    const double m = median(seg);
    for (std::size_t i = lo; i < hi; ++i) level[i] = m;
    lo = hi;
  }
  return level;
}

void tabulate_steps(const Series& se, std::vector<std::string>& step_at, Tabulated& t) {
  for (const Step& st : se.steps) {
    const bool reg = se.regression(st);
    step_at[st.at] = reg ? "regression" : "improvement";
    ++t.sum.steps;
    t.sum.regressions += reg;
    t.sum.latest_regressions += reg && st.at + 1 == se.points.size();
    const Point& before = se.points[st.at - 1];
    const Point& at = se.points[st.at];
    t.steps.rows.push_back({se.figure, se.machine, se.unit, se.higher_is_better ? "higher" : "lower", before.label,
                            at.label, iso_utc(at.time), num(st.before), num(st.after), num(st.change), num(st.p),
                            reg ? "regression" : "improvement"});
    t.lines.push_back(fmt::format("{}: {} at {} ({} -> {}, {}, p {:.2g}){}", reg ? "REGRESSION" : "improvement",
                                  se.figure, at.label, show(se, st.before), show(se, st.after),
                                  show_change(se, st.change), st.p,
                                  t.machines.size() > 1 ? " on " + se.machine : std::string()));
    t.steps_md_rows += fmt::format("| {} | `{}` → `{}` | {} | {} → {} | {} | {:.2g} | {} |\n", se.figure,
                                   short_commit(before.label), short_commit(at.label), iso_utc(at.time),
                                   show(se, st.before), show(se, st.after), show_change(se, st.change), st.p,
                                   reg ? "**regression**" : "improvement");
  }
}

void tabulate_series(const Series& se, Tabulated& t) {
  ++t.sum.series;
  t.sum.points += static_cast<int>(se.points.size());
  const std::vector<double> level = levels(se);
  std::vector<std::string> step_at(se.points.size());
  tabulate_steps(se, step_at, t);
  for (std::size_t i = 0; i < se.points.size(); ++i) {
    const Point& p = se.points[i];
    t.commits.insert(p.commit);
    const auto [mn, mx] = std::minmax_element(p.samples.begin(), p.samples.end());
    const double med = median(p.samples);
    const double norm = se.median_all != 0 ? med / se.median_all : kNaN;
    const double lvl = se.median_all != 0 ? level[i] / se.median_all : kNaN;
    t.hist.rows.push_back({se.figure, se.machine, se.unit, se.higher_is_better ? "higher" : "lower",
                           std::to_string(i), p.commit, p.label, iso_utc(p.time), std::to_string(p.samples.size()),
                           num(med), num(*mn), num(*mx), num(norm), num(lvl), step_at[i]});
  }
  const double first = median(se.points.front().samples), last = median(se.points.back().samples);
  std::string steps_text;
  for (const Step& st : se.steps)
    steps_text += fmt::format("{}{} at `{}`", steps_text.empty() ? "" : ", ", show_change(se, st.change),
                              short_commit(se.points[st.at].label));
  t.series_md_rows += fmt::format("| {} | {} | {} | {} | {} | {} |\n", se.figure, se.points.size(), show(se, first),
                                  show(se, last),
                                  se.points.size() > 1 ? show_change(se, effect_of(first, last, !se.absolute)) : "",
                                  steps_text.empty() ? "none" : steps_text);
}

// Runs the plot script over out_dir (old plots removed first). Returns the
// plots made; problem: what went wrong, "" when nothing did.
std::vector<std::string> make_plots(const HistoryOptions& opt, std::string& problem) {
  std::vector<std::string> pngs;
  std::error_code ec;
  auto each_png = [&](auto fn) {
    for (const auto& entry : fs::directory_iterator(opt.out_dir, ec)) {
      const std::string n = entry.path().filename().string();
      if (n.rfind("history-", 0) == 0 && entry.path().extension() == ".png") fn(entry.path(), n);
    }
  };
  each_png([&](const fs::path& p, const std::string&) { fs::remove(p, ec); });
  const PlotRun run = run_plot_script(opt.python, opt.plot_script, {opt.out_dir}, opt.out_dir);
  problem = run.problem;
  if (!run.warning.empty()) std::fprintf(stderr, "warning: %s\n", run.warning.c_str());
  each_png([&](const fs::path&, const std::string& n) { pngs.push_back(n); });
  std::sort(pngs.begin(), pngs.end());
  return pngs;
}

std::string method_md(const HistoryOptions& opt) {
  return fmt::format(
      "**Method.** Points in time order (a commit's time: its earliest sample; results files: the end of "
      "training, benchmark files: their `date`). Binary segmentation: within a segment every split with at least "
      "{} sample{} on each side is a candidate; a split counts only if the medians of its two sides differ by at "
      "least {} ({}); the candidate with the smallest two-sided Mann-Whitney p-value is a step if that p-value "
      "times the number of candidates (Bonferroni) is at most {}; both sides are searched again, and each step is "
      "re-tested between its neighbours. Values below are medians.\n\n",
      opt.min_samples, opt.min_samples == 1 ? "" : "s", fmt::format("{:g}%", 100 * opt.min_effect),
      fmt::format("relative, throughput and time; test error: {:g} percentage points absolute", 100 * opt.error_band),
      opt.alpha);
}

std::string history_md(const HistoryOptions& opt, const Inputs& in, const std::vector<Series>& series,
                       const Tabulated& t, const std::vector<std::string>& pngs, const std::string& plot_problem) {
  const HistorySummary& sum = t.sum;
  double t0 = kNaN, t1 = kNaN;
  for (const Series& se : series)
    for (const Point& p : se.points) {
      if (!(t0 <= p.time)) t0 = p.time;
      if (!(t1 >= p.time)) t1 = p.time;
    }
  std::string md = "# Benchmark history\n\n";
  md += fmt::format("{} files ({} samples) from {} input{}: {} series over {} commit{}{}, {} to {}.\n\n", in.files,
                    in.samples.size(), opt.inputs.size(), opt.inputs.size() == 1 ? "" : "s", sum.series,
                    t.commits.size(), t.commits.size() == 1 ? "" : "s",
                    opt.by_input ? " (one point per input)" : " (one point per commit)", iso_utc(t0), iso_utc(t1));
  std::string machines;
  for (const auto& m : t.machines) machines += (machines.empty() ? "" : "; ") + m;
  md += "Machines: " + machines + ". A series is one figure on one machine.\n\n";
  md += method_md(opt);
  md += fmt::format("## Steps\n\n{} step{} ({} regression{}, {} at the newest point of its series). Table: "
                    "[steps.csv](steps.csv).\n\n",
                    sum.steps, sum.steps == 1 ? "" : "s", sum.regressions, sum.regressions == 1 ? "" : "s",
                    sum.latest_regressions);
  if (!t.steps_md_rows.empty())
    md += "| figure | commits | time | median before → after | change | p (adjusted) | verdict |\n"
          "|---|---|---|---|---|---|---|\n" +
          t.steps_md_rows + "\n";
  md += "## Series\n\nPer point: [history.csv](history.csv) (median, min, max, normalised to the series median, "
        "segment level).\n\n| figure | points | first | latest | latest vs first | steps |\n|---|---|---|---|---|---|\n" +
        t.series_md_rows + "\n";
  md += "## Plots\n\n";
  if (opt.plot_script.empty()) md += "Not made (no plot script given).\n";
  if (!plot_problem.empty()) md += "**The plot script failed:** " + plot_problem + ".\n";
  for (const auto& p : pngs) md += fmt::format("![{0}]({0})\n", p);
  md += "\n";
  if (!in.skipped.empty()) {
    md += "## Skipped\n\n";
    for (const auto& s : in.skipped) md += "- " + s + "\n";
    md += "\n";
  }
  return md;
}

// The inputs' samples; throws for bad options and when there are none.
Inputs read_checked(const HistoryOptions& opt) {
  if (opt.inputs.empty()) throw Error("history: no inputs given");
  if (!(opt.min_effect >= 0) || !(opt.error_band >= 0) || !(opt.alpha > 0 && opt.alpha < 1) || opt.min_samples < 1)
    throw Error(fmt::format("history: bad options (min effect {} and error band {} must be >= 0, alpha {} in (0, 1), "
                            "min samples {} >= 1)",
                            opt.min_effect, opt.error_band, opt.alpha, opt.min_samples));
  Inputs in = read_inputs(opt.inputs);
  if (in.samples.empty())
    throw Error(fmt::format("history: no measurements in {} (completed results files runs/*.h5 or Google Benchmark "
                            "JSON files){}",
                            opt.inputs.size() == 1 ? opt.inputs.front() : fmt::format("{} inputs", opt.inputs.size()),
                            in.skipped.empty() ? "" : fmt::format("; {} skipped, first: {}", in.skipped.size(),
                                                                  in.skipped.front())));
  return in;
}

}  // namespace

HistorySummary history(const HistoryOptions& opt) {
  const Inputs in = read_checked(opt);
  const std::vector<Series> series = build_series(in, opt);

  std::error_code ec;
  fs::create_directories(opt.out_dir, ec);
  if (ec || !fs::is_directory(opt.out_dir, ec))
    throw Error(fmt::format("{}: cannot create the history folder: {}", opt.out_dir, ec ? ec.message() : "not a folder"));
  auto out = [&](const std::string& name) { return (fs::path(opt.out_dir) / name).string(); };
  for (const char* f : {"history.csv", "steps.csv", "history.md"}) check_writable(out(f));  // none or all

  Tabulated t;
  for (const Series& se : series) t.machines.insert(se.machine);
  for (const Series& se : series) tabulate_series(se, t);
  write_file_atomic(out("history.csv"), to_csv(t.hist));
  write_file_atomic(out("steps.csv"), to_csv(t.steps));

  std::string plot_problem;
  std::vector<std::string> pngs;
  if (!opt.plot_script.empty()) pngs = make_plots(opt, plot_problem);
  write_file_atomic(out("history.md"), history_md(opt, in, series, t, pngs, plot_problem));

  const HistorySummary& sum = t.sum;
  if (!opt.quiet) {
    for (const auto& l : t.lines) std::printf("%s\n", l.c_str());
    std::printf("%s\n", fmt::format("history: {} series, {} points over {} commits: {} steps ({} regressions, {} at "
                                    "the newest point) -> {}",
                                    sum.series, sum.points, t.commits.size(), sum.steps, sum.regressions,
                                    sum.latest_regressions, out("history.md")).c_str());
    if (!in.skipped.empty())
      std::printf("%s\n", fmt::format("{} files or entries skipped (listed in history.md)", in.skipped.size()).c_str());
    std::fflush(stdout);
  }
  return sum;
}

}  // namespace asgd::report
