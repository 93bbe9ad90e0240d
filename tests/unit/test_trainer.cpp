// Single-learner training end to end on synthetic data: results file,
// checkpoint resume equal to an uninterrupted run, divergence as a result,
// refusal of bad configs, corrupt or foreign checkpoints and unwritable folders.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "config/config.hpp"
#include "ps/shard_core.hpp"
#include "ps/trainer.hpp"
#include "io/results.hpp"
#include <nlohmann/json.hpp>

namespace fs = std::filesystem;
using asgd::TrainConfig;
using asgd::ps::train_single;

namespace {

class Trainer : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("asgd_trainer_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  TrainConfig small() const {
    TrainConfig c;
    c.model = "mlp";
    c.data.kind = "synthetic";
    c.data.h = c.data.w = 8;
    c.data.c = 1;
    c.data.classes = 4;
    c.data.n_train = 512;
    c.data.n_test = 128;
    c.batch = 16;
    c.lr = 0.05;
    c.epochs = 2;
    c.eval_every = 1;
    c.checkpoint_every = 0;
    c.results_dir = dir_.string();
    c.suite = "t";
    c.run_id = "r";
    c.target_error = 0.5;
    return c;
  }
  static std::string bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  fs::path dir_;
  asgd::ps::TrainOptions quiet_{true, 2.0, 0};
};

}  // namespace

TEST_F(Trainer, WritesACompleteResultsFile) {
  const auto out = train_single(small(), quiet_);
  ASSERT_FALSE(out.skipped);
  const auto r = asgd::io::read_results(out.paths.results);
  EXPECT_EQ(r.status, asgd::RunStatus::completed);
  EXPECT_EQ(r.updates.size(), 64u);  // 2 epochs x 512 / 16
  EXPECT_EQ(r.updates.back().clock, 64);
  EXPECT_EQ(r.evals.size(), 2u);
  EXPECT_LT(r.summary.final_test_error, 0.5);  // chance is 0.75
  EXPECT_GT(r.summary.samples_per_s, 0);
  EXPECT_FALSE(std::isnan(r.summary.time_to_target_s));
  EXPECT_NE(r.config_json.find("\"model\":\"mlp\""), std::string::npos);
  ASSERT_EQ(r.learners.size(), 1u);
  EXPECT_EQ(r.learners[0].samples, 64 * 16);
}

TEST_F(Trainer, ResumeFromCheckpointEqualsAnUninterruptedRun) {
  TrainConfig c = small();
  c.checkpoint_every = 10;
  c.run_id = "whole";
  const auto whole = train_single(c, quiet_);

  c.run_id = "killed";
  auto opt = quiet_;
  opt.abort_after = 25;  // dies after update 25; the last checkpoint is at 20
  EXPECT_THROW(train_single(c, opt), asgd::ps::Aborted);
  EXPECT_FALSE(fs::exists(dir_ / "t" / "runs" / "killed.h5"));
  ASSERT_TRUE(fs::exists(dir_ / "t" / "checkpoints" / "killed.h5"));
  EXPECT_EQ(asgd::io::read_checkpoint((dir_ / "t" / "checkpoints" / "killed.h5").string()).clock, 20);
  const auto resumed = train_single(c, quiet_);
  EXPECT_TRUE(resumed.resumed);

  const auto a = asgd::io::read_results(whole.paths.results);
  const auto b = asgd::io::read_results(resumed.paths.results);
  ASSERT_EQ(a.updates.size(), b.updates.size());
  for (std::size_t i = 0; i < a.updates.size(); ++i) {
    EXPECT_EQ(a.updates[i].clock, b.updates[i].clock);
    EXPECT_EQ(a.updates[i].train_loss, b.updates[i].train_loss) << "update " << i;
  }
  ASSERT_EQ(a.evals.size(), b.evals.size());
  EXPECT_EQ(a.evals.back().test_error, b.evals.back().test_error);
  const auto wa = asgd::io::read_checkpoint(whole.paths.checkpoint).weights;
  const auto wb = asgd::io::read_checkpoint(resumed.paths.checkpoint).weights;
  EXPECT_EQ(wa, wb);
}

TEST_F(Trainer, DivergenceIsAResultNotACrash) {
  TrainConfig c = small();
  c.lr = 1e4;
  c.momentum = 0.99;
  const auto out = train_single(c, quiet_);
  const auto r = asgd::io::read_results(out.paths.results);
  EXPECT_EQ(r.status, asgd::RunStatus::diverged);
  EXPECT_LT(r.updates.size(), 64u);
}

TEST_F(Trainer, AFinishedRunIsNeverOverwritten) {
  const auto first = train_single(small(), quiet_);
  const std::string before = bytes(first.paths.results);
  const auto again = train_single(small(), quiet_);
  EXPECT_TRUE(again.skipped);
  EXPECT_EQ(bytes(first.paths.results), before);
}

TEST_F(Trainer, CorruptCheckpointIsRefusedAndWritesNoResult) {
  TrainConfig c = small();
  fs::create_directories(dir_ / "t" / "checkpoints");
  std::ofstream(dir_ / "t" / "checkpoints" / "r.h5") << "not an hdf5 file at all";
  try {
    train_single(c, quiet_);
    FAIL() << "corrupt checkpoint accepted";
  } catch (const asgd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoints/r.h5"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir_ / "t" / "runs" / "r.h5"));
  EXPECT_EQ(bytes((dir_ / "t" / "checkpoints" / "r.h5").string()), "not an hdf5 file at all");
}

TEST_F(Trainer, CheckpointOfAnotherConfigurationIsRefused) {
  TrainConfig c = small();
  c.checkpoint_every = 10;
  auto opt = quiet_;
  opt.abort_after = 15;
  EXPECT_THROW(train_single(c, opt), asgd::ps::Aborted);
  c.lr = 0.01;  // same run id, other numerics
  try {
    train_single(c, quiet_);
    FAIL() << "foreign checkpoint accepted";
  } catch (const asgd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("another configuration"), std::string::npos) << e.what();
  }
}

TEST_F(Trainer, UnwritableResultsFolderFailsBeforeTraining) {
  TrainConfig c = small();
  c.results_dir = "/proc/asgd-results";
  try {
    train_single(c, quiet_);
    FAIL() << "no error";
  } catch (const asgd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/proc/asgd-results"), std::string::npos) << e.what();
  }
}

TEST(Config, EveryProblemIsReportedAtOnce) {
  TrainConfig c;
  c.batch = 0;
  c.lr = -1;
  c.learners = 2;
  c.softsync_n = 3;
  c.model = "resnet";
  const auto problems = asgd::validate(c);
  EXPECT_EQ(problems.size(), 4u);
  try {
    asgd::check(c);
    FAIL();
  } catch (const asgd::Error& e) {
    const std::string m = e.what();
    for (const char* part : {"batch 0", "lr -1", "softsync n 3", "resnet"})
      EXPECT_NE(m.find(part), std::string::npos) << m;
  }
}

// Found by fuzz_sbatch (tests/fuzz; tests/data/fuzz/README.md): a path that is
// not valid UTF-8 reached nlohmann::json's dump() when a configuration was
// written, and its type_error escaped (exit 1 instead of a refusal). Paths a
// configuration stores are refused by name; hashing such a config (suites hash
// runs before validating them) does not throw; UTF-8 paths stay valid.
TEST(Config, PathsThatAreNotUtf8AreRefused) {
  const std::string bad = "/data/r\x83sults", cut = "/data/caf\xc3";
  for (const char* which : {"results folder", "data folder", "warm start file"}) {
    for (const std::string& path : {bad, cut}) {
      TrainConfig c;
      const std::string what = which;
      if (what == "results folder") c.results_dir = path;
      else if (what == "data folder") c.data.dir = path;
      else c.warm_start = path;
      const auto problems = asgd::validate(c);
      ASSERT_EQ(problems.size(), 1u) << which;
      EXPECT_NE(problems[0].find(what + " '"), std::string::npos) << problems[0];
      EXPECT_NE(problems[0].find("is not valid UTF-8"), std::string::npos) << problems[0];
      EXPECT_NO_THROW((void)asgd::config_hash(c));
      EXPECT_NO_THROW((void)asgd::resolved_run_id(c));
    }
  }
  TrainConfig ok;
  ok.results_dir = "/data/r\xc3\xa9sultats/\xce\xbc";  // é, µ
  ok.data.dir = "/donn\xc3\xa9" "es";
  EXPECT_TRUE(asgd::validate(ok).empty());
}

TEST(Config, JsonRoundTripAndStableHash) {
  TrainConfig c;
  c.lr_steps = {3, 6};
  c.model = "cifar10-18pct";
  nlohmann::json j = c;
  const TrainConfig back = j.get<TrainConfig>();
  EXPECT_EQ(nlohmann::json(back), j);
  EXPECT_EQ(asgd::config_hash(c), asgd::config_hash(back));
  TrainConfig d = c;
  d.results_dir = "/elsewhere";  // paths do not change the numerics
  EXPECT_EQ(asgd::config_hash(c), asgd::config_hash(d));
  d.lr = 0.02;
  EXPECT_NE(asgd::config_hash(c), asgd::config_hash(d));
}

TEST(Schedule, StepScheduleMultipliesAtEachStep) {
  TrainConfig c;
  c.lr = 0.1;
  c.lr_steps = {2, 4};
  c.lr_gamma = 0.1;
  EXPECT_DOUBLE_EQ(asgd::ps::scheduled_lr(c, 0), 0.1);
  EXPECT_DOUBLE_EQ(asgd::ps::scheduled_lr(c, 2.5), 0.1 * 0.1);
  EXPECT_NEAR(asgd::ps::scheduled_lr(c, 4), 0.1 * 0.1 * 0.1, 1e-15);
}

// The staleness factor scales a learner's whole step, weight decay included:
// zero gradients, weight decay only, 2-softsync with c = 1 so each arrival
// is an update. Arrivals at tau 0, 1, 2 shrink w by lr*wd*factor*w each time.
TEST(ShardCore, StalenessRateScalesWeightDecayToo) {
  for (const std::string policy : {"staleness", "constant"}) {
    asgd::TrainConfig cfg;
    cfg.learners = 2;
    cfg.protocol = "softsync";
    cfg.softsync_n = 2;
    cfg.lr_policy = policy;
    cfg.lr = 0.1;
    cfg.momentum = 0;
    cfg.weight_decay = 0.5;
    asgd::ps::ShardCore core(cfg, 4, 2, 1000);
    Kokkos::deep_copy(core.weights(), 1.0f);
    Kokkos::deep_copy(core.inbox(), 0.0f);
    double want = 1;
    const std::int64_t taus[] = {0, 1, 2};
    for (int i = 0; i < 3; ++i) {
      asgd::ps::Arrival a;
      a.learner = i % 2;
      a.timestamp = core.clock() - taus[i];
      a.samples = 1;
      ASSERT_TRUE(core.accept(a, 0.0));
      const double factor = policy == "staleness" && taus[i] > 0 ? 1.0 / static_cast<double>(taus[i]) : 1.0;
      want -= cfg.lr * cfg.weight_decay * factor * want;
    }
    auto w = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), core.weights());
    for (int j = 0; j < 4; ++j) EXPECT_NEAR(w(j), want, 1e-6) << policy;
    EXPECT_NEAR(core.series().updates.back().rate, cfg.lr * (policy == "staleness" ? 0.5 : 1.0), 1e-12);
  }
}

// The server rule on non-zero gradients against the closed form, for every
// rate policy, c = 1 and c = 2, tau 0, 1, 2 (momentum and decay off, so one
// update moves w by lr * sum_i f(tau_i) g_i / c / d with f = 1/tau for
// `staleness` (tau > 0) and d = max(1, mean tau) for `mean-staleness`).
// No update's rate may exceed alpha0 = lr (it did for mean-staleness with a
// mean tau in (0, 1), which divided by the mean).
TEST(ShardCore, UpdateRuleClosedFormEveryPolicy) {
  struct Step {
    std::vector<std::int64_t> taus;
  };
  for (const std::string policy : {"constant", "staleness", "mean-staleness"})
    for (int c : {1, 2}) {
      asgd::TrainConfig cfg;
      cfg.learners = 2;
      cfg.protocol = "softsync";
      cfg.softsync_n = c == 1 ? 2 : 1;  // c = L / n
      cfg.lr_policy = policy;
      cfg.lr = 0.25;
      cfg.momentum = 0;
      cfg.weight_decay = 0;
      const int len = 5;
      asgd::ps::ShardCore core(cfg, len, 2, 1000000);
      ASSERT_EQ(core.rule().gradients_per_update(), c);
      Kokkos::deep_copy(core.weights(), 1.0f);
      std::vector<double> want(len, 1.0);
      // per update: the taus of its c gradients
      const std::vector<std::vector<std::int64_t>> updates =
          c == 1 ? std::vector<std::vector<std::int64_t>>{{0}, {1}, {2}, {0}}
                 : std::vector<std::vector<std::int64_t>>{{0, 0}, {0, 1}, {2, 1}, {1, 0}};
      int arrival = 0;
      for (const auto& taus : updates) {
        std::vector<double> step(len, 0.0);
        double fsum = 0, mean = 0;
        for (std::size_t i = 0; i < taus.size(); ++i) {
          ++arrival;
          auto in = Kokkos::create_mirror_view(core.inbox());
          for (int j = 0; j < len; ++j) in(j) = static_cast<float>(0.5 * (j + 1) * arrival);
          Kokkos::deep_copy(core.inbox(), in);
          const double f = policy == "staleness" && taus[i] > 0 ? 1.0 / static_cast<double>(taus[i]) : 1.0;
          fsum += f;
          mean += static_cast<double>(taus[i]) / static_cast<double>(taus.size());
          for (int j = 0; j < len; ++j) step[j] += f * in(j);
          asgd::ps::Arrival a;
          a.learner = static_cast<int>(i);
          a.timestamp = core.clock() - taus[i];
          a.samples = 1;
          ASSERT_EQ(core.accept(a, 0.0), i + 1 == taus.size());
        }
        const double d = policy == "mean-staleness" ? std::max(1.0, mean) : 1.0;
        for (int j = 0; j < len; ++j) want[j] -= cfg.lr * step[j] / c / d;
        const double rate = core.series().updates.back().rate;
        EXPECT_NEAR(rate, cfg.lr * fsum / c / d, 1e-12) << policy << " c=" << c;
        EXPECT_LE(rate, cfg.lr + 1e-15) << policy << " c=" << c << ": rate above alpha0";
        EXPECT_NEAR(core.series().updates.back().mean_tau, mean, 1e-12);
      }
      auto w = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), core.weights());
      for (int j = 0; j < len; ++j) EXPECT_NEAR(w(j), want[j], 2e-6 * std::abs(want[j]) + 1e-6) << policy << " c=" << c << " j=" << j;
    }
}
