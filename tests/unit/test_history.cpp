// asgd history: step detection on synthetic series (a planted 15% step is
// found at its commit; noisy flat series give no step, also over many seeds),
// and the whole command over hand-made Google Benchmark JSON and results files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "io/results.hpp"
#include "report/report.hpp"

namespace fs = std::filesystem;
using asgd::report::detect_steps;
using asgd::report::Step;
using asgd::report::StepOptions;
using nlohmann::json;

namespace {

using Points = std::vector<std::vector<double>>;

// n_points commits of `per` samples each: level 100, multiplied by (1 + step)
// from commit `step_at` on, each sample times (1 + noise * z), z ~ N(0, 1).
Points series(std::mt19937_64& rng, std::size_t n_points, std::size_t per, double noise, std::size_t step_at,
              double step) {
  std::normal_distribution<double> z(0.0, 1.0);
  Points p(n_points);
  for (std::size_t i = 0; i < n_points; ++i)
    for (std::size_t j = 0; j < per; ++j) p[i].push_back(100.0 * (i >= step_at ? 1 + step : 1.0) * (1 + noise * z(rng)));
  return p;
}

TEST(History, PlantedFifteenPercentStepFoundAtItsCommit) {
  std::mt19937_64 rng(20261130);
  const Points p = series(rng, 24, 3, 0.10, 15, -0.15);  // 15% slower from commit 15 on, 10% noise
  const std::vector<Step> steps = detect_steps(p, StepOptions{});
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].at, 15u);
  EXPECT_NEAR(steps[0].change, -0.15, 0.06);
  EXPECT_LT(steps[0].after, steps[0].before);
  EXPECT_LE(steps[0].p, 0.01);
}

TEST(History, NoisyFlatSeriesHasNoStep) {
  std::mt19937_64 rng(7);
  const Points p = series(rng, 24, 3, 0.10, 24, 0.0);  // 10% noise, no step
  EXPECT_TRUE(detect_steps(p, StepOptions{}).empty());
}

// Over many seeds: how often a flat series with 10% noise gets a step (false
// alarms), and where a planted 15% step is found. With 3 samples a commit and
// 10% noise a commit beside the step often looks like the other level, so the
// exact commit is found in about three quarters of the series and within one
// commit in about nine tenths (the figures are printed).
TEST(History, RatesOverManySeeds) {
  constexpr int kSeries = 200;
  int false_alarms = 0, exact = 0, near = 0, missed = 0, stray = 0;
  for (int s = 0; s < kSeries; ++s) {
    std::mt19937_64 rng(1000 + static_cast<std::uint64_t>(s));
    false_alarms += !detect_steps(series(rng, 24, 3, 0.10, 24, 0.0), StepOptions{}).empty();
    const std::vector<Step> steps = detect_steps(series(rng, 24, 3, 0.10, 12, 0.15), StepOptions{});
    bool at = false, close = false, other = false;
    for (const Step& st : steps) {
      at = at || st.at == 12;
      const bool c = st.at >= 11 && st.at <= 13;
      close = close || c;
      other = other || !c;
    }
    exact += at;
    near += close;
    missed += steps.empty();
    stray += other;
  }
  std::printf("flat series with a step: %d/%d; planted 15%% step found at its commit: %d/%d, within one commit: "
              "%d/%d, not found: %d; series with a step elsewhere: %d\n",
              false_alarms, kSeries, exact, kSeries, near, kSeries, missed, stray);
  EXPECT_LE(false_alarms, kSeries / 50);  // at most 2%
  EXPECT_GE(exact, kSeries * 65 / 100);
  EXPECT_GE(near, kSeries * 85 / 100);
  EXPECT_LE(missed, kSeries / 20);
  EXPECT_LE(stray, kSeries * 15 / 100);

  // With 5% noise the commit itself is found nearly always.
  int exact5 = 0;
  for (int s = 0; s < kSeries; ++s) {
    std::mt19937_64 rng(5000 + static_cast<std::uint64_t>(s));
    for (const Step& st : detect_steps(series(rng, 24, 3, 0.05, 12, 0.15), StepOptions{})) exact5 += st.at == 12;
  }
  std::printf("5%% noise: planted step found at its commit: %d/%d\n", exact5, kSeries);
  EXPECT_GE(exact5, kSeries * 95 / 100);
}

TEST(History, StepAtTheNewestCommit) {
  std::mt19937_64 rng(3);
  Points p = series(rng, 15, 3, 0.03, 14, -0.20);
  const std::vector<Step> steps = detect_steps(p, StepOptions{});
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].at, 14u);
}

TEST(History, TwoStepsAndBelowTheMinimumEffect) {
  std::mt19937_64 rng(11);
  Points p = series(rng, 30, 4, 0.02, 30, 0.0);
  for (std::size_t i = 10; i < 30; ++i)
    for (double& v : p[i]) v *= i < 20 ? 0.85 : 1.0;  // down at 10, back up at 20
  const std::vector<Step> steps = detect_steps(p, StepOptions{});
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].at, 10u);
  EXPECT_EQ(steps[1].at, 20u);
  EXPECT_LT(steps[0].change, 0);
  EXPECT_GT(steps[1].change, 0);

  // A clear but small (3%) shift: below the 5% minimum effect, not a step.
  Points q = series(rng, 30, 4, 0.005, 15, -0.03);
  EXPECT_TRUE(detect_steps(q, StepOptions{}).empty());
  StepOptions fine;
  fine.min_effect = 0.02;
  const auto s2 = detect_steps(q, fine);
  ASSERT_EQ(s2.size(), 1u);
  EXPECT_EQ(s2[0].at, 15u);
}

TEST(History, AbsoluteBandAndEdgeCases) {
  StepOptions abs;
  abs.relative = false;
  abs.min_effect = 0.01;
  Points e(20);
  for (std::size_t i = 0; i < 20; ++i) e[i] = {i < 12 ? 0.120 : 0.145, i < 12 ? 0.121 : 0.144};
  const auto steps = detect_steps(e, abs);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].at, 12u);
  EXPECT_NEAR(steps[0].change, 0.024, 1e-3);
  for (auto& v : e)
    for (double& x : v) x = x < 0.13 ? x : x - 0.02;  // now +0.4 points: inside the band
  EXPECT_TRUE(detect_steps(e, abs).empty());

  EXPECT_TRUE(detect_steps({}, StepOptions{}).empty());
  EXPECT_TRUE(detect_steps({{1.0}}, StepOptions{}).empty());
  EXPECT_TRUE(detect_steps({{1.0}, {2.0}}, StepOptions{}).empty());  // one sample a side: never significant
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(detect_steps({{nan, nan}, {nan}}, StepOptions{}).empty());
  StepOptions bad;
  bad.alpha = 0;
  EXPECT_THROW(detect_steps({{1.0}}, bad), asgd::Error);
}

// ---- the whole command ----

class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    static int counter = 0;
    path_ = fs::temp_directory_path() /
            ("asgd_test_history_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    if (!std::getenv("ASGD_HISTORY_TEST_KEEP")) fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string iso(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S+00:00", &tm);
  return buf;
}

// A Google Benchmark file as asgd_micro writes it: 3 repetitions of two
// benchmarks (GFLOP/s and a time-only one), aggregates too.
void write_bench(const fs::path& p, const std::string& commit, std::time_t date, double gflops, double ms,
                 std::mt19937_64& rng) {
  std::normal_distribution<double> z(0.0, 0.02);
  json doc = {{"context",
               {{"date", iso(date)},
                {"asgd_commit", commit},
                {"asgd_cpu_model", "Test CPU"},
                {"asgd_blas_kernel", "Haswell"}}},
              {"benchmarks", json::array()}};
  for (int rep = 0; rep < 3; ++rep) {
    doc["benchmarks"].push_back({{"name", "sgemm/1024/manual_time"},
                                 {"run_name", "sgemm/1024/manual_time"},
                                 {"run_type", "iteration"},
                                 {"real_time", 1.0},
                                 {"time_unit", "ms"},
                                 {"GFLOP/s", gflops * (1 + z(rng))}});
    doc["benchmarks"].push_back({{"name", "copy/manual_time"},
                                 {"run_name", "copy/manual_time"},
                                 {"run_type", "iteration"},
                                 {"real_time", ms * (1 + z(rng))},
                                 {"time_unit", "ms"}});
  }
  doc["benchmarks"].push_back({{"name", "sgemm/1024/manual_time_median"},
                               {"run_name", "sgemm/1024/manual_time"},
                               {"run_type", "aggregate"},
                               {"aggregate_name", "median"},
                               {"real_time", 1.0},
                               {"time_unit", "ms"},
                               {"GFLOP/s", 1.0}});
  fs::create_directories(p.parent_path());
  std::ofstream(p) << doc.dump(1);
}

asgd::io::RunResult result(const std::string& commit, double finished, int learners, double sps, double err) {
  asgd::io::RunResult r;
  r.run_id = "ci-train-L" + std::to_string(learners);
  r.suite = "ci-train";
  r.model = "lenet";
  r.protocol = "hardsync";
  r.git_commit = commit;
  r.host = "testhost";
  r.machine_json = json({{"cpu_model", "Test CPU"}, {"blas", "OpenBLAS 0.3 (core Haswell)"}}).dump();
  r.train_started = finished - 10;
  r.train_finished = finished;
  r.config_json = json({{"model", "lenet"}, {"learners", learners}, {"seed", 1}, {"suite", "ci-train"},
                        {"run_id", r.run_id}, {"results_dir", "/x"}, {"threads", 1}})
                      .dump();
  for (int i = 0; i < 3; ++i) r.updates.push_back({i + 1, 1.0 * (i + 1), learners, 0.0, 0.01, 1.0, 0.5, 64});
  r.evals = {{1.0, 3, 3.0, 0.5, err, 0.1}};
  for (int l = 0; l < learners; ++l) r.learners.push_back({l, 1.0, 0.1, 0.01, 0.01, 3, 192});
  r.summary.final_test_error = err;
  r.summary.best_test_error = err;
  r.summary.samples_per_s = sps;
  r.summary.updates = 3;
  r.summary.epochs = 0.01;
  r.summary.train_time_s = 3;
  r.summary.target_error = 0.1;
  r.summary.time_to_target_s = std::numeric_limits<double>::quiet_NaN();
  return r;
}

std::vector<std::map<std::string, std::string>> read_csv(const fs::path& p) {
  // simple: no quoted commas in the cells these tests look at
  std::ifstream in(p);
  std::string line;
  std::vector<std::string> header;
  std::vector<std::map<std::string, std::string>> rows;
  auto split = [](const std::string& s) {
    std::vector<std::string> out;
    std::string cell;
    bool quoted = false;
    for (char c : s) {
      if (c == '"') quoted = !quoted;
      else if (c == ',' && !quoted) {
        out.push_back(cell);
        cell.clear();
      } else {
        cell += c;
      }
    }
    out.push_back(cell);
    return out;
  };
  if (std::getline(in, line)) header = split(line);
  while (std::getline(in, line)) {
    const auto cells = split(line);
    std::map<std::string, std::string> m;
    for (std::size_t i = 0; i < header.size() && i < cells.size(); ++i) m[header[i]] = cells[i];
    rows.push_back(m);
  }
  return rows;
}

TEST(History, CommandOverStoredCiOutputs) {
  TempDir dir("cmd");
  std::mt19937_64 rng(5);
  const std::time_t t0 = 1'790'000'000;
  // 12 CI runs of 12 commits (one folder each, as stored artifacts); sgemm
  // 20% slower from commit c08 on; the time-only benchmark and the training
  // flat; results files' throughput for L=2 up 20% from c05.
  for (int i = 0; i < 12; ++i) {
    char commit[16];
    std::snprintf(commit, sizeof commit, "c%02d", i);
    const fs::path run = dir.path() / "store" / (std::to_string(i) + "-" + commit);
    write_bench(run / "micro.json", commit, t0 + 3600 * i, i >= 8 ? 80.0 : 100.0, 5.0, rng);
    fs::create_directories(run / "runs");
    fs::create_directories(run / "configs");
    std::ofstream(run / "configs" / "x.json") << R"({"model": "lenet"})";  // not a benchmark file: ignored
    std::normal_distribution<double> z(0.0, 0.02);
    for (int rep = 0; rep < 3; ++rep) {
      asgd::io::write_results((run / "runs" / ("r" + std::to_string(rep) + "-L1.h5")).string(),
                              result(commit, static_cast<double>(t0 + 3600 * i + rep), 1, 1000 * (1 + z(rng)), 0.15));
      asgd::io::write_results((run / "runs" / ("r" + std::to_string(rep) + "-L2.h5")).string(),
                              result(commit, static_cast<double>(t0 + 3600 * i + rep), 2,
                                     (i >= 5 ? 1920 : 1600) * (1 + z(rng)), 0.15));
    }
  }
  asgd::report::HistoryOptions opt;
  opt.inputs = {(dir.path() / "store").string()};
  opt.out_dir = (dir.path() / "out").string();
  opt.quiet = true;
  const asgd::report::HistorySummary sum = asgd::report::history(opt);
  EXPECT_EQ(sum.series, 6);  // 2 benchmarks + 2 configurations x (samples/s, error)
  EXPECT_EQ(sum.points, 6 * 12);
  EXPECT_EQ(sum.steps, 2);
  EXPECT_EQ(sum.regressions, 1);
  EXPECT_EQ(sum.latest_regressions, 0);

  const auto steps = read_csv(dir.path() / "out" / "steps.csv");
  ASSERT_EQ(steps.size(), 2u);
  std::map<std::string, std::map<std::string, std::string>> by_figure;
  for (const auto& s : steps) by_figure[s.at("figure")] = s;
  ASSERT_TRUE(by_figure.count("sgemm/1024/manual_time GFLOP/s"));
  EXPECT_EQ(by_figure["sgemm/1024/manual_time GFLOP/s"]["commit"], "c08");
  EXPECT_EQ(by_figure["sgemm/1024/manual_time GFLOP/s"]["commit_before"], "c07");
  EXPECT_EQ(by_figure["sgemm/1024/manual_time GFLOP/s"]["verdict"], "regression");
  EXPECT_EQ(by_figure["sgemm/1024/manual_time GFLOP/s"]["machine"], "Test CPU (BLAS kernel Haswell)");
  ASSERT_TRUE(by_figure.count("ci-train learners=2: samples/s"));
  EXPECT_EQ(by_figure["ci-train learners=2: samples/s"]["commit"], "c05");
  EXPECT_EQ(by_figure["ci-train learners=2: samples/s"]["verdict"], "improvement");

  const auto hist = read_csv(dir.path() / "out" / "history.csv");
  EXPECT_EQ(hist.size(), 72u);
  int marked = 0;
  for (const auto& r : hist) {
    if (r.at("figure") == "copy/manual_time real_time") {
      EXPECT_EQ(r.at("unit"), "ns");
      EXPECT_EQ(r.at("better"), "lower");
      EXPECT_EQ(r.at("n"), "3");  // iterations, not the aggregate
      EXPECT_NEAR(std::stod(r.at("median")), 5e6, 5e5);
    }
    marked += !r.at("step").empty();
  }
  EXPECT_EQ(marked, 2);
  const std::string md = read_text(dir.path() / "out" / "history.md");
  EXPECT_NE(md.find("sgemm/1024/manual_time GFLOP/s | `c07` → `c08`"), std::string::npos) << md;
  EXPECT_NE(md.find("**regression**"), std::string::npos);
  EXPECT_NE(md.find("12 commits"), std::string::npos) << md;

  // The newest commit regresses: counted for --fail-on-regression.
  const fs::path last = dir.path() / "store" / "12-c12";
  write_bench(last / "micro.json", "c12", t0 + 3600 * 12, 80.0, 7.0, rng);
  const auto sum2 = asgd::report::history(opt);
  EXPECT_EQ(sum2.latest_regressions, 1);  // copy: 5 ms -> 7 ms at c12

  // One point per input: the same commit stored twice stays two points.
  opt.inputs = {(dir.path() / "store" / "11-c11").string(), (dir.path() / "store" / "12-c12").string(),
                (dir.path() / "store" / "11-c11" / "micro.json").string()};
  opt.by_input = true;
  const auto sum3 = asgd::report::history(opt);
  EXPECT_EQ(sum3.points, 2 * 3 + 4 * 1);  // benchmarks: 3 inputs; results: only in the first
}

TEST(History, BadInputs) {
  TempDir dir("bad");
  asgd::report::HistoryOptions opt;
  opt.out_dir = (dir.path() / "out").string();
  opt.quiet = true;
  EXPECT_THROW(asgd::report::history(opt), asgd::Error);  // no inputs
  opt.inputs = {(dir.path() / "missing").string()};
  EXPECT_THROW(asgd::report::history(opt), asgd::Error);
  fs::create_directories(dir.path() / "empty");
  opt.inputs = {(dir.path() / "empty").string()};
  try {
    asgd::report::history(opt);
    ADD_FAILURE() << "no measurements must be refused";
  } catch (const asgd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no measurements"), std::string::npos) << e.what();
  }
  std::ofstream(dir.path() / "x.json") << R"({"model": 1})";
  opt.inputs = {(dir.path() / "x.json").string()};
  EXPECT_THROW(asgd::report::history(opt), asgd::Error);
  std::ofstream(dir.path() / "x.txt") << "hello";
  opt.inputs = {(dir.path() / "x.txt").string()};
  EXPECT_THROW(asgd::report::history(opt), asgd::Error);
  // A corrupt results file is listed as skipped, not fatal when others are usable.
  std::ofstream(dir.path() / "empty" / "broken.h5") << "not hdf5";
  std::mt19937_64 rng(1);
  write_bench(dir.path() / "empty" / "b.json", "c1", 1'790'000'000, 100, 1, rng);
  opt.inputs = {(dir.path() / "empty").string()};
  const auto sum = asgd::report::history(opt);
  EXPECT_EQ(sum.series, 2);
  EXPECT_NE(read_text(dir.path() / "out" / "history.md").find("broken.h5"), std::string::npos);
}

}  // namespace
