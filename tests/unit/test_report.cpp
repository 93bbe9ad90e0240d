// Reports over hand-made results files: speedup, intervals, convergence,
// diverged and unreadable runs, compare (folders and Google Benchmark JSON),
// validate, and 1,000 files in one report.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/cpu_name.hpp"
#include "common/error.hpp"
#include "io/results.hpp"
#include "report/bench.hpp"
#include "report/report.hpp"
#include "report/stats.hpp"
#include "report/verdict.hpp"

namespace fs = std::filesystem;
using asgd::io::RunResult;
using nlohmann::json;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kT1 = 12.706204736174696;  // t_{0.975, 1} = tan(0.475 pi), the Cauchy quantile

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_text(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << s;
}

// A fresh folder under the system temp folder, removed at the end of the test
// unless ASGD_REPORT_TEST_KEEP is set (then it stays for inspection and its
// path is printed).
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    static int counter = 0;
    path_ = fs::temp_directory_path() / ("asgd_test_report_" + tag + "_" + std::to_string(::getpid()) + "_" +
                                         std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    if (std::getenv("ASGD_REPORT_TEST_KEEP")) {
      std::printf("kept %s\n", path_.c_str());
      return;
    }
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Minimal CSV reader (quoted fields with "" escapes): rows as header -> cell.
std::vector<std::map<std::string, std::string>> read_csv(const fs::path& p) {
  const std::string s = read_text(p);
  std::vector<std::vector<std::string>> rows(1);
  std::string cell;
  bool quoted = false;
  rows.back().clear();
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (quoted) {
      if (c == '"' && i + 1 < s.size() && s[i + 1] == '"') cell += '"', ++i;
      else if (c == '"') quoted = false;
      else cell += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      rows.back().push_back(cell), cell.clear();
    } else if (c == '\n') {
      rows.back().push_back(cell), cell.clear();
      rows.emplace_back();
    } else {
      cell += c;
    }
  }
  if (rows.back().empty()) rows.pop_back();
  std::vector<std::map<std::string, std::string>> out;
  for (std::size_t r = 1; r < rows.size(); ++r) {
    EXPECT_EQ(rows[r].size(), rows[0].size()) << p << " row " << r;
    std::map<std::string, std::string> m;
    for (std::size_t c = 0; c < rows[0].size() && c < rows[r].size(); ++c) m[rows[0][c]] = rows[r][c];
    out.push_back(std::move(m));
  }
  return out;
}

// Rows whose column `col` equals `value`.
std::vector<std::map<std::string, std::string>> where(const std::vector<std::map<std::string, std::string>>& rows,
                                                      const std::map<std::string, std::string>& match) {
  std::vector<std::map<std::string, std::string>> out;
  for (const auto& r : rows) {
    bool ok = true;
    for (const auto& [k, v] : match) ok = ok && r.count(k) && r.at(k) == v;
    if (ok) out.push_back(r);
  }
  return out;
}

double as_double(const std::string& s) {
  EXPECT_FALSE(s.empty());
  return std::stod(s);
}

struct Spec {
  std::string run_id;
  std::string suite = "s1", model = "lenet", protocol = "hardsync", lr_policy = "constant";
  std::string status = "completed", mode = "real";
  int learners = 1, n = 1, n_sync = 1, batch = 64;
  std::uint64_t seed = 1;
  double samples_per_s = 100, time_to_target_s = kNaN, final_error = 0.2, best_error = 0.2;
};

RunResult make_run(const Spec& s) {
  RunResult r;
  r.run_id = s.run_id;
  r.suite = s.suite;
  r.model = s.model;
  r.protocol = s.protocol;
  r.status = asgd::parse_run_status(s.status).value();
  r.mode = asgd::parse_run_mode(s.mode).value();
  r.git_commit = "test";
  r.host = "testhost";
  json cfg = {{"model", s.model},
              {"dataset", {{"kind", "synthetic"}, {"seed", 1}}},
              {"batch", s.batch},
              {"lr", 0.01},
              {"seed", s.seed},
              {"threads", 1},
              {"results_dir", "/somewhere/" + s.run_id},
              {"suite", s.suite},
              {"run_id", s.run_id},
              {"learners", s.learners},
              {"servers", 1},
              {"protocol", s.protocol},
              {"softsync_n", s.n},
              {"n_sync", s.n_sync},
              {"lr_policy", s.lr_policy},
              {"virtual", s.mode == "virtual"}};
  r.config_json = cfg.dump();
  for (int i = 0; i < 10; ++i) {
    r.updates.push_back({i + 1, 0.5 * (i + 1), s.learners, s.learners > 1 ? 1.0 : 0.0, 0.01, 1.0 - 0.05 * i,
                         0.5 - 0.02 * i, 64L * s.learners});
  }
  const bool diverged = s.status == "diverged";
  r.evals = {{0.5, 5, 2.5, 1.0, 0.5, 0.1}, {1.0, 10, 5.0, diverged ? kNaN : 0.6, diverged ? kNaN : s.final_error, 0.1}};
  if (s.learners > 1) r.staleness_histogram = {5, 3, 2};
  for (int l = 0; l < s.learners; ++l) r.learners.push_back({l, 1.0, 0.1, 0.01, 0.01, 10 / s.learners, 640 / s.learners});
  r.summary.target_error = 0.25;
  r.summary.time_to_target_s = s.time_to_target_s;
  r.summary.final_test_error = diverged ? kNaN : s.final_error;
  r.summary.best_test_error = diverged ? kNaN : s.best_error;
  r.summary.samples_per_s = s.samples_per_s;
  r.summary.updates = 10;
  r.summary.epochs = 1.0;
  r.summary.train_time_s = 5.0;
  return r;
}

void write_run(const fs::path& dir, const Spec& s) {
  fs::create_directories(dir);
  asgd::io::write_results((dir / (s.run_id + ".h5")).string(), make_run(s));
}

std::string source_dir() {
  const char* env = std::getenv("ASGD_SOURCE_DIR");
  return env ? env : ".";
}

// The suite of most tests: two seeds of hardsync L=1 (the baselines), softsync
// and hardsync L=2, a diverged configuration, a model without a 1-learner run
// and a single-seed configuration.
void write_suite(const fs::path& suite_dir, const std::string& suite = "s1") {
  const fs::path runs = suite_dir / "runs";
  auto spec = [&](std::string id, std::string protocol, int learners, std::uint64_t seed) {
    Spec s;
    s.run_id = std::move(id);
    s.suite = suite;
    s.protocol = std::move(protocol);
    s.learners = learners;
    s.seed = seed;
    return s;
  };
  Spec a1 = spec("a-hs-L1-s1", "hardsync", 1, 1), a2 = spec("a-hs-L1-s2", "hardsync", 1, 2);
  a1.samples_per_s = 100, a1.time_to_target_s = 100, a1.final_error = 0.20, a1.best_error = 0.19;
  a2.samples_per_s = 110, a2.time_to_target_s = 120, a2.final_error = 0.22, a2.best_error = 0.21;
  Spec b1 = spec("b-ss-L2-s1", "softsync", 2, 1), b2 = spec("b-ss-L2-s2", "softsync", 2, 2);
  b1.samples_per_s = 180, b1.time_to_target_s = 60, b1.final_error = 0.19, b1.best_error = 0.18;
  b2.samples_per_s = 209, b2.time_to_target_s = 50, b2.final_error = 0.21, b2.best_error = 0.20;
  Spec c1 = spec("c-hs-L2-s1", "hardsync", 2, 1), c2 = spec("c-hs-L2-s2", "hardsync", 2, 2);
  c1.samples_per_s = 190, c1.time_to_target_s = 40, c1.final_error = 0.18;
  c2.samples_per_s = 220, c2.time_to_target_s = kNaN, c2.final_error = 0.20;  // target not reached
  Spec d1 = spec("d-ss-L2-n2-s1", "softsync", 2, 1), d2 = spec("d-ss-L2-n2-s2", "softsync", 2, 2);
  d1.n = d2.n = 2;
  d1.status = d2.status = "diverged";
  Spec e1 = spec("e-other-L4-s1", "softsync", 4, 1);
  e1.model = "othernet";
  e1.samples_per_s = 300;
  Spec f1 = spec("f-ss-L4-s1", "softsync", 4, 1);
  f1.samples_per_s = 350, f1.time_to_target_s = 25, f1.final_error = 0.17;
  for (const Spec& s : {a1, a2, b1, b2, c1, c2, d1, d2, e1, f1}) write_run(runs, s);
}

// ---------------------------------------------------------------- statistics

TEST(ReportStats, TQuantilesAndInterval) {
  EXPECT_NEAR(asgd::report::t_quantile_975(1), kT1, 1e-9);
  EXPECT_NEAR(asgd::report::t_quantile_975(30), 2.04227246, 1e-7);
  // past any table: t_{0.975, 31} = 2.0395134, t_{0.975, 1000} = 1.9623391, the normal 1.959964 in the limit
  EXPECT_NEAR(asgd::report::t_quantile_975(31), 2.0395134, 1e-6);
  EXPECT_NEAR(asgd::report::t_quantile_975(1000), 1.9623391, 1e-6);
  EXPECT_NEAR(asgd::report::t_quantile_975(1000000), 1.959964, 1e-5);
  EXPECT_TRUE(std::isnan(asgd::report::t_quantile_975(0)));
  const auto iv = asgd::report::mean_ci95({2.0, 4.0});
  EXPECT_DOUBLE_EQ(iv.mean, 3.0);
  // s = sqrt(2), half width = t * s / sqrt(2) = t
  EXPECT_NEAR(iv.lo, 3.0 - kT1, 1e-9);
  EXPECT_NEAR(iv.hi, 3.0 + kT1, 1e-9);
  const auto one = asgd::report::mean_ci95({5.0});
  EXPECT_EQ(one.n, 1);
  EXPECT_EQ(one.mean, 5.0);
  EXPECT_TRUE(std::isnan(one.lo));
  // Five values: s = sqrt(2.5), half = 2.7764451052 * sqrt(2.5) / sqrt(5)
  const auto five = asgd::report::mean_ci95({1, 2, 3, 4, 5});
  EXPECT_NEAR(five.hi - 3, 2.7764451052 * std::sqrt(0.5), 1e-10);
}

TEST(ReportStats, WelchIntervalOfADifference) {
  // a = {1, 2, 3}, b = {4, 6, 8, 10}: s_a^2 / 3 = 1/3, s_b^2 / 4 = 5/3, df =
  // (2)^2 / ((1/3)^2 / 2 + (5/3)^2 / 3) = 4.0755; half width t_{0.975, 4.0755}
  // * sqrt(2) = 3.897975 (scipy.stats.t.ppf gives the same quantile)
  const auto d = asgd::report::diff_ci95({1, 2, 3}, {4, 6, 8, 10});
  EXPECT_DOUBLE_EQ(d.mean, -5.0);
  EXPECT_NEAR(d.hi + 5.0, 3.897975451, 1e-6);
  EXPECT_NEAR(d.lo + 5.0, -3.897975451, 1e-6);
  EXPECT_EQ(d.n, 3);
  // no spread on either side: the interval is the difference itself
  const auto flat = asgd::report::diff_ci95({2, 2}, {1, 1, 1});
  EXPECT_DOUBLE_EQ(flat.lo, 1.0);
  EXPECT_DOUBLE_EQ(flat.hi, 1.0);
  // one value on a side: a difference but no interval
  const auto one = asgd::report::diff_ci95({2}, {1, 3});
  EXPECT_DOUBLE_EQ(one.mean, 0.0);
  EXPECT_TRUE(std::isnan(one.lo) && std::isnan(one.hi));
}

// Verdicts beside a paper's claims: by the interval, never by the mean alone.
TEST(ReportStats, VerdictsAreDecidedByTheInterval) {
  using asgd::report::Interval;
  using namespace asgd::report::detail;
  const Shown pp{100, "pp", 2};
  auto iv = [](double mean, double lo, double hi) { return Interval{mean, lo, hi, 3}; };
  // a claimed direction (d > 0)
  EXPECT_EQ(positive(iv(0.02, 0.01, 0.03), "d", pp).v, Verdict::reproduced);
  EXPECT_EQ(positive(iv(-0.02, -0.03, -0.01), "d", pp).v, Verdict::not_reproduced);
  EXPECT_EQ(positive(iv(0.02, -0.01, 0.05), "d", pp).v, Verdict::undecided);  // mean on the claimed side
  EXPECT_EQ(positive(Interval{0.02, kNaN, kNaN, 1}, "d", pp).v, Verdict::undecided);  // one seed
  EXPECT_TRUE(positive(iv(0.02, 0.01, 0.03), "d", pp).why.find("2.00pp [1.00pp, 3.00pp]") != std::string::npos);
  // a claimed value or range
  EXPECT_EQ(overlaps(iv(3.1, 3.0, 3.2), 3.15, 3.25, "s", {}).v, Verdict::reproduced);
  EXPECT_EQ(overlaps(iv(2.9, 2.8, 3.0), 3.15, 3.25, "s", {}).v, Verdict::not_reproduced);
  EXPECT_EQ(overlaps(iv(3.5, 3.4, 3.6), 3.15, 3.25, "s", {}).v, Verdict::not_reproduced);
  EXPECT_EQ(overlaps(iv(25, 24, 26), 21, INFINITY, "s", {}).v, Verdict::reproduced);
  EXPECT_EQ(overlaps(Interval{3.2, kNaN, kNaN, 1}, 3.15, 3.25, "s", {}).v, Verdict::undecided);
  // parts of one claim
  const Judged yes{Verdict::reproduced, "a"}, no{Verdict::not_reproduced, "b"}, open{Verdict::undecided, "c"};
  EXPECT_EQ(both(yes, yes).v, Verdict::reproduced);
  EXPECT_EQ(both(yes, open).v, Verdict::undecided);
  EXPECT_EQ(both(open, no).v, Verdict::not_reproduced);
  EXPECT_EQ(all_of({}).v, Verdict::not_tested);
  EXPECT_EQ(all_of({yes, yes, open}).v, Verdict::undecided);
  EXPECT_EQ(verdict_cell(no), "**not reproduced**: b");
}

TEST(ReportStats, MannWhitney) {
  // Fully separated 5 vs 5: exact two-sided p = 2 / C(10, 5).
  auto t = asgd::report::mann_whitney({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10});
  EXPECT_TRUE(t.exact);
  EXPECT_DOUBLE_EQ(t.u, 0);
  EXPECT_NEAR(t.p, 2.0 / 252, 1e-15);
  EXPECT_NEAR(t.min_p, 2.0 / 252, 1e-15);
  // Interleaved: no evidence.
  t = asgd::report::mann_whitney({1, 3, 5, 7, 9}, {2, 4, 6, 8, 10});
  EXPECT_GT(t.p, 0.5);
  // One sample each: the smallest attainable p is 1.
  t = asgd::report::mann_whitney({1}, {2});
  EXPECT_DOUBLE_EQ(t.min_p, 1.0);
  // Ties: all equal -> p = 1.
  t = asgd::report::mann_whitney({3, 3, 3}, {3, 3, 3});
  EXPECT_DOUBLE_EQ(t.p, 1.0);
  // Large samples: normal approximation, still clearly separated.
  std::vector<double> a, b;
  for (int i = 0; i < 40; ++i) a.push_back(i), b.push_back(i + 100);
  t = asgd::report::mann_whitney(a, b);
  EXPECT_FALSE(t.exact);
  EXPECT_LT(t.p, 1e-10);
  // The normal tail against published values of 1 - Phi(z).
  EXPECT_NEAR(asgd::report::normal_upper_tail(0), 0.5, 1e-16);
  EXPECT_NEAR(asgd::report::normal_upper_tail(1.96), 0.024997895148220435, 1e-15);
  EXPECT_NEAR(asgd::report::normal_upper_tail(3), 0.0013498980316301, 1e-15);
  EXPECT_NEAR(asgd::report::normal_upper_tail(-1), 0.8413447460685429, 1e-15);
  // Overlapping 30 vs 30 without ties: U = 30 * 30 - sum of the overlap pairs,
  // p = 2 (1 - Phi((|U - 450| - 1/2) / sqrt(30 * 30 * 61 / 12))).
  a.clear(), b.clear();
  for (int i = 0; i < 30; ++i) a.push_back(i), b.push_back(i + 15.5);
  t = asgd::report::mann_whitney(a, b);
  EXPECT_FALSE(t.exact);
  const double u = 14 * 15 / 2.0;  // a_i > b_j: a_i = 16 + k exceeds k + 1 of b = 15.5, 16.5, ...
  EXPECT_DOUBLE_EQ(t.u, u);
  EXPECT_NEAR(t.p, std::erfc((450 - u - 0.5) / std::sqrt(900 * 61 / 12.0) / std::sqrt(2.0)), 1e-14);
}

TEST(ReportStats, SmoothedTrainingError) {
  std::vector<asgd::io::UpdateRecord> u;
  auto row = [](std::int32_t gradients, double err) {
    asgd::io::UpdateRecord r;
    r.gradients = gradients;
    r.train_error = err;
    return r;
  };
  // 50 updates of 4 minibatches at 0.6, then 99 updates of 3 minibatches at 0.3.
  for (int i = 0; i < 50; ++i) u.push_back(row(4, 0.6));
  for (int i = 0; i < 99; ++i) u.push_back(row(3, 0.3));
  // Window: 297 minibatches at 0.3, then 103 at 0.6 (25 whole rows and 3 of the 26th).
  EXPECT_NEAR(asgd::report::smoothed_train_error(u), (297 * 0.3 + 103 * 0.6) / 400, 1e-15);
  // Fewer than 400 minibatches: weighted mean of everything.
  std::vector<asgd::io::UpdateRecord> few = {row(1, 0.1), row(3, 0.5)};
  EXPECT_NEAR(asgd::report::smoothed_train_error(few), (0.1 + 3 * 0.5) / 4, 1e-15);
  EXPECT_TRUE(std::isnan(asgd::report::smoothed_train_error({})));
  EXPECT_DOUBLE_EQ(asgd::report::mean_staleness({5, 3, 2}, {}), (3 + 2 * 2) / 10.0);
}

// nsync: an update row is one push of n_sync minibatches; at a time t only
// the rows trained by then count.
TEST(ReportStats, SmoothedTrainingErrorPerMinibatchAndAtATime) {
  std::vector<asgd::io::UpdateRecord> u;
  for (int i = 0; i < 10; ++i) {
    asgd::io::UpdateRecord r;
    r.gradients = 1;
    r.wall_s = i;
    r.train_error = i < 5 ? 0.8 : 0.2;
    u.push_back(r);
  }
  // 100 minibatches per push: the 400-minibatch window is the last 4 pushes
  EXPECT_NEAR(asgd::report::smoothed_train_error(u, 400, 100), 0.2, 1e-15);
  // counted per gradient it would be every push
  EXPECT_NEAR(asgd::report::smoothed_train_error(u, 400, 1), 0.5, 1e-15);
  // at t = 5.5: pushes 2..5 (three at 0.8, one at 0.2)
  EXPECT_NEAR(asgd::report::smoothed_train_error_at(u, 5.5, 400, 100), (3 * 0.8 + 0.2) / 4, 1e-15);
  EXPECT_TRUE(std::isnan(asgd::report::smoothed_train_error_at(u, -1, 400, 100)));
}

// Time to target at every update: the first row at which the 400-minibatch
// window is full and its mean is at or below the target, never earlier.
TEST(ReportStats, TimeToTrainTargetAtEveryUpdate) {
  std::vector<asgd::io::UpdateRecord> u;
  auto add = [&u](std::int64_t gradients, double err) {
    asgd::io::UpdateRecord r;
    r.gradients = gradients;
    r.train_error = err;
    r.wall_s = static_cast<double>(u.size());
    u.push_back(r);
  };
  for (int i = 0; i < 100; ++i) add(4, 0.5);  // 400 minibatches at 0.5: rows 0..99
  for (int i = 0; i < 100; ++i) add(4, 0.1);  // then at 0.1: rows 100..199
  // the window's mean after row 100 + k is 0.5 - 0.4 * 4 (k + 1) / 400 = 0.5 - 0.004 (k + 1):
  // at or below 0.301 from k + 1 >= 49.75, k = 49
  EXPECT_DOUBLE_EQ(asgd::report::time_to_train_target(u, 0.301), 149);
  EXPECT_DOUBLE_EQ(asgd::report::time_to_train_target(u, 0.5), 99);  // the first full window
  EXPECT_DOUBLE_EQ(asgd::report::time_to_train_target(u, 0.1 + 1e-9), 199);
  EXPECT_TRUE(std::isnan(asgd::report::time_to_train_target(u, 0.05)));
  // a window that is not full is never read: one row below the target at the start does not count
  std::vector<asgd::io::UpdateRecord> early = u;
  early[0].train_error = 0;
  EXPECT_DOUBLE_EQ(asgd::report::time_to_train_target(early, 0.301), 149);
  // the row crossing the window's start counts with its minibatches inside: rows of 3 minibatches,
  // the 134th row completes 402: its window holds 1 of the first row's 3 (at 0.9) and 399 at 0
  std::vector<asgd::io::UpdateRecord> part;
  for (int i = 0; i < 134; ++i) {
    asgd::io::UpdateRecord r;
    r.gradients = 3;
    r.train_error = i == 0 ? 0.9 : 0;
    r.wall_s = i;
    part.push_back(r);
  }
  EXPECT_TRUE(std::isnan(asgd::report::time_to_train_target(part, 0.9 / 400 - 1e-12)));
  EXPECT_DOUBLE_EQ(asgd::report::time_to_train_target(part, 0.9 / 400 + 1e-12), 133);
  // per_gradient: pushes of one gradient of 100 minibatches fill the window in 4 pushes
  std::vector<asgd::io::UpdateRecord> pushes(u.begin(), u.begin() + 4);
  for (auto& p : pushes) p.gradients = 1;
  EXPECT_DOUBLE_EQ(asgd::report::time_to_train_target(pushes, 0.5, 400, 100), 3);
  EXPECT_TRUE(std::isnan(asgd::report::time_to_train_target(pushes, 0.5)));  // 4 minibatches: never full
  EXPECT_TRUE(std::isnan(asgd::report::time_to_train_target(u, std::nan(""))));
  EXPECT_TRUE(std::isnan(asgd::report::time_to_train_target(u, 0.3, 0)));
  EXPECT_TRUE(std::isnan(asgd::report::time_to_train_target({}, 0.3)));
}

// The periodic component at period p: a cosine of amplitude A on top of a
// trend that moves from block to block (removed with each block's mean) and
// seeded noise is found at A; without it, only the noise level remains.
TEST(ReportStats, PeriodicComponentAtPeriodNsync) {
  const std::size_t p = 50, blocks = 40;
  const double pi = std::acos(-1.0);
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0, 0.05);
  std::vector<float> with, without;
  for (std::size_t b = 0; b < blocks; ++b)
    for (std::size_t i = 0; i < p; ++i) {
      const double trend = 0.9 - 0.01 * static_cast<double>(b), e = noise(rng);
      with.push_back(static_cast<float>(trend + 0.06 * std::cos(2 * pi * static_cast<double>(i) / p + 0.3) + e));
      without.push_back(static_cast<float>(trend + e));
    }
  const auto a = asgd::report::periodic_component(with, p, 0.5);
  EXPECT_EQ(a.minibatches, p * blocks / 2);
  EXPECT_NEAR(a.amplitude, 0.06, 4 * a.noise);
  EXPECT_NEAR(a.noise, 2 * 0.05 / std::sqrt(1000.0), 0.001);
  const auto b = asgd::report::periodic_component(without, p, 0.5);
  EXPECT_LT(b.amplitude, 4 * b.noise);
  EXPECT_TRUE(std::isnan(asgd::report::periodic_component(with, 1).amplitude));
  EXPECT_TRUE(std::isnan(asgd::report::periodic_component({0.1f}, 5).amplitude));
}

// ---------------------------------------------------------------- write_report

TEST(Report, SpeedupConvergenceAndDiverged) {
  TempDir tmp("suite");
  const fs::path suite = tmp.path() / "s1";
  write_suite(suite);
  // One run with the known smoothing series.
  {
    Spec s;
    s.run_id = "g-smooth";
    s.model = "smoothnet";
    RunResult r = make_run(s);
    r.updates.clear();
    for (int i = 0; i < 50; ++i) r.updates.push_back({i, 0.1 * i, 4, 0, 0.01, 1, 0.6, 256});
    for (int i = 0; i < 99; ++i) r.updates.push_back({50 + i, 5 + 0.1 * i, 3, 0, 0.01, 1, 0.3, 192});
    asgd::io::write_results((suite / "runs" / "g-smooth.h5").string(), r);
  }

  asgd::report::ReportOptions opt;
  opt.suite_dir = suite.string();
  opt.quiet = true;
  EXPECT_EQ(asgd::report::write_report(opt), 11);
  const fs::path out = suite / "report";
  for (const char* f : {"runs.csv", "speedup.csv", "convergence.csv", "staleness.csv", "report.md"}) {
    EXPECT_TRUE(fs::exists(out / f)) << f;
  }
  for (const auto& e : fs::directory_iterator(out)) EXPECT_FALSE(contains(e.path().string(), ".tmp.")) << e.path();

  const auto speedup = read_csv(out / "speedup.csv");
  // Single seed, softsync L=4 against hardsync L=1 seed 1 (no softsync 1-learner run): 350/100.
  auto f = where(speedup, {{"protocol", "softsync"}, {"learners", "4"}, {"model", "lenet"}});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0]["throughput_speedup_mean"], "3.5");
  EXPECT_EQ(f[0]["throughput_speedup_n"], "1");
  EXPECT_EQ(f[0]["throughput_speedup_ci_low"], "");
  EXPECT_EQ(f[0]["time_to_target_speedup_mean"], "4");  // 100 / 25
  EXPECT_EQ(f[0]["baseline"], "a-hs-L1-s1");

  // Two seeds of softsync L=2: throughput 180/100 and 209/110, time to target 100/60 and 120/50.
  auto b = where(speedup, {{"protocol", "softsync"}, {"learners", "2"}, {"n", "1"}});
  ASSERT_EQ(b.size(), 1u);
  {
    const double x1 = 180.0 / 100, x2 = 209.0 / 110;
    EXPECT_NEAR(as_double(b[0]["throughput_speedup_mean"]), (x1 + x2) / 2, 1e-12);
    EXPECT_NEAR(as_double(b[0]["throughput_speedup_ci_low"]), (x1 + x2) / 2 - kT1 * std::fabs(x1 - x2) / 2, 1e-9);
    EXPECT_NEAR(as_double(b[0]["throughput_speedup_ci_high"]), (x1 + x2) / 2 + kT1 * std::fabs(x1 - x2) / 2, 1e-9);
    const double t1 = 100.0 / 60, t2 = 120.0 / 50;
    EXPECT_NEAR(as_double(b[0]["time_to_target_speedup_mean"]), (t1 + t2) / 2, 1e-12);
    EXPECT_NEAR(as_double(b[0]["time_to_target_speedup_ci_low"]), (t1 + t2) / 2 - kT1 * std::fabs(t1 - t2) / 2, 1e-9);
    EXPECT_NEAR(as_double(b[0]["time_to_target_speedup_ci_high"]), (t1 + t2) / 2 + kT1 * std::fabs(t1 - t2) / 2, 1e-9);
    EXPECT_EQ(b[0]["time_to_target_speedup_n"], "2");
  }
  // Hardsync L=2: seed 2 did not reach the target -> time-to-target from seed 1 only.
  auto c = where(speedup, {{"protocol", "hardsync"}, {"learners", "2"}});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0]["time_to_target_speedup_mean"], "2.5");
  EXPECT_EQ(c[0]["time_to_target_speedup_n"], "1");
  EXPECT_EQ(c[0]["throughput_speedup_n"], "2");
  // The 1-learner configuration against itself.
  auto a = where(speedup, {{"protocol", "hardsync"}, {"learners", "1"}, {"model", "lenet"}});
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0]["throughput_speedup_mean"], "1");
  EXPECT_EQ(a[0]["throughput_speedup_ci_low"], "1");
  // Diverged configuration: "diverged" in every speedup cell.
  auto d = where(speedup, {{"protocol", "softsync"}, {"n", "2"}});
  ASSERT_EQ(d.size(), 1u);
  for (const char* col : {"time_to_target_speedup_mean", "time_to_target_speedup_ci_low",
                          "time_to_target_speedup_ci_high", "throughput_speedup_mean", "throughput_speedup_ci_low",
                          "throughput_speedup_ci_high"}) {
    EXPECT_EQ(d[0][col], "diverged") << col;
  }
  EXPECT_EQ(d[0]["diverged"], "2");
  // No 1-learner run of that model: speedup empty, with a note.
  auto e = where(speedup, {{"model", "othernet"}});
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0]["throughput_speedup_mean"], "");
  EXPECT_EQ(e[0]["time_to_target_speedup_mean"], "");
  EXPECT_TRUE(contains(e[0]["note"], "no 1-learner baseline"));

  const auto conv = read_csv(out / "convergence.csv");
  auto cb = where(conv, {{"protocol", "softsync"}, {"learners", "2"}, {"n", "1"}});
  ASSERT_EQ(cb.size(), 1u);
  EXPECT_NEAR(as_double(cb[0]["final_test_error_mean"]), 0.20, 1e-12);
  EXPECT_NEAR(as_double(cb[0]["final_test_error_ci_low"]), 0.20 - kT1 * 0.01, 1e-9);
  EXPECT_NEAR(as_double(cb[0]["best_test_error_mean"]), 0.19, 1e-12);
  EXPECT_NEAR(as_double(cb[0]["gap_to_hardsync"]), 0.20 - 0.19, 1e-12);  // hardsync L=2: mean of 0.18, 0.20
  EXPECT_NEAR(as_double(cb[0]["mean_tau"]), 0.7, 1e-12);                 // histogram {5, 3, 2}
  auto cd = where(conv, {{"protocol", "softsync"}, {"n", "2"}});
  ASSERT_EQ(cd.size(), 1u);
  for (const char* col : {"final_test_error_mean", "final_test_error_ci_low", "best_test_error_mean",
                          "gap_to_hardsync", "smoothed_train_error_mean"}) {
    EXPECT_EQ(cd[0][col], "diverged") << col;
  }
  auto ca = where(conv, {{"protocol", "hardsync"}, {"learners", "1"}, {"model", "lenet"}});
  ASSERT_EQ(ca.size(), 1u);
  EXPECT_EQ(ca[0]["gap_to_hardsync"], "0");

  const auto runs = read_csv(out / "runs.csv");
  ASSERT_EQ(runs.size(), 11u);
  auto g = where(runs, {{"run_id", "g-smooth"}});
  ASSERT_EQ(g.size(), 1u);
  EXPECT_NEAR(as_double(g[0]["smoothed_train_error"]), (297 * 0.3 + 103 * 0.6) / 400, 1e-12);
  for (const auto& r : where(runs, {{"status", "diverged"}})) {
    for (const char* col : {"final_test_error", "best_test_error", "time_to_target_s", "smoothed_train_error"}) {
      EXPECT_EQ(r.at(col), "diverged") << col;
    }
  }
  EXPECT_EQ(where(runs, {{"status", "diverged"}}).size(), 2u);
  auto b1 = where(runs, {{"run_id", "b-ss-L2-s1"}});
  ASSERT_EQ(b1.size(), 1u);
  EXPECT_EQ(b1[0]["samples_per_s"], "180");
  EXPECT_EQ(b1[0]["seed"], "1");
  EXPECT_EQ(b1[0]["mode"], "real");
  EXPECT_EQ(b1[0]["final_test_error"], "0.19");

  const auto stale = read_csv(out / "staleness.csv");
  auto st = where(stale, {{"run_id", "b-ss-L2-s1"}, {"kind", "tau"}});
  ASSERT_EQ(st.size(), 3u);
  EXPECT_EQ(st[1]["tau"], "1");
  EXPECT_EQ(st[1]["count"], "3");
  EXPECT_EQ(where(stale, {{"run_id", "b-ss-L2-s1"}, {"kind", "learner"}}).size(), 2u);

  const std::string md = read_text(out / "report.md");
  EXPECT_TRUE(contains(md, "# Report: s1"));
  EXPECT_TRUE(contains(md, "| 11 | 9 | 2 | 0 |"));  // runs, completed, diverged, failed
  EXPECT_TRUE(contains(md, "(n=1)"));
  EXPECT_TRUE(contains(md, "diverged"));
  EXPECT_TRUE(contains(md, "[speedup.csv](speedup.csv)"));
  EXPECT_FALSE(contains(md, "Beside the paper"));
}

TEST(Report, BaselineDivergedAndMixedSeeds) {
  TempDir tmp("mixed");
  const fs::path runs = tmp.path() / "m" / "runs";
  // Model m2: the only 1-learner run diverged -> the L=2 speedup reads "diverged".
  Spec base{.run_id = "m2-L1", .model = "m2", .status = "diverged"};
  Spec l2{.run_id = "m2-L2", .model = "m2", .protocol = "softsync", .learners = 2, .samples_per_s = 150};
  // Model m3: two seeds at L=2, one diverged -> numbers from the other, with a note.
  Spec m3b1{.run_id = "m3-L1-s1", .model = "m3", .samples_per_s = 100, .time_to_target_s = 10};
  Spec m3b2{.run_id = "m3-L1-s2", .model = "m3", .seed = 2, .samples_per_s = 100, .time_to_target_s = 10};
  Spec m3a{.run_id = "m3-L2-s1", .model = "m3", .protocol = "softsync", .learners = 2, .seed = 1,
           .samples_per_s = 150, .time_to_target_s = 8, .final_error = 0.3};
  Spec m3d{.run_id = "m3-L2-s2", .model = "m3", .protocol = "softsync", .status = "diverged", .learners = 2,
           .seed = 2};
  for (const Spec& s : {base, l2, m3b1, m3b2, m3a, m3d}) write_run(runs, s);
  asgd::report::ReportOptions opt;
  opt.suite_dir = (tmp.path() / "m").string();
  opt.quiet = true;
  EXPECT_EQ(asgd::report::write_report(opt), 6);
  const auto speedup = read_csv(tmp.path() / "m" / "report" / "speedup.csv");
  auto m2 = where(speedup, {{"model", "m2"}, {"learners", "2"}});
  ASSERT_EQ(m2.size(), 1u);
  EXPECT_EQ(m2[0]["throughput_speedup_mean"], "diverged");
  EXPECT_EQ(m2[0]["time_to_target_speedup_mean"], "diverged");
  EXPECT_TRUE(contains(m2[0]["note"], "baseline diverged")) << m2[0]["note"];
  auto m3 = where(speedup, {{"model", "m3"}, {"learners", "2"}});
  ASSERT_EQ(m3.size(), 1u);
  EXPECT_EQ(m3[0]["throughput_speedup_mean"], "1.5");
  EXPECT_EQ(m3[0]["throughput_speedup_n"], "1");
  EXPECT_EQ(m3[0]["time_to_target_speedup_mean"], "1.25");
  EXPECT_EQ(m3[0]["diverged"], "1");
  EXPECT_TRUE(contains(m3[0]["note"], "1 of 2 seeds diverged")) << m3[0]["note"];
  const auto conv = read_csv(tmp.path() / "m" / "report" / "convergence.csv");
  auto c3 = where(conv, {{"model", "m3"}, {"learners", "2"}});
  ASSERT_EQ(c3.size(), 1u);
  EXPECT_EQ(c3[0]["final_test_error_mean"], "0.3");
  EXPECT_EQ(c3[0]["final_test_error_n"], "1");
}

// Two seeds of L = 1 and L = 2 whose test error reaches the target at the
// same evaluation: the evaluations' speedup is 1 for both, the training
// error's at every update tells them apart (4 and 2), and a run whose
// smoothed training error never reaches the target leaves the cell blank.
TEST(Report, TrainingErrorTimeToTargetAtEveryUpdate) {
  TempDir tmp("train-target");
  const fs::path runs = tmp.path() / "t" / "runs";
  fs::create_directories(runs);
  auto run = [&](const std::string& id, int learners, std::uint64_t seed, double dt, double late_error) {
    RunResult r = make_run(Spec{.run_id = id, .learners = learners, .seed = seed, .time_to_target_s = 10});
    r.updates.clear();
    for (int i = 0; i < 800; ++i)  // 400 minibatches at 0.5, then 400 at late_error
      r.updates.push_back({i + 1, dt * i, 1, 0, 0.01, 1, i < 400 ? 0.5 : late_error, 64});
    r.summary.target_error = 0.3005;
    asgd::io::write_results((runs / (id + ".h5")).string(), r);
  };
  // the smoothed error after row 400 + k is 0.5 - 0.001 (k + 1) (0.1 late): at or below the
  // target from k = 199, row 599
  run("L1-s1", 1, 1, 1.0, 0.1);
  run("L1-s2", 1, 2, 1.0, 0.1);
  run("L2-s1", 2, 1, 0.25, 0.1);
  run("L2-s2", 2, 2, 0.5, 0.1);
  asgd::report::ReportOptions opt;
  opt.suite_dir = (tmp.path() / "t").string();
  opt.quiet = true;
  EXPECT_EQ(asgd::report::write_report(opt), 4);
  const auto speedup = read_csv(tmp.path() / "t" / "report" / "speedup.csv");
  auto l2 = where(speedup, {{"learners", "2"}});
  ASSERT_EQ(l2.size(), 1u);
  EXPECT_EQ(l2[0]["time_to_target_speedup_mean"], "1");
  EXPECT_NEAR(as_double(l2[0]["train_time_to_target_speedup_mean"]), 3, 1e-12);  // seeds: 4 and 2
  EXPECT_EQ(l2[0]["train_time_to_target_speedup_n"], "2");
  EXPECT_NEAR(as_double(l2[0]["time_to_train_target_s_mean"]), (599 * 0.25 + 599 * 0.5) / 2, 1e-9);
  auto l1 = where(speedup, {{"learners", "1"}});
  ASSERT_EQ(l1.size(), 1u);
  EXPECT_NEAR(as_double(l1[0]["time_to_train_target_s_mean"]), 599, 1e-9);
  const std::string md = read_text(tmp.path() / "t" / "report" / "report.md");
  EXPECT_TRUE(contains(md, "training-error time-to-target speedup")) << md;

  run("L2-s2", 2, 2, 0.5, 0.4);  // never at or below the target: that seed's cell is blank, the other counts
  EXPECT_EQ(asgd::report::write_report(opt), 4);
  l2 = where(read_csv(tmp.path() / "t" / "report" / "speedup.csv"), {{"learners", "2"}});
  ASSERT_EQ(l2.size(), 1u);
  EXPECT_EQ(l2[0]["train_time_to_target_speedup_mean"], "4");
  EXPECT_EQ(l2[0]["train_time_to_target_speedup_n"], "1");
}

// Configurations that differ only in a field beyond the tables' columns (a
// merge rule, set in one config and left at its default in the other) are
// told apart by an "other settings" column; without such a field, no column.
TEST(Report, OtherSettingsTellRowsApart) {
  TempDir tmp("other");
  const fs::path runs = tmp.path() / "o" / "runs";
  const Spec a{.run_id = "a", .protocol = "nsync", .learners = 2, .n_sync = 2};
  const Spec b{.run_id = "b", .protocol = "nsync", .learners = 2, .n_sync = 2};
  write_run(runs, a);
  RunResult rb = make_run(b);
  json cfg = json::parse(rb.config_json);
  cfg["merge"] = "adagrad";
  rb.config_json = cfg.dump();
  asgd::io::write_results((runs / "b.h5").string(), rb);
  asgd::report::ReportOptions opt;
  opt.suite_dir = (tmp.path() / "o").string();
  opt.quiet = true;
  ASSERT_EQ(asgd::report::write_report(opt), 2);
  std::ifstream in(tmp.path() / "o" / "report" / "report.md");
  const std::string md{std::istreambuf_iterator<char>(in), {}};
  EXPECT_TRUE(contains(md, "| other settings |")) << md;
  EXPECT_TRUE(contains(md, "| merge=adagrad |")) << md;
  EXPECT_EQ(md.find("merge=sum"), std::string::npos);  // absent: the default, shown as "–"

  TempDir same("same");
  write_run(same.path() / "s" / "runs", a);
  write_run(same.path() / "s" / "runs", Spec{.run_id = "c", .protocol = "nsync", .learners = 4, .n_sync = 2});
  opt.suite_dir = (same.path() / "s").string();
  ASSERT_EQ(asgd::report::write_report(opt), 2);
  std::ifstream in2(same.path() / "s" / "report" / "report.md");
  const std::string md2{std::istreambuf_iterator<char>(in2), {}};
  EXPECT_FALSE(contains(md2, "other settings")) << md2;
}

// A copy of a results file (a backup beside it, two folders given that hold
// the same file) is one run, not a second seed: it leaves the means, the
// intervals and runs.csv, and report.md names it. A file with the same run id
// but another seed is a run of its own.
TEST(Report, CopiesOfAFileCountOnce) {
  TempDir tmp("copies");
  const fs::path runs = tmp.path() / "c" / "runs";
  write_run(runs, Spec{.run_id = "a", .seed = 1, .final_error = 0.2});
  write_run(runs, Spec{.run_id = "b", .seed = 2, .final_error = 0.4});
  fs::copy_file(runs / "a.h5", runs / "a-copy.h5");
  asgd::io::write_results((runs / "a-other.h5").string(), make_run(Spec{.run_id = "a", .seed = 3, .final_error = 0.3}));
  asgd::report::ReportOptions opt;
  opt.suite_dir = (tmp.path() / "c").string();
  opt.quiet = true;
  ASSERT_EQ(asgd::report::write_report(opt), 3);
  const fs::path out = tmp.path() / "c" / "report";
  const auto conv = read_csv(out / "convergence.csv");
  ASSERT_EQ(conv.size(), 1u);
  EXPECT_EQ(conv[0].at("final_test_error_n"), "3");
  EXPECT_NEAR(std::stod(conv[0].at("final_test_error_mean")), 0.3, 1e-12);
  EXPECT_EQ(read_csv(out / "runs.csv").size(), 3u);
  const std::string md = read_text(out / "report.md");
  EXPECT_TRUE(contains(md, "## Copies counted once")) << md;
  const std::string copy = (runs / "a.h5").string() + ": a copy of " + (runs / "a-copy.h5").string();
  EXPECT_TRUE(contains(md, copy)) << md;
  EXPECT_FALSE(contains(md, "a-other.h5: a copy")) << md;
}

// A speedup standing on some seeds only says how many lack a baseline (it
// said "no 1-learner baseline" beside a number); a virtual run is never
// measured against a real baseline.
TEST(Report, PartialAndOtherModeBaselinesAreSaid) {
  TempDir tmp("partial");
  const fs::path runs = tmp.path() / "p" / "runs";
  write_run(runs, Spec{.run_id = "b2", .seed = 2});
  write_run(runs, Spec{.run_id = "l2s1", .learners = 2, .seed = 1});
  write_run(runs, Spec{.run_id = "l2s2", .learners = 2, .seed = 2});
  write_run(runs, Spec{.run_id = "v2s2", .mode = "virtual", .learners = 2, .seed = 2});
  asgd::report::ReportOptions opt;
  opt.suite_dir = (tmp.path() / "p").string();
  opt.quiet = true;
  ASSERT_EQ(asgd::report::write_report(opt), 4);
  const auto sp = read_csv(tmp.path() / "p" / "report" / "speedup.csv");
  const auto real2 = where(sp, {{"learners", "2"}, {"mode", "real"}});
  ASSERT_EQ(real2.size(), 1u);
  EXPECT_EQ(real2[0].at("throughput_speedup_mean"), "1");
  EXPECT_TRUE(contains(real2[0].at("note"), "1 of 2 seeds without a 1-learner baseline")) << real2[0].at("note");
  const auto virt2 = where(sp, {{"learners", "2"}, {"mode", "virtual"}});
  ASSERT_EQ(virt2.size(), 1u);
  EXPECT_EQ(virt2[0].at("throughput_speedup_mean"), "");
  EXPECT_TRUE(contains(virt2[0].at("note"), "no 1-learner baseline")) << virt2[0].at("note");
}

TEST(Report, UnreadableFilesAreListedNotFatal) {
  TempDir tmp("bad");
  const fs::path suite = tmp.path() / "bad";
  write_suite(suite);
  const fs::path runs = suite / "runs";
  // Random bytes, a truncated copy of a good file, a checkpoint, a newer schema.
  std::mt19937 rng(7);
  std::string noise(4096, '\0');
  for (auto& ch : noise) ch = static_cast<char>(rng());
  write_text(runs / "x1-noise.h5", noise);
  const std::string good = read_text(runs / "a-hs-L1-s1.h5");
  write_text(runs / "x2-truncated.h5", good.substr(0, good.size() / 2));
  asgd::io::Checkpoint ck;
  ck.run_id = "ck";
  ck.model = "lenet";
  ck.config_hash = "h";
  ck.n_params = 4;
  ck.weights = {1, 2, 3, 4};
  ck.momentum = {0, 0, 0, 0};
  ck.cursors = {{0, 0}};
  ck.rng_state = {1};
  ck.progress = make_run(Spec{.run_id = "ck"});
  asgd::io::write_checkpoint((runs / "x3-checkpoint.h5").string(), ck);
  RunResult newer = make_run(Spec{.run_id = "x4"});
  newer.schema_version = 2;
  asgd::io::write_results((runs / "x4-newer.h5").string(), newer);

  asgd::report::ReportOptions opt;
  opt.suite_dir = suite.string();
  opt.quiet = true;
  EXPECT_EQ(asgd::report::write_report(opt), 14);
  const auto rows = read_csv(suite / "report" / "runs.csv");
  const auto bad = where(rows, {{"status", "unreadable"}});
  ASSERT_EQ(bad.size(), 4u);
  for (const auto& r : bad) {
    EXPECT_FALSE(r.at("error").empty());
    EXPECT_EQ(r.at("final_test_error"), "failed");
  }
  EXPECT_TRUE(contains(where(rows, {{"run_id", "x1-noise"}})[0]["error"], "not a readable HDF5 file"));
  EXPECT_TRUE(contains(where(rows, {{"run_id", "x3-checkpoint"}})[0]["error"], "checkpoint"));
  EXPECT_TRUE(contains(where(rows, {{"run_id", "x4-newer"}})[0]["error"], "schema version 2"));
  const std::string md = read_text(suite / "report" / "report.md");
  EXPECT_TRUE(contains(md, "## Unreadable files"));
  EXPECT_TRUE(contains(md, "(4 unreadable)"));

  // validate: one line each, the file named once, the count of invalid ones returned.
  std::vector<std::string> files = {(runs / "a-hs-L1-s1.h5").string(), (runs / "x1-noise.h5").string(),
                                    (runs / "x2-truncated.h5").string(), (runs / "x3-checkpoint.h5").string(),
                                    (runs / "x4-newer.h5").string(), (runs / "missing.h5").string()};
  testing::internal::CaptureStdout();
  const int invalid = asgd::report::validate(files);
  const std::string text = testing::internal::GetCapturedStdout();
  EXPECT_EQ(invalid, 5);
  EXPECT_TRUE(contains(text, "ok " + files[0] + " (completed, 10 updates)\n")) << text;
  for (std::size_t i = 1; i < files.size(); ++i) {
    EXPECT_TRUE(contains(text, "\n" + files[i] + ": ")) << text;
    EXPECT_FALSE(contains(text, files[i] + ": " + files[i])) << text;
  }
  std::printf("%s", text.c_str());
}

TEST(Report, BadFolders) {
  TempDir tmp("folders");
  asgd::report::ReportOptions opt;
  opt.quiet = true;
  opt.suite_dir = (tmp.path() / "nope").string();
  EXPECT_THROW(asgd::report::write_report(opt), asgd::Error);
  opt.suite_dir = tmp.path().string();  // no runs/
  EXPECT_THROW(asgd::report::write_report(opt), asgd::Error);
  fs::create_directories(tmp.path() / "runs");
  EXPECT_EQ(asgd::report::write_report(opt), 0);  // empty suite: a report saying so
  EXPECT_TRUE(contains(read_text(tmp.path() / "report" / "report.md"), "No results files"));
}

TEST(Report, PlotScriptFailureIsNoted) {
  TempDir tmp("plotfail");
  const fs::path suite = tmp.path() / "s1";
  write_suite(suite);
  asgd::report::ReportOptions opt;
  opt.suite_dir = suite.string();
  opt.quiet = true;
  opt.plot_script = (tmp.path() / "no_such_script.py").string();
  testing::internal::CaptureStderr();
  EXPECT_EQ(asgd::report::write_report(opt), 10);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(err, "warning: plot script failed")) << err;
  EXPECT_TRUE(contains(read_text(suite / "report" / "report.md"), "The plot script failed"));
  // A python that does not exist: same, no crash.
  opt.python = (tmp.path() / "no-python").string();
  testing::internal::CaptureStderr();
  EXPECT_EQ(asgd::report::write_report(opt), 10);
  EXPECT_TRUE(contains(testing::internal::GetCapturedStderr(), "warning: plot script failed"));
}

// The plots: tools/plot_report.py through /usr/bin/python3 must make every
// PNG; its failure fails this test. Without matplotlib/h5py/numpy the plots
// cannot be made here, and the test says so as a skip (never a pass).
TEST(Report, PlotsAreMade) {
  const std::string python = "/usr/bin/python3";
  if (std::system((python + " -c 'import matplotlib, h5py, numpy' >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << python << " cannot import matplotlib, h5py and numpy (tools/setup.sh installs them): "
                 << "the plots cannot be made here";
  TempDir tmp("plots");
  const fs::path suite = tmp.path() / "s1";
  write_suite(suite);
  asgd::report::ReportOptions opt;
  opt.suite_dir = suite.string();
  opt.quiet = true;
  opt.python = python;
  opt.plot_script = source_dir() + "/tools/plot_report.py";
  testing::internal::CaptureStderr();
  EXPECT_EQ(asgd::report::write_report(opt), 10);
  const std::string err = testing::internal::GetCapturedStderr();
  const std::string md = read_text(suite / "report" / "report.md");
  EXPECT_FALSE(contains(err, "plot script failed")) << err;
  EXPECT_FALSE(contains(md, "The plot script failed")) << md;
  for (const char* f : {"error_vs_time.png", "error_vs_epochs.png", "speedup.png", "staleness.png"}) {
    EXPECT_TRUE(fs::exists(suite / "report" / f) && fs::file_size(suite / "report" / f) > 0) << f;
    EXPECT_TRUE(contains(md, std::string("](") + f + ")")) << f;
  }
  EXPECT_FALSE(fs::exists(suite / "report" / "paper.png")) << "a suite of no paper got the papers' plot";
}

// A paper's suite gets paper.png, the paper's stated numbers beside ours; a
// reference file the script cannot read fails the plots with a warning and
// leaves the rest of the report.
TEST(Report, PaperPlotBesideOurs) {
  const std::string python = "/usr/bin/python3";
  if (std::system((python + " -c 'import matplotlib, h5py, numpy' >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << python << " cannot import matplotlib, h5py and numpy: the plots cannot be made here";
  TempDir tmp("paper_plot");
  const std::string name = "zhang2015-plot";
  const fs::path suite = tmp.path() / name;
  for (int learners : {1, 4, 30}) {
    Spec s;
    s.run_id = "ss-L" + std::to_string(learners);
    s.suite = name;
    s.protocol = learners == 1 ? "hardsync" : "softsync";
    s.learners = learners;
    s.n = learners;
    s.lr_policy = "staleness";
    s.final_error = s.best_error = 0.2;
    s.samples_per_s = 100.0 * learners * 0.8;
    s.time_to_target_s = 100.0 / learners;
    write_run(suite / "runs", s);
  }
  asgd::report::ReportOptions opt;
  opt.suite_dir = suite.string();
  opt.quiet = true;
  opt.python = python;
  opt.plot_script = source_dir() + "/tools/plot_report.py";
  opt.reference_dir = source_dir() + "/results/reference";
  testing::internal::CaptureStderr();
  ASSERT_EQ(asgd::report::write_report(opt), 3);
  std::string err = testing::internal::GetCapturedStderr();
  const fs::path png = suite / "report" / "paper.png";
  EXPECT_TRUE(fs::exists(png) && fs::file_size(png) > 0) << err;
  EXPECT_TRUE(contains(read_text(suite / "report" / "report.md"), "](paper.png)"));

  const fs::path bad = tmp.path() / "reference";
  fs::create_directories(bad);
  std::ofstream(bad / "zhang2015.json") << "{\"claims\": [";
  opt.reference_dir = bad.string();
  testing::internal::CaptureStderr();
  ASSERT_EQ(asgd::report::write_report(opt), 3);
  err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(err, "plot script failed")) << err;
  EXPECT_FALSE(fs::exists(png)) << "a paper plot left from the run before";
  EXPECT_TRUE(fs::exists(suite / "report" / "speedup.csv"));
}

// The report of a paper's suite folder beside the repository's reference
// files; returns the runs it read.
int paper_report(const fs::path& suite) {
  asgd::report::ReportOptions opt;
  opt.suite_dir = suite.string();
  opt.quiet = true;
  opt.reference_dir = source_dir() + "/results/reference";
  return asgd::report::write_report(opt);
}

// A row of the papers' table: ours, the verdict and our configuration.
struct PaperRow {
  std::string ours, verdict, cfg;
};

// The rows of the papers' table in report.md: claim text (the first cell of
// a claim's first row, up to " — ") -> its rows; the paper's data set is on a
// claim's first row, ours and a verdict on every matched row.
std::map<std::string, std::vector<PaperRow>> paper_rows(const std::string& md) {
  std::map<std::string, std::vector<PaperRow>> out;
  const std::string header =
      "| paper's claim | paper | paper's data | ours | verdict | our data, model | our configuration |";
  auto at = md.find(header);
  EXPECT_NE(at, std::string::npos) << "no papers' table in\n" << md;
  if (at == std::string::npos) return out;
  std::istringstream lines(md.substr(at));
  std::string line, claim;
  std::getline(lines, line);  // header
  std::getline(lines, line);  // |---|
  while (std::getline(lines, line) && line.starts_with("|")) {
    std::vector<std::string> cells;
    std::string cell;
    for (std::size_t i = 1; i < line.size(); ++i) {
      if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == '|') cell += line[++i];
      else if (line[i] == '|') cells.push_back(cell.size() >= 2 ? cell.substr(1, cell.size() - 2) : ""), cell.clear();
      else cell += line[i];
    }
    EXPECT_EQ(cells.size(), 7u) << line;
    if (cells.size() != 7) continue;
    if (!cells[0].empty()) claim = cells[0].substr(0, cells[0].find(" — "));
    EXPECT_EQ(cells[0].empty(), cells[2].empty()) << line;  // the paper's data set with its claim
    EXPECT_TRUE(cells[4].starts_with("**")) << line;        // a verdict on every row
    if (!cells[3].starts_with("ours: no ")) {
      EXPECT_FALSE(cells[5].empty()) << line;  // ours beside every figure
    }
    out[claim].push_back({cells[3], cells[4], cells[6]});
  }
  return out;
}

// A Zhang-shaped suite (30 learners; n-softsync for n in {1, 15, 30} with the
// constant and the staleness-dependent rate; hardsync at L = 30 and one
// learner; constant-rate 15- and 30-softsync diverged as in the paper):
// exactly which of our configurations each claim of
// results/reference/zhang2015.json gets, by the setting the claim states
// (learners, n / n_range, lr_policy; src/report/papers.cpp). A claim about a
// setting this suite does not have (ImageNet's L = 18) shows "no matching
// configuration"; every other claim must find its rows.
TEST(PaperReference, ZhangShapedSuiteRowsPerClaim) {
  TempDir tmp("papers_zhang");
  const std::string name = "zhang2015-shape";
  const fs::path suite = tmp.path() / name;
  auto spec = [&](const std::string& id, const std::string& protocol, int learners, int n, const std::string& lr,
                  const std::string& status, double error) {
    for (int seed : {1, 2}) {
    Spec s;
    s.run_id = id + "-s" + std::to_string(seed);
    s.seed = seed;
    s.suite = name;
    s.protocol = protocol;
    s.learners = learners;
    s.n = n;
    s.lr_policy = lr;
    s.status = status;
    s.batch = 4;
    s.final_error = s.best_error = error + (learners > 1 ? 0.002 * seed : 0.0);  // seed noise of 0.2 points
    s.samples_per_s = 100.0 * learners * 0.8;
    s.time_to_target_s = status == "completed" ? 100.0 / learners : kNaN;
    write_run(suite / "runs", s);
    }
  };
  spec("hs-L1", "hardsync", 1, 1, "constant", "completed", 0.20);
  spec("hs-L30", "hardsync", 30, 1, "constant", "completed", 0.21);
  for (const std::string lr : {"constant", "staleness"})
    for (int n : {1, 15, 30})
      spec("ss-L30-n" + std::to_string(n) + "-" + lr, "softsync", 30, n, lr,
           lr == "constant" && n >= 15 ? "diverged" : "completed", n == 30 && lr == "staleness" ? 0.25 : 0.19);

  ASSERT_EQ(paper_report(suite), 16);
  const std::string md = read_text(suite / "report" / "report.md");
  EXPECT_TRUE(contains(md, "## Beside the paper: Zhang, Gupta, Lian, Liu 2015/2016 (arXiv 1511.05950)")) << md;
  EXPECT_TRUE(contains(md, "synthetic")) << md;  // our data set, stated
  const auto rows = paper_rows(md);
  std::map<std::string, std::string> verdicts;  // "claim id / configuration" -> "**word**"

  const std::string L1 = "hardsync L=1 lr=constant batch=4", HS30 = "hardsync L=30 lr=constant batch=4";
  auto ss = [](int n, const std::string& lr) { return "softsync L=30 n=" + std::to_string(n) + " lr=" + lr + " batch=4"; };
  const std::vector<std::string> all30 = {HS30, ss(1, "constant"), ss(15, "constant"), ss(30, "constant"),
                                          ss(1, "staleness"), ss(15, "staleness"), ss(30, "staleness")};
  // claim id -> (our configurations, words every "ours" cell holds); none: "no matching configuration"
  const std::map<std::string, std::pair<std::vector<std::string>, std::string>> want = {
      {"cifar10_one_learner", {{L1}, "ours: final test error 20.00%"}},
      {"cifar10_error_flat_in_n", {{ss(1, "staleness"), ss(15, "staleness"), ss(30, "staleness")}, "ours: final test error"}},
      {"cifar10_constant_rate_fails", {{ss(15, "constant"), ss(30, "constant")}, "ours: 2 of 2 seeds diverged"}},
      {"imagenet_one_learner_top1", {{L1}, "ours: final test error 20.00%"}},
      {"imagenet_staleness_rate_all_protocols_alike", {{}, ""}},
      {"imagenet_constant_rate_fails", {{}, ""}},
      {"speedup_22x_28x", {all30, "ours: time-to-target"}},
      {"near_linear_speedup", {all30, "ours: time-to-target"}},
  };
  std::ifstream in(fs::path(source_dir()) / "results" / "reference" / "zhang2015.json");
  const json ref = json::parse(in, nullptr, false);
  ASSERT_TRUE(ref.is_object() && ref.contains("claims"));
  std::size_t seen = 0;
  for (const json& claim : ref["claims"]) {
    const std::string id = claim.value("id", ""), text = claim.value("text", "");
    SCOPED_TRACE(id);
    const auto w = want.find(id);
    ASSERT_NE(w, want.end()) << "a claim this test does not know: add what it should match";
    ++seen;
    ASSERT_TRUE(rows.count(text)) << "no row for the claim";
    const auto& got = rows.at(text);
    const auto& [configs, words] = w->second;
    if (configs.empty()) {
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(got[0].ours, "ours: no matching configuration in this suite");
      continue;
    }
    std::vector<std::string> labels;
    for (const auto& [ours, verdict, cfg] : got) {
      EXPECT_TRUE(contains(ours, words)) << ours;
      EXPECT_FALSE(contains(ours, "no matching")) << ours;
      labels.push_back(cfg.substr(0, cfg.find(", ")));  // without ", 2 seeds"
      verdicts[id + " / " + labels.back()] = verdict.substr(0, verdict.find(':'));
    }
    std::vector<std::string> expected = configs;
    std::sort(labels.begin(), labels.end());
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(labels, expected);
  }
  EXPECT_EQ(seen, want.size()) << "a claim this test expects is gone from zhang2015.json";

  // Each verdict, decided by an interval over the two seeds:
  const std::map<std::string, std::string> want_verdict = {
      // an error rate on other data is not compared
      {"cifar10_one_learner / " + L1, "**not tested**"},
      // flat in n: n = 15 within seed noise of n = 1; n = 30 six points above it
      {"cifar10_error_flat_in_n / " + ss(1, "staleness"), "**not tested**"},
      {"cifar10_error_flat_in_n / " + ss(15, "staleness"), "**reproduced**"},
      {"cifar10_error_flat_in_n / " + ss(30, "staleness"), "**not reproduced**"},
      {"cifar10_constant_rate_fails / " + ss(15, "constant"), "**reproduced**"},
      // throughput 30x (80 samples/s per learner): above 22x-28x, but linear
      {"speedup_22x_28x / " + HS30, "**not reproduced**"},
      {"near_linear_speedup / " + HS30, "**reproduced**"},
      // a speedup of runs that diverged is not decided
      {"near_linear_speedup / " + ss(30, "constant"), "**undecided**"},
  };
  for (const auto& [key, word] : want_verdict) {
    ASSERT_TRUE(verdicts.count(key)) << key;
    EXPECT_EQ(verdicts.at(key), word) << key;
  }
  EXPECT_TRUE(contains(md, "- cifar10_error_flat_in_n: 1 reproduced, 1 not reproduced (of 2 compared)")) << md;
  EXPECT_TRUE(contains(md, "- imagenet_constant_rate_fails: not tested by this suite")) << md;
}

// ---------------------------------------------------------------- compare

void write_reps(const fs::path& dir, const std::vector<double>& samples_per_s, double final_error = 0.2,
                const std::string& protocol = "softsync") {
  for (std::size_t i = 0; i < samples_per_s.size(); ++i) {
    Spec s;
    s.run_id = protocol + "-rep" + std::to_string(i);
    s.protocol = protocol;
    s.learners = 2;
    s.seed = i + 1;
    s.samples_per_s = samples_per_s[i];
    s.final_error = final_error;
    write_run(dir / "runs", s);
  }
}

std::vector<double> normal_samples(double mean, double sd, int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d(mean, sd);
  std::vector<double> x;
  for (int i = 0; i < n; ++i) x.push_back(d(rng));
  return x;
}

int run_compare(const fs::path& a, const fs::path& b, std::string* out = nullptr,
                asgd::report::CompareOptions opt = {}) {
  testing::internal::CaptureStdout();
  int rc = -1;
  try {
    rc = asgd::report::compare(a.string(), b.string(), opt);
  } catch (...) {
    testing::internal::GetCapturedStdout();
    throw;
  }
  const std::string text = testing::internal::GetCapturedStdout();
  std::printf("%s", text.c_str());
  if (out) *out = text;
  return rc;
}

TEST(Compare, FoldersThroughputDropAndNoise) {
  TempDir tmp("cmp");
  write_reps(tmp.path() / "base", normal_samples(100, 2, 5, 1));
  write_reps(tmp.path() / "same", normal_samples(100, 2, 5, 2));
  write_reps(tmp.path() / "slow", normal_samples(80, 2, 5, 3));
  std::string text;
  EXPECT_EQ(run_compare(tmp.path() / "base", tmp.path() / "slow", &text), 1);
  EXPECT_TRUE(contains(text, "REGRESSION"));
  EXPECT_TRUE(contains(text, "0.00794"));  // exact p of fully separated 5 vs 5
  EXPECT_EQ(run_compare(tmp.path() / "base", tmp.path() / "same", &text), 0);
  EXPECT_FALSE(contains(text, "REGRESSION"));
  // *.h5 directly in the folder works as well as runs/*.h5.
  EXPECT_EQ(run_compare(tmp.path() / "base" / "runs", tmp.path() / "same" / "runs"), 0);
}

TEST(Compare, FoldersErrorBandSingleSamplesAndDivergence) {
  TempDir tmp("cmp2");
  write_reps(tmp.path() / "base", {100, 101, 99}, 0.20);
  write_reps(tmp.path() / "worse", {100, 101, 99}, 0.22);
  write_reps(tmp.path() / "inband", {100, 101, 99}, 0.205);
  EXPECT_EQ(run_compare(tmp.path() / "base", tmp.path() / "worse"), 1);
  EXPECT_EQ(run_compare(tmp.path() / "base", tmp.path() / "inband"), 0);
  // One sample each: the threshold alone decides.
  write_reps(tmp.path() / "one", {100});
  write_reps(tmp.path() / "one_slow", {90});
  write_reps(tmp.path() / "one_ok", {97});
  EXPECT_EQ(run_compare(tmp.path() / "one", tmp.path() / "one_slow"), 1);
  EXPECT_EQ(run_compare(tmp.path() / "one", tmp.path() / "one_ok"), 0);
  // A configuration that now diverges is a regression.
  write_reps(tmp.path() / "div", {100, 101, 99});
  Spec s;
  s.run_id = "softsync-rep2";
  s.protocol = "softsync";
  s.learners = 2;
  s.seed = 3;
  s.status = "diverged";
  write_run(tmp.path() / "div" / "runs", s);
  std::string text;
  EXPECT_EQ(run_compare(tmp.path() / "base", tmp.path() / "div", &text), 1);
  EXPECT_TRUE(contains(text, "diverged/failed runs"));
  // Configurations only on one side are listed, not regressions.
  write_reps(tmp.path() / "other", {100, 101, 99}, 0.2, "hardsync");
  EXPECT_EQ(run_compare(tmp.path() / "base", tmp.path() / "other", &text), 0);
  EXPECT_TRUE(contains(text, "missing in candidate"));
  EXPECT_TRUE(contains(text, "new in candidate"));
}

json bench_doc(const std::map<std::string, std::vector<double>>& times, const std::string& unit = "ns",
               const std::string& counter = "", bool aggregates = true) {
  json doc = {{"context", {{"date", "2024-01-01"}, {"num_cpus", 2}}}, {"benchmarks", json::array()}};
  for (const auto& [name, xs] : times) {
    for (std::size_t i = 0; i < xs.size(); ++i) {
      json b = {{"name", name},          {"run_name", name},   {"run_type", "iteration"},
                {"repetitions", xs.size()}, {"repetition_index", i}, {"iterations", 1000},
                {"real_time", counter.empty() ? xs[i] : 1.0}, {"cpu_time", 1.0}, {"time_unit", unit}};
      if (!counter.empty()) b[counter] = xs[i];
      doc["benchmarks"].push_back(b);
    }
    if (aggregates) {
      for (const char* agg : {"mean", "median", "stddev"}) {
        // Deliberately absurd values: aggregates must be ignored when iterations exist.
        doc["benchmarks"].push_back({{"name", name + "_" + agg}, {"run_name", name}, {"run_type", "aggregate"},
                                     {"aggregate_name", agg}, {"real_time", 1e9}, {"cpu_time", 1e9},
                                     {"time_unit", unit}});
      }
    }
  }
  return doc;
}

TEST(Compare, GoogleBenchmarkJson) {
  TempDir tmp("bench");
  auto put = [&](const char* name, const json& doc) {
    write_text(tmp.path() / name, doc.dump(2));
    return tmp.path() / name;
  };
  const auto base = put("base.json", bench_doc({{"BM_gemm/64", {100, 101, 99, 100.5, 99.5}}, {"BM_conv", {50, 51, 49, 50, 50.5}}}));
  const auto slow = put("slow.json", bench_doc({{"BM_gemm/64", {130, 131, 129, 130.5, 129.5}}, {"BM_conv", {50, 50.5, 49.5, 51, 49}}}));
  const auto same = put("same.json", bench_doc({{"BM_gemm/64", {100.2, 100.8, 99.1, 100, 99.7}}, {"BM_conv", {50.1, 50.9, 49.2, 50, 50.4}}}));
  std::string text;
  EXPECT_EQ(run_compare(base, slow, &text), 1);
  EXPECT_TRUE(contains(text, "BM_gemm/64 real_time"));
  EXPECT_TRUE(contains(text, "+30.0%"));
  EXPECT_EQ(run_compare(base, same, &text), 0);
  // Units are converted: 0.1 us = 100 ns.
  const auto us = put("us.json", bench_doc({{"BM_gemm/64", {0.1, 0.101, 0.099, 0.1005, 0.0995}}, {"BM_conv", {0.05, 0.051, 0.049, 0.05, 0.0505}}}, "us"));
  EXPECT_EQ(run_compare(base, us), 0);
  // A GFLOP/s counter is compared instead of time; lower is worse.
  const auto fb = put("fb.json", bench_doc({{"BM_gemm/64", {10, 10.1, 9.9, 10, 10.05}}}, "ns", "GFLOP/s"));
  const auto fslow = put("fslow.json", bench_doc({{"BM_gemm/64", {8, 8.1, 7.9, 8, 8.05}}}, "ns", "GFLOP/s"));
  const auto ffast = put("ffast.json", bench_doc({{"BM_gemm/64", {12, 12.1, 11.9, 12, 12.05}}}, "ns", "GFLOP/s"));
  EXPECT_EQ(run_compare(fb, fslow, &text), 1);
  EXPECT_TRUE(contains(text, "GFLOP/s"));
  EXPECT_EQ(run_compare(fb, ffast, &text), 0);
  EXPECT_TRUE(contains(text, "improved"));
  // Only aggregates: the median row stands for the benchmark.
  json agg_only = {{"benchmarks",
                    {{{"name", "BM_gemm/64_mean"}, {"run_name", "BM_gemm/64"}, {"run_type", "aggregate"},
                      {"aggregate_name", "mean"}, {"real_time", 140}, {"time_unit", "ns"}},
                     {{"name", "BM_gemm/64_median"}, {"run_name", "BM_gemm/64"}, {"run_type", "aggregate"},
                      {"aggregate_name", "median"}, {"real_time", 101}, {"time_unit", "ns"}},
                     {{"name", "BM_gemm/64_stddev"}, {"run_name", "BM_gemm/64"}, {"run_type", "aggregate"},
                      {"aggregate_name", "stddev"}, {"real_time", 1}, {"time_unit", "ns"}}}}};
  const auto aggs = put("aggs.json", agg_only);
  EXPECT_EQ(run_compare(base, aggs, &text), 0);  // 101 vs median 100: within 5%
  EXPECT_TRUE(contains(text, "missing in candidate"));  // BM_conv
}

TEST(Compare, BadInputs) {
  TempDir tmp("cmpbad");
  write_reps(tmp.path() / "base", {100});
  write_text(tmp.path() / "foreign.json", R"({"results": []})");
  write_text(tmp.path() / "notjson.json", "hello");
  write_text(tmp.path() / "empty.json", R"({"benchmarks": []})");
  fs::create_directories(tmp.path() / "emptydir");
  auto message = [&](const fs::path& a, const fs::path& b) {
    try {
      run_compare(a, b);
    } catch (const asgd::Error& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "expected asgd::Error for " << a << " " << b;
    return std::string();
  };
  EXPECT_TRUE(contains(message(tmp.path() / "base", tmp.path() / "missing"), "no such file or folder"));
  EXPECT_TRUE(contains(message(tmp.path() / "foreign.json", tmp.path() / "foreign.json"), "benchmarks"));
  EXPECT_TRUE(contains(message(tmp.path() / "notjson.json", tmp.path() / "notjson.json"), "not valid JSON"));
  EXPECT_TRUE(contains(message(tmp.path() / "empty.json", tmp.path() / "empty.json"), "no benchmarks"));
  EXPECT_TRUE(contains(message(tmp.path() / "base", tmp.path() / "emptydir"), "no results files"));
  write_text(tmp.path() / "bench.json", bench_doc({{"BM_a", {1, 2}}}).dump());
  EXPECT_TRUE(contains(message(tmp.path() / "base", tmp.path() / "bench.json"), "like with like"));
  EXPECT_TRUE(contains(message(tmp.path() / "base" / "runs" / "softsync-rep0.h5", tmp.path() / "base"), "HDF5 file"));
}

// ---------------------------------------------------------------- scale

TEST(Report, ThousandRunFilesQuickly) {
  TempDir tmp("scale");
  const fs::path suite = tmp.path() / "big";
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i) {
    Spec s;
    char id[32];
    std::snprintf(id, sizeof id, "run-%04d", i);
    s.run_id = id;
    s.protocol = i % 3 == 0 ? "hardsync" : "softsync";
    s.learners = 1 << (i % 5);
    s.n = 1 + (i / 5) % 4;
    s.seed = static_cast<std::uint64_t>(i / 60 + 1);
    s.samples_per_s = 100.0 * s.learners * (0.8 + 0.001 * (i % 50));
    s.time_to_target_s = 100.0 / s.learners;
    s.status = i % 97 == 0 ? "diverged" : "completed";
    write_run(suite / "runs", s);
  }
  const auto t1 = std::chrono::steady_clock::now();
  asgd::report::ReportOptions opt;
  opt.suite_dir = suite.string();
  opt.quiet = true;
  EXPECT_EQ(asgd::report::write_report(opt), 1000);
  const auto t2 = std::chrono::steady_clock::now();
  const double write_s = std::chrono::duration<double>(t1 - t0).count();
  const double report_s = std::chrono::duration<double>(t2 - t1).count();
  std::printf("1,000 run files: written in %.2f s, reported in %.2f s\n", write_s, report_s);
  EXPECT_EQ(read_csv(suite / "report" / "runs.csv").size(), 1000u);
  // The times are printed, not asserted: timings on shared CI machines are noise.
}


// ---------------------------------------------------------------- papers

// Every claim in results/reference/*.json says where the paper states it.
TEST(PaperReference, EveryClaimHasItsSourceLocation) {
  const fs::path dir = fs::path(source_dir()) / "results" / "reference";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  ASSERT_GE(files.size(), 2u) << dir;  // paine2013, zhang2015
  const std::vector<std::string> kinds = {"speedup", "test_error", "diverges", "n_sync_order", "train_error",
                                          "early_late", "saw_tooth", "trend"};
  auto nonempty = [](const json& j, const char* k) { return j.contains(k) && j[k].is_string() && !j[k].get<std::string>().empty(); };
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    std::ifstream in(f);
    const json ref = json::parse(in, nullptr, false);
    ASSERT_FALSE(ref.is_discarded());
    ASSERT_TRUE(ref.is_object());
    for (const char* k : {"id", "citation", "arxiv", "method", "source_text"}) EXPECT_TRUE(nonempty(ref, k)) << k;
    EXPECT_EQ(ref.value("id", ""), f.stem().string());
    ASSERT_TRUE(ref.contains("claims") && ref["claims"].is_array() && !ref["claims"].empty());
    std::set<std::string> ids;
    for (const json& c : ref["claims"]) {
      ASSERT_TRUE(c.is_object());
      const std::string id = c.value("id", "");
      SCOPED_TRACE(id);
      EXPECT_FALSE(id.empty());
      EXPECT_TRUE(ids.insert(id).second) << "claim id given twice";
      EXPECT_TRUE(nonempty(c, "text"));
      // where the paper states it: section / table / figure, or "location not confirmed"
      EXPECT_TRUE(nonempty(c, "source")) << "no source location";
      const std::string kind = c.value("kind", "");
      EXPECT_NE(std::find(kinds.begin(), kinds.end(), kind), kinds.end()) << kind;
      if (c.contains("value")) {
        ASSERT_TRUE(c["value"].is_number());
        if (kind == "test_error") {
          EXPECT_TRUE(c["value"].get<double>() > 0 && c["value"].get<double>() < 1);
        }
      }
      if (c.contains("value_range")) {
        ASSERT_TRUE(c["value_range"].is_array() && c["value_range"].size() == 2);
        EXPECT_LE(c["value_range"][0].get<double>(), c["value_range"][1].get<double>());
      }
      for (const char* k : {"learners", "n", "n_sync"}) {
        if (!c.contains(k)) continue;
        ASSERT_TRUE(c[k].is_array() && !c[k].empty()) << k;
        for (const json& v : c[k]) EXPECT_TRUE(v.is_number_integer() && v.get<int>() >= 1) << k;
      }
      for (const char* k : {"learners_range", "n_range"}) {
        if (!c.contains(k)) continue;
        ASSERT_TRUE(c[k].is_array() && c[k].size() == 2) << k;
        EXPECT_LE(c[k][0].get<int>(), c[k][1].get<int>()) << k;
      }
      // a number, a range, per-learner numbers or words: something to show as "paper"
      const bool shown = c.contains("value") || c.contains("value_range") || c.contains("values_by_learners") ||
                         nonempty(c, "value_text") || kind == "diverges" || kind == "n_sync_order";
      EXPECT_TRUE(shown) << "nothing to show as the paper's figure";
    }
  }
}

// The part of report.md from the row of the claim whose text starts with
// `from` up to the row of the claim whose text starts with `to`.
std::string claim_rows(const std::string& md, const std::string& from, const std::string& to) {
  const auto a = md.find("| " + from);
  if (a == std::string::npos) return "<no row for: " + from + ">";
  const auto b = md.find("| " + to, a);
  return md.substr(a, b == std::string::npos ? std::string::npos : b - a);
}

// A Paine-shaped suite of virtual nsync runs, two seeds each, whose learning
// curves are made so that each of Paine's curve claims has a known answer:
// warm start, n_sync 100: 8 clients 20 points below 1 at the same time
// (reproduced); cold start: 32 clients 30 points above 1 early and falling
// 30 points faster late (reproduced); 8 clients at n_sync 300 end 5 points
// below n_sync 100 (not reproduced: the claim puts 100 first) and at n_sync
// 900 within seed noise of it (undecided); n_sync 10, which the claim does
// not name, is not compared; the minibatch errors fall 20 points over each
// push at n_sync 900 only (a saw-tooth: reproduced).
TEST(PaperReference, PaineCurveClaimsAreJudgedByTheirIntervals) {
  TempDir tmp("papers_paine");
  const std::string name = "paine2013-shape";
  const fs::path suite = tmp.path() / name;
  // error(t) of a run: a + b * t / 10 over t = 0.1 .. 10 s, plus seed noise
  auto put = [&](int learners, int n_sync, bool warm, double a, double b, double final_error, double noise) {
    for (int seed : {1, 2}) {
      Spec s;
      s.run_id = fmt::format("L{}-n{}-{}-s{}", learners, n_sync, warm ? "warm" : "cold", seed);
      s.suite = name;
      s.mode = "virtual";
      s.protocol = "nsync";
      s.learners = learners;
      s.n_sync = n_sync;
      s.seed = static_cast<std::uint64_t>(seed);
      s.final_error = s.best_error = final_error + (seed == 1 ? -noise : noise);
      RunResult r = make_run(s);
      json cfg = json::parse(r.config_json);
      cfg["warm_steps"] = warm ? 750 : 0;
      cfg["merge"] = "mean";
      r.config_json = cfg.dump();
      r.updates.clear();
      for (int k = 1; k <= 100; ++k) {
        const double t = 0.1 * k, e = a + b * t / 10 + (seed == 1 ? -0.002 : 0.002);
        r.updates.push_back({k, t, 1, 0.0, 0.01, e, e, 8L * n_sync});
      }
      // every minibatch's error: noise, and at n_sync 900 a fall of 20 points over each push
      std::mt19937 rng(static_cast<unsigned>(seed * 1000 + n_sync));
      std::normal_distribution<float> noise_of(0.0f, 0.05f);
      for (int i = 0; i < 100 * n_sync; ++i)
        r.minibatch_error.push_back(0.5f + noise_of(rng) +
                                    (n_sync == 900 ? 0.1f - 0.2f * static_cast<float>(i % 900) / 900 : 0.0f));
      fs::create_directories(suite / "runs");
      asgd::io::write_results((suite / "runs" / (s.run_id + ".h5")).string(), r);
    }
  };
  put(1, 100, true, 0.5, 0.0, 0.2, 0.001);
  put(8, 100, true, 0.3, 0.0, 0.2, 0.001);
  put(1, 100, false, 0.5, 0.0, 0.2, 0.001);
  put(32, 100, false, 0.8, -0.3, 0.2, 0.001);
  put(8, 100, false, 0.5, 0.0, 0.20, 0.001);
  put(8, 300, false, 0.5, 0.0, 0.15, 0.001);
  put(8, 900, false, 0.5, 0.0, 0.20, 0.02);
  put(8, 10, false, 0.5, 0.0, 0.25, 0.001);  // an n_sync the claim does not name

  ASSERT_EQ(paper_report(suite), 16);
  const std::string md = read_text(suite / "report" / "report.md");
  const auto rows = paper_rows(md);
  auto verdict_of = [&](const std::string& claim_start, const std::string& cfg_start) {
    for (const auto& [claim, rs] : rows)
      if (claim.starts_with(claim_start))
        for (const auto& r : rs)
          if (r.cfg.starts_with(cfg_start)) return r.verdict;
    return std::string("<no row>");
  };
  const std::string warm = verdict_of("warm start, n_sync = 100", "nsync L=8 n_sync=100");
  EXPECT_TRUE(warm.starts_with("**reproduced**: L=1 minus L=8 20.00pp")) << warm;
  const std::string cold = verdict_of("cold start: many clients", "nsync n_sync=100 batch=64 merge=mean cold");
  EXPECT_TRUE(cold.starts_with("**reproduced**: early error L=32 minus L=1")) << cold;
  EXPECT_TRUE(contains(cold, "late fall L=32 minus L=1 15.")) << cold;  // 0.3 * (10 - 5) / 10
  const std::string order = verdict_of("n_sync = 100 ends at a lower error", "nsync L=8 batch=64 merge=mean cold");
  EXPECT_TRUE(order.starts_with("**not reproduced**: n_sync 300 minus 100 -5.00pp")) << order;
  EXPECT_TRUE(contains(order, "n_sync 900 minus 100 0.00pp")) << order;
  EXPECT_TRUE(contains(order, "includes 0")) << order;
  EXPECT_FALSE(contains(order, "n_sync 10 minus")) << order;
  // a family without the claimed 32 clients compares nothing
  const std::string no32 = verdict_of("cold start: many clients", "nsync n_sync=10 ");
  EXPECT_TRUE(no32.starts_with("**not tested**: no run at the claimed learner count")) << no32;
  EXPECT_TRUE(contains(md, "- warm_start_8_gpus_train_error: 1 reproduced (of 1 compared)")) << md;
  // the single learner never reaches the target: no speedup to judge
  const std::string speedup = verdict_of("ILSVRC 2012, 8 GPU clients", "nsync L=8 n_sync=100");
  EXPECT_TRUE(speedup.starts_with("**not tested**: no time-to-target speedup")) << speedup;
  // the saw-tooth at 900 against the family's shortest n_sync (10), both parts above 0
  const std::string saw = verdict_of("n_sync = 900: the training error curve is saw-toothed",
                                     "nsync L=8 batch=64 merge=mean cold");
  EXPECT_TRUE(saw.starts_with("**reproduced**: amplitude minus noise at n_sync 900")) << saw;
  EXPECT_TRUE(contains(saw, "amplitude at n_sync 900 minus 10 ")) << saw;
}

// A reference file whose claims carry fields of the wrong type (a user's
// edit) gives rows that compare nothing, never a library's exception.
TEST(PaperReference, ClaimFieldsOfTheWrongTypeCompareNothing) {
  TempDir tmp("papers_badref");
  const fs::path suite = tmp.path() / "zhang2015-badref", ref = tmp.path() / "ref";
  fs::create_directories(ref);
  const json bad = {{"id", "zhang2015"},
                    {"claims",
                     {{{"id", "a"}, {"kind", "test_error"}, {"source", "s"}, {"approx", "yes"}, {"value", "18%"},
                       {"n_range", {1, 30}}, {"learners", {2}}},
                      {{"id", "b"}, {"kind", "speedup"}, {"source", "s"}, {"value", "fast"}, {"at_test_error", 0.2},
                       {"value_range", {"x", 3}}, {"learners", "2"}},
                      {{"id", "c"}, {"kind", "n_sync_order"}, {"source", "s"}, {"n_sync", "100"}},
                      {{"id", "d"}, {"kind", "diverges"}, {"source", "s"}, {"learners", {2}}, {"n", {true}}},
                      {{"id", "e"}, {"kind", 7}, {"source", "s"}}}}};
  write_text(ref / "zhang2015.json", bad.dump());
  for (int seed : {1, 2})
    for (int learners : {1, 2}) {
      Spec s;
      s.run_id = fmt::format("L{}-s{}", learners, seed);
      s.suite = "zhang2015-badref";
      s.protocol = learners == 1 ? "hardsync" : "softsync";
      s.learners = learners;
      s.seed = static_cast<std::uint64_t>(seed);
      write_run(suite / "runs", s);
    }
  asgd::report::ReportOptions opt;
  opt.suite_dir = suite.string();
  opt.quiet = true;
  opt.reference_dir = ref.string();
  ASSERT_EQ(asgd::report::write_report(opt), 4);
  const std::string md = read_text(suite / "report" / "report.md");
  EXPECT_TRUE(contains(md, "| verdict |")) << md;
  EXPECT_TRUE(contains(md, "- b: ")) << md;
}

// The "fails to converge" claims are matched on the setting the paper states
// (learner count and n), not on the learner count alone: at L = 30 only the
// 15- and 30-softsync runs with a constant rate belong to the CIFAR10 claim,
// and the ImageNet claim (lambda = 18, n = 9 and 18) takes only L = 18, n = 9.
TEST(PaperReference, FailsRowsMatchTheStatedN) {
  TempDir tmp("papers_n");
  const fs::path suite = tmp.path() / "zhang2015-nmatch";
  auto spec = [&](const std::string& id, const std::string& protocol, int learners, int n, const std::string& lr,
                  const std::string& status) {
    Spec s;
    s.run_id = id;
    s.suite = "zhang2015-nmatch";
    s.protocol = protocol;
    s.learners = learners;
    s.n = n;
    s.lr_policy = lr;
    s.status = status;
    s.batch = 4;
    write_run(suite / "runs", s);
  };
  spec("hs-L1", "hardsync", 1, 1, "constant", "completed");
  spec("hs-L30", "hardsync", 30, 1, "constant", "completed");
  for (int n : {1, 4, 15, 30})
    spec("ss-L30-n" + std::to_string(n), "softsync", 30, n, "constant", n >= 15 ? "diverged" : "completed");
  spec("ss-L30-n15-st", "softsync", 30, 15, "staleness", "completed");
  spec("ss-L18-n1", "softsync", 18, 1, "constant", "completed");
  spec("ss-L18-n9", "softsync", 18, 9, "constant", "diverged");

  asgd::report::ReportOptions opt;
  opt.suite_dir = suite.string();
  opt.quiet = true;
  opt.reference_dir = source_dir() + "/results/reference";
  EXPECT_EQ(asgd::report::write_report(opt), 9);
  const std::string md = read_text(suite / "report" / "report.md");

  const std::string cifar = claim_rows(md, "CIFAR10, 30 learners, the single-learner rate unchanged", "ImageNet (AlexNet)");
  EXPECT_TRUE(contains(cifar, "§4.3")) << cifar;  // where the paper says it
  EXPECT_TRUE(contains(cifar, "softsync L=30 n=15 lr=constant")) << cifar;
  EXPECT_TRUE(contains(cifar, "softsync L=30 n=30 lr=constant")) << cifar;
  EXPECT_FALSE(contains(cifar, "n=1 lr")) << cifar;
  EXPECT_FALSE(contains(cifar, "n=4 lr")) << cifar;
  EXPECT_FALSE(contains(cifar, "lr=staleness")) << cifar;
  EXPECT_FALSE(contains(cifar, "L=18")) << cifar;
  EXPECT_TRUE(contains(cifar, "ours: 1 of 1 seeds diverged")) << cifar;

  const std::string imagenet =
      claim_rows(md, "ImageNet, 18 learners, mu = 16, the single-learner rate unchanged", "CIFAR10 and ImageNet");
  EXPECT_TRUE(contains(imagenet, "softsync L=18 n=9 lr=constant")) << imagenet;
  EXPECT_FALSE(contains(imagenet, "L=18 n=1 ")) << imagenet;
  EXPECT_FALSE(contains(imagenet, "L=30")) << imagenet;

  // The staleness-rate claim over n (CIFAR10, L = 30) takes the staleness run only.
  const std::string flat = claim_rows(md, "CIFAR10, 30 learners, mu = 4, staleness-dependent rate", "CIFAR10, 30 learners, the");
  EXPECT_TRUE(contains(flat, "softsync L=30 n=15 lr=staleness")) << flat;
  EXPECT_FALSE(contains(flat, "lr=constant")) << flat;

  // The reference file is named relative to the repository, never by an absolute path.
  EXPECT_TRUE(contains(md, "`results/reference/zhang2015.json`")) << md;
  EXPECT_FALSE(contains(md, fs::absolute(source_dir()).string() + "/results")) << md;
  EXPECT_FALSE(contains(md, "location not given")) << md;
}

// A reference folder elsewhere is named by the file's name, not by its path.
TEST(PaperReference, ReferenceFolderElsewhereIsNotNamedByAbsolutePath) {
  TempDir tmp("papers_dir");
  const fs::path suite = tmp.path() / "paine2013-x";
  write_suite(suite, "paine2013-x");
  const fs::path refs = tmp.path() / "my refs";
  fs::create_directories(refs);
  fs::copy_file(fs::path(source_dir()) / "results" / "reference" / "paine2013.json", refs / "paine2013.json");
  asgd::report::ReportOptions opt;
  opt.suite_dir = suite.string();
  opt.quiet = true;
  opt.reference_dir = refs.string();
  asgd::report::write_report(opt);
  const std::string md = read_text(suite / "report" / "report.md");
  EXPECT_TRUE(contains(md, "## Beside the paper: Paine, Jin, Yang, Lin, Huang 2013 (arXiv 1312.6186)")) << md;
  EXPECT_FALSE(contains(md, refs.string())) << md;
  EXPECT_TRUE(contains(md, "`paine2013.json (in the reference folder)`")) << md;
  EXPECT_TRUE(contains(md, "location not confirmed")) << md;
}

}  // namespace

// ------------------------------------------------------ measurement integrity
namespace {
// A run of host `host` that trained over [start, end) (Unix seconds) on `cpu`.
void write_timed(const fs::path& runs, const std::string& id, int learners, const std::string& host, double start,
                 double end, const std::string& cpu = "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz",
                 const std::string& mode = "real", double samples_per_s = 100) {
  Spec s;
  s.run_id = id;
  s.learners = learners;
  s.mode = mode;
  s.samples_per_s = samples_per_s;
  s.time_to_target_s = learners == 1 ? 100 : 60;
  RunResult r = make_run(s);
  r.host = host;
  r.train_started = start;
  r.train_finished = end;
  r.machine_json = json{{"cpu_model", cpu}, {"host", host}, {"blas", "OpenBLAS 0.3.21 (core SkylakeX)"}}.dump();
  fs::create_directories(runs);
  asgd::io::write_results((runs / (id + ".h5")).string(), r);
}
}  // namespace

// A folder with real runs and virtual runs of one configuration: the
// virtual ones are the performance model's prediction, shown beside the
// measured ones (predicted.csv, report.md) and labelled with their profile.
TEST(Report, PredictedBesideMeasured) {
  TempDir tmp("predicted");
  const fs::path runs = tmp.path() / "runs";
  const double t = 1.8e9;
  write_timed(runs, "real-a", 2, "n1", t, t + 100, "AMD EPYC", "real", 1000);
  write_timed(runs, "real-b", 2, "n1", t + 200, t + 300, "AMD EPYC", "real", 1200);
  asgd::report::ReportOptions opt;
  opt.suite_dir = tmp.path().string();
  opt.quiet = true;
  asgd::report::write_report(opt);
  EXPECT_FALSE(fs::exists(tmp.path() / "report" / "predicted.csv"));  // nothing to predict against
  Spec s;
  s.run_id = "virt";
  s.learners = 2;
  s.mode = "virtual";
  s.samples_per_s = 1050;
  RunResult v = make_run(s);
  v.timing_model_json = json{{"model", "contention"}, {"profile", "vm"}, {"profile_path", "p.yaml"}}.dump();
  asgd::io::write_results((runs / "virt.h5").string(), v);
  asgd::report::write_report(opt);
  const auto rows = read_csv(tmp.path() / "report" / "predicted.csv");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].at("measured_samples_per_s"), "1100");
  EXPECT_EQ(rows[0].at("predicted_samples_per_s"), "1050");
  EXPECT_NEAR(std::stod(rows[0].at("ratio")), 1050.0 / 1100, 1e-4);
  EXPECT_EQ(rows[0].at("timing_model"), "profile vm (p.yaml)");
  const std::string md = read_text(tmp.path() / "report" / "report.md");
  EXPECT_TRUE(contains(md, "## Predicted against measured")) << md;
  const auto all = read_csv(tmp.path() / "report" / "runs.csv");
  EXPECT_EQ(where(all, {{"run_id", "virt"}}).front().at("timing"), "modelled: profile vm (p.yaml)");
  const auto sp = read_csv(tmp.path() / "report" / "speedup.csv");
  bool labelled = false;
  for (const auto& r : sp) labelled = labelled || contains(r.at("note"), "modelled: profile vm (p.yaml)");
  EXPECT_TRUE(labelled);
}

// Runs whose training intervals overlapped on the same host are flagged in
// runs.csv, in the speedup notes built on them and in report.md; runs on
// other hosts, back-to-back runs and virtual runs are not.
TEST(Report, OverlappingRunsAreMarkedShared) {
  TempDir tmp("overlap");
  const fs::path runs = tmp.path() / "runs";
  const double t = 1.8e9;
  write_timed(runs, "base-L1", 1, "n1", t, t + 100);
  write_timed(runs, "two-L2", 2, "n1", t + 50, t + 150);        // overlaps base-L1 on n1
  write_timed(runs, "other-host-L2", 2, "n2", t + 50, t + 150);  // same time, other host
  write_timed(runs, "after-L2", 2, "n1", t + 150, t + 200);      // starts when two-L2 ends: no overlap
  write_timed(runs, "virt-L2", 2, "n1", t + 10, t + 20, "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz", "virtual");
  asgd::report::ReportOptions opt;
  opt.suite_dir = tmp.path().string();
  opt.quiet = true;
  asgd::report::write_report(opt);
  const auto rows = read_csv(tmp.path() / "report" / "runs.csv");
  auto timing = [&](const std::string& id) {
    const auto r = where(rows, {{"run_id", id}});
    return r.empty() ? std::string("missing") : r.front().at("timing");
  };
  EXPECT_EQ(timing("base-L1"), "shared with two-L2");
  EXPECT_EQ(timing("two-L2"), "shared with base-L1");
  EXPECT_EQ(timing("other-host-L2"), "exclusive");
  EXPECT_EQ(timing("after-L2"), "exclusive");
  EXPECT_EQ(timing("virt-L2"), "modelled");
  const std::string md = read_text(tmp.path() / "report" / "report.md");
  EXPECT_TRUE(contains(md, "## Measurement conditions"));
  EXPECT_TRUE(contains(md, "`base-L1` on n1: overlapped `two-L2`")) << md;
  // the L=2 speedup is built on base-L1 (baseline) and two-L2/other-host-L2/after-L2
  const auto sp = read_csv(tmp.path() / "report" / "speedup.csv");
  bool noted = false;
  for (const auto& r : sp)
    if (r.at("learners") == "2" && r.at("mode") == "real") noted = contains(r.at("note"), "shared: ");
  EXPECT_TRUE(noted) << "the speedup on shared runs must say so";
}

TEST(Report, NoOverlapNoFlagAndMachinesNamedWhenSpanning) {
  TempDir tmp("nooverlap");
  const fs::path runs = tmp.path() / "runs";
  const double t = 1.8e9;
  write_timed(runs, "a-L1", 1, "n1", t, t + 100);
  write_timed(runs, "b-L2", 2, "n1", t + 100, t + 200, "AMD EPYC 9654 96-Core Processor");
  asgd::report::ReportOptions opt;
  opt.suite_dir = tmp.path().string();
  opt.quiet = true;
  asgd::report::write_report(opt);
  const auto rows = read_csv(tmp.path() / "report" / "runs.csv");
  for (const auto& r : rows) EXPECT_EQ(r.at("timing"), "exclusive") << r.at("run_id");
  EXPECT_EQ(where(rows, {{"run_id", "b-L2"}}).front().at("cpu"), "EPYC 9654");
  EXPECT_EQ(where(rows, {{"run_id", "a-L1"}}).front().at("cpu"), "Xeon 8375C");
  const std::string md = read_text(tmp.path() / "report" / "report.md");
  EXPECT_TRUE(contains(md, "No two real runs trained at the same time")) << md;
  EXPECT_TRUE(contains(md, "The runs span machines")) << md;
  EXPECT_TRUE(contains(md, "machine: EPYC 9654")) << md;
}

// A speed comparison across CPU models is refused, with the reason, unless
// --across-machines; the same machine compares as before.
TEST(Compare, AcrossMachinesRefusedWithTheReason) {
  TempDir tmp("machines");
  const double t = 1.8e9;
  for (int i = 0; i < 3; ++i) {
    write_timed(tmp.path() / "intel" / "runs", "r" + std::to_string(i), 2, "n1", t + 100 * i, t + 100 * i + 50);
    write_timed(tmp.path() / "intel2" / "runs", "r" + std::to_string(i), 2, "n1", t + 100 * i, t + 100 * i + 50);
    write_timed(tmp.path() / "amd" / "runs", "r" + std::to_string(i), 2, "n1", t + 100 * i, t + 100 * i + 50,
                "AMD EPYC 9654 96-Core Processor");
  }
  try {
    run_compare(tmp.path() / "intel", tmp.path() / "amd");
    ADD_FAILURE() << "a compare across CPU models was not refused";
  } catch (const asgd::Error& e) {
    EXPECT_TRUE(contains(e.what(), "AMD EPYC 9654")) << e.what();
    EXPECT_TRUE(contains(e.what(), "Xeon(R) Platinum 8375C")) << e.what();
    EXPECT_TRUE(contains(e.what(), "--across-machines")) << e.what();
  }
  asgd::report::CompareOptions across;
  across.across_machines = true;
  std::string text;
  EXPECT_EQ(run_compare(tmp.path() / "intel", tmp.path() / "amd", &text, across), 0);
  EXPECT_TRUE(contains(text, "compared anyway"));
  EXPECT_EQ(run_compare(tmp.path() / "intel", tmp.path() / "intel2"), 0);
  // Google Benchmark files carry the machine in their context (asgd_micro adds it)
  auto bench = [&](const std::string& cpu) {
    return json{{"context", {{"asgd_cpu_model", cpu}, {"asgd_blas_kernel", "SkylakeX"}}},
                {"benchmarks",
                 {{{"name", "x"}, {"run_type", "iteration"}, {"real_time", 1.0}, {"time_unit", "ms"}}}}}
        .dump();
  };
  write_text(tmp.path() / "a.json", bench("Intel Xeon"));
  write_text(tmp.path() / "b.json", bench("AMD EPYC"));
  EXPECT_THROW(run_compare(tmp.path() / "a.json", tmp.path() / "b.json"), asgd::Error);
}

TEST(Machine, ShortCpuNames) {
  EXPECT_EQ(asgd::short_cpu("Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz"), "Xeon 8375C");
  EXPECT_EQ(asgd::short_cpu("AMD EPYC 9654 96-Core Processor"), "EPYC 9654");
  EXPECT_EQ(asgd::short_cpu("Intel(R) Core(TM) i7-9700K CPU @ 3.60GHz"), "Core i7-9700K");
  EXPECT_EQ(asgd::short_cpu(""), "unknown CPU");
}

// The one reader of Google Benchmark files (compare, history): nesting
// bounded before parsing, figures bounded so a relative change stays finite.
TEST(Bench, ReaderBoundsNestingAndFigures) {
  using asgd::report::bench_figure;
  using asgd::report::read_bench_file;
  const std::string deep = R"({"benchmarks": [{"name": "BM_a", "real_time": )" + std::string(200000, '[') +
                           std::string(200000, ']') + "}]}";
  const auto d = read_bench_file(deep, "deep.json");
  EXPECT_EQ(d.problem, "deep.json: nested deeper than 64 levels (line 1)");
  EXPECT_FALSE(d.json_valid);
  EXPECT_EQ(read_bench_file("hello", "x.json").problem, "x.json: not valid JSON");
  EXPECT_EQ(read_bench_file(R"({"benchmarks": []})", "e.json").problem, "e.json: no benchmarks in the file");
  const auto f = read_bench_file(R"({"benchmarks": [
      {"name": "BM_a", "real_time": 2, "time_unit": "us"},
      {"name": "BM_b", "GFLOP/s": 1.7e308},
      {"name": "BM_c", "error_occurred": true, "error_message": "boom"},
      {"name": "BM_d_median", "run_name": "BM_d", "run_type": "aggregate", "aggregate_name": "median", "real_time": 5},
      {"name": "BM_e", "run_type": 3},
      {"nameless": 1}]})",
                                 "b.json");
  EXPECT_EQ(f.problem, "");
  ASSERT_EQ(f.series.size(), 3u);
  EXPECT_EQ(f.errors.at("BM_c"), "boom");
  EXPECT_EQ(f.error_entries, 1);
  ASSERT_EQ(f.bad_entries.size(), 2u);
  EXPECT_EQ(f.bad_entries[0], "b.json: benchmark BM_e: field run_type is not text: 3");
  EXPECT_EQ(f.bad_entries[1], "b.json: a benchmark entry without a name");
  EXPECT_EQ(bench_figure(*f.series.at("BM_a").front(), false).value, 2000.0);
  EXPECT_EQ(bench_figure(*f.series.at("BM_d").front(), false).value, 5.0);
  const auto big = bench_figure(*f.series.at("BM_b").front(), true);
  EXPECT_TRUE(std::isnan(big.value));
  EXPECT_EQ(big.problem, "GFLOP/s 1.7e+308 is not a positive finite number up to 1e+18");
  EXPECT_EQ(bench_figure(*f.series.at("BM_b").front(), false).problem, "real_time is missing");
}
