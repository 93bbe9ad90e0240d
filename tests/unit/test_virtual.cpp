// Virtual learners resume from a checkpoint exactly: a run killed after a
// checkpoint and started again writes the same series (virtual times
// included), per-learner figures and final weights as an uninterrupted run,
// for every protocol; and the run lifecycle's evaluation schedule.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "config/config.hpp"
#include "io/results.hpp"
#include "ps/session.hpp"
#include "sim/modelled.hpp"
#include "sim/virtual.hpp"
#include "virtual_config.hpp"

namespace fs = std::filesystem;
using asgd::TrainConfig;

namespace {

class Virtual : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("asgd_virtual_" + std::to_string(getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  TrainConfig small(const std::string& protocol) const {
    TrainConfig c = small_virtual(protocol, dir_.string());
    c.eval_every = 0.25;
    c.learners = 4;
    c.softsync_n = 2;
    c.n_sync = 3;
    c.lr_policy = protocol == "softsync" ? "staleness" : "constant";
    c.straggler = 1;
    c.straggler_factor = 2;
    c.checkpoint_every = 5;
    return c;
  }
  fs::path dir_;
  asgd::ps::TrainOptions quiet_{true, 2.0, 0};
};

TEST_P(Virtual, ResumeFromCheckpointEqualsAnUninterruptedRun) {
  TrainConfig c = small(GetParam());
  c.run_id = "whole";
  const auto whole = asgd::sim::train_virtual(c, quiet_);
  c.run_id = "killed";
  auto opt = quiet_;
  opt.abort_after = 13;  // the last checkpoint is at update 10
  EXPECT_THROW(asgd::sim::train_virtual(c, opt), asgd::ps::Aborted);
  const auto ckpt = (dir_ / "t" / "checkpoints" / "killed.h5").string();
  ASSERT_TRUE(fs::exists(ckpt));
  const auto ck = asgd::io::read_checkpoint(ckpt);
  EXPECT_EQ(ck.clock, 10);
  EXPECT_EQ(ck.virtual_state.timestamp.size(), 4u);
  const auto resumed = asgd::sim::train_virtual(c, quiet_);
  EXPECT_TRUE(resumed.resumed);

  const auto a = asgd::io::read_results(whole.paths.results);
  const auto b = asgd::io::read_results(resumed.paths.results);
  ASSERT_EQ(a.updates.size(), b.updates.size());
  ASSERT_GT(a.updates.size(), 20u);
  for (std::size_t i = 0; i < a.updates.size(); ++i) {
    EXPECT_EQ(a.updates[i].wall_s, b.updates[i].wall_s) << "update " << i;
    EXPECT_EQ(a.updates[i].train_loss, b.updates[i].train_loss) << "update " << i;
    EXPECT_EQ(a.updates[i].mean_tau, b.updates[i].mean_tau) << "update " << i;
  }
  ASSERT_EQ(a.evals.size(), b.evals.size());
  for (std::size_t i = 0; i < a.evals.size(); ++i) {
    EXPECT_EQ(a.evals[i].test_loss, b.evals[i].test_loss) << "eval " << i;
    EXPECT_EQ(a.evals[i].wall_s, b.evals[i].wall_s) << "eval " << i;
  }
  EXPECT_EQ(a.staleness_histogram, b.staleness_histogram);
  ASSERT_EQ(a.learners.size(), b.learners.size());
  for (std::size_t l = 0; l < a.learners.size(); ++l) {
    EXPECT_EQ(a.learners[l].gradients, b.learners[l].gradients);
    EXPECT_EQ(a.learners[l].compute_s, b.learners[l].compute_s);
    EXPECT_EQ(a.learners[l].wait_s, b.learners[l].wait_s);
  }
  EXPECT_EQ(a.summary.train_time_s, b.summary.train_time_s);
  EXPECT_EQ(asgd::io::read_checkpoint(whole.paths.checkpoint).weights,
            asgd::io::read_checkpoint(resumed.paths.checkpoint).weights);
}

TEST_P(Virtual, CheckpointOfAnotherLearnerCountIsRefused) {
  TrainConfig c = small(GetParam());
  c.run_id = "r";
  auto opt = quiet_;
  opt.abort_after = 6;
  EXPECT_THROW(asgd::sim::train_virtual(c, opt), asgd::ps::Aborted);
  c.learners = 3;  // same run id, another run
  c.softsync_n = 1;
  EXPECT_THROW(asgd::sim::train_virtual(c, quiet_), asgd::Error);
  EXPECT_FALSE(fs::exists(dir_ / "t" / "runs" / "r.h5"));
}

// A run on a machine profile (the performance model): deterministic, says
// it is modelled and by which profile, and a server that costs more than the
// learners' compute bounds the throughput at its own rate.
TEST_P(Virtual, ProfileRunsAreModelledDeterministicAndServerBound) {
  auto profile = [&](const std::string& name, double accumulate) {
    const auto path = dir_ / (name + ".yaml");
    fs::create_directories(dir_);
    std::ofstream(path) << "name: " << name << "\ncores: {value: 2, assumed: \"t\"}\n"
                        << "waiting_rank_load: {value: 0.1, assumed: \"t\"}\ncompute:\n"
                        << "  - model: mlp\n    batch: 8\n    seconds: {value: 0.01, assumed: \"t\"}\n"
                        << "    cv: {value: 0.1, assumed: \"t\"}\nlink:\n"
                        << "  learner: {latency_s: {value: 1e-5, assumed: \"t\"}, bandwidth_Bps: {value: 1e+9, assumed: \"t\"}}\n"
                        << "  server: {latency_s: {value: 1e-5, assumed: \"t\"}, bandwidth_Bps: {value: 1e+9, assumed: \"t\"}}\n"
                        << "server:\n  accumulate_s_per_param: {value: " << accumulate << ", assumed: \"t\"}\n"
                        << "  update_s_per_param: {value: 0, assumed: \"t\"}\n";
    return path.string();
  };
  TrainConfig c = small(GetParam());
  c.timing = "normal";
  c.compute_s = c.comm_s = 0;
  c.checkpoint_every = 0;
  c.epochs = 0.5;
  c.profile = profile("fast", 1e-9);
  c.run_id = "a";
  const auto a = asgd::io::read_results(asgd::sim::train_virtual(c, quiet_).paths.results);
  c.run_id = "b";
  const auto b = asgd::io::read_results(asgd::sim::train_virtual(c, quiet_).paths.results);
  ASSERT_EQ(a.updates.size(), b.updates.size());
  for (std::size_t i = 0; i < a.updates.size(); ++i) {
    EXPECT_EQ(a.updates[i].wall_s, b.updates[i].wall_s) << "update " << i;
    EXPECT_EQ(a.updates[i].train_loss, b.updates[i].train_loss) << "update " << i;
  }
  EXPECT_NE(a.timing_model_json.find("\"contention\""), std::string::npos) << a.timing_model_json;
  EXPECT_NE(a.timing_model_json.find("\"profile\":\"fast\""), std::string::npos) << a.timing_model_json;
  EXPECT_NE(a.timing_model_json.find("\"modelled\":true"), std::string::npos) << a.timing_model_json;
  // 4 learners at 10 ms a minibatch (5 ranks on 2 cores): far more than a
  // server that takes 50 ms of CPU per push can take
  c.profile = profile("slow", 5e-2 / static_cast<double>(asgd::io::read_checkpoint(
                                                             (dir_ / "t" / "checkpoints" / "a.h5").string())
                                                             .weights.size()));
  c.run_id = "slow";
  const auto s = asgd::io::read_results(asgd::sim::train_virtual(c, quiet_).paths.results);
  std::int64_t pushes = 0;
  for (const auto& u : s.updates) pushes += u.gradients;
  const double per_push = s.updates.back().wall_s / static_cast<double>(pushes);
  EXPECT_GT(per_push, 0.05);  // never faster than the server
  // asynchronous pushes queue at the server: it is the bottleneck (hardsync
  // adds a compute step per round, nsync's short run its start). Its apply
  // shares the cores with the 4 waiting learners' polls (0.1 of a core
  // each), which land on its core as on the idle one: 50 ms x (2 + 0.4) / 2
  if (std::string(GetParam()) == "softsync") {
    EXPECT_GT(per_push, 0.06 * 0.98);
    EXPECT_LT(per_push, 0.06 * 1.05);
  }
  EXPECT_LT(s.summary.samples_per_s, a.summary.samples_per_s / 2);
}

INSTANTIATE_TEST_SUITE_P(Protocols, Virtual, ::testing::Values("hardsync", "softsync", "nsync"));

// A profile's doorbell wake-up reaches the model where the ranks share a node
// (shared windows), not where they exchange messages across nodes.
// A profile of mlp at batch 8 in dir: its exchange ("" for none given) and
// whether it has a doorbell figure.
std::string write_profile(const fs::path& dir, const std::string& exchange, bool bell) {
  const auto path = dir / (exchange + (bell ? "-bell" : "") + ".yaml");
  std::ofstream(path) << "name: p\ncompute:\n"
                      << "  - model: mlp\n    batch: 8\n    seconds: {value: 0.01, assumed: \"t\"}\n"
                      << "    cv: {value: 0.1, assumed: \"t\"}\nlink:\n"
                      << "  learner: {latency_s: {value: 1e-5, assumed: \"t\"}, bandwidth_Bps: {value: 1e+9, assumed: \"t\"}}\n"
                      << "  server: {latency_s: {value: 1e-5, assumed: \"t\"}, bandwidth_Bps: {value: 1e+9, assumed: \"t\"}}\n"
                      << (exchange.empty() ? "" : "  exchange: {value: " + exchange + ", measured: \"t\"}\n")
                      << "server:\n  accumulate_s_per_param: {value: 1e-10, assumed: \"t\"}\n"
                      << "  update_s_per_param: {value: 1e-10, assumed: \"t\"}\n"
                      << "wake:\n  spin_s: {value: 5e-05, stated: \"t\"}\n  max_pause_s: {value: 0.0005, stated: \"t\"}\n"
                      << "  overshoot_s: {value: 6e-05, measured: \"t\"}\n"
                      << (bell ? "  doorbell_s: {value: 2e-05, measured: \"t\"}\n" : "");
  return path.string();
}

TEST(Modelled, ADoorbellCountsOnlyWhereTheRanksShareANode) {
  const fs::path dir = fs::temp_directory_path() / ("asgd-modelled-" + std::to_string(getpid()));
  fs::create_directories(dir);
  auto profile = [&](const std::string& exchange, bool bell) { return write_profile(dir, exchange, bell); };
  TrainConfig c;
  c.model = "mlp";
  c.batch = 8;
  c.learners = 2;
  c.protocol = "softsync";
  c.softsync_n = 2;
  c.timing = "normal";
  auto bell_of = [&](const std::string& exchange, bool bell) {
    c.profile = profile(exchange, bell);
    const asgd::sim::Modelled m = asgd::sim::modelled(c, 1000, 1e3, 1, 0);
    EXPECT_EQ(asgd::sim::describe(m)["wake"]["doorbell_s"].is_null(), m.spec.wake.bell_s < 0);
    return m.spec.wake.bell_s;
  };
  EXPECT_DOUBLE_EQ(bell_of("", true), 2e-5);  // no exchange given: one node's shared windows
  EXPECT_DOUBLE_EQ(bell_of("shared-windows", true), 2e-5);
  EXPECT_LT(bell_of("messages", true), 0.0);
  EXPECT_LT(bell_of("", false), 0.0);
  fs::remove_all(dir);
}

// The model's replies carry no copy where the real learners read the weights
// in place: shared windows, and a protocol under which no shard changes its
// weights while a learner computes (one learner, hardsync); ASGD_IN_PLACE=0
// copies.
TEST(Modelled, RepliesAreNoCopyWhereTheLearnersReadTheWeightsInPlace) {
  const fs::path dir = fs::temp_directory_path() / ("asgd-in-place-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string windows = write_profile(dir, "shared-windows", false), messages = write_profile(dir, "messages", false);
  auto in_place = [&](const std::string& profile, const std::string& protocol, int learners, int n) {
    TrainConfig c;
    c.model = "mlp";
    c.batch = 8;
    c.learners = learners;
    c.protocol = protocol;
    c.softsync_n = n;
    c.timing = "normal";
    c.profile = profile;
    const asgd::sim::Modelled m = asgd::sim::modelled(c, 1000, 1e3, 1, 0);
    EXPECT_EQ(asgd::sim::describe(m)["replies_in_place"].get<bool>(), m.spec.replies_in_place);
    return m.spec.replies_in_place;
  };
  unsetenv("ASGD_IN_PLACE");
  EXPECT_TRUE(in_place(windows, "hardsync", 3, 1));
  EXPECT_TRUE(in_place(windows, "softsync", 1, 1));
  EXPECT_FALSE(in_place(windows, "softsync", 2, 1));  // c = 2 without a barrier: an update while the other computes
  EXPECT_FALSE(in_place(windows, "nsync", 1, 1));     // local steps change the learner's own weights
  EXPECT_FALSE(in_place(messages, "hardsync", 3, 1));
  setenv("ASGD_IN_PLACE", "0", 1);
  EXPECT_FALSE(in_place(windows, "hardsync", 3, 1));
  unsetenv("ASGD_IN_PLACE");
  fs::remove_all(dir);
}

TEST(EvalSchedule, DueWhenTheEpochCrossesAMultiple) {
  asgd::ps::EvalSchedule e(0.5, 0);
  EXPECT_FALSE(e.due(0.49));
  EXPECT_TRUE(e.due(0.5));
  e.done(0.5);
  EXPECT_FALSE(e.due(0.99));
  EXPECT_TRUE(e.due(1.2));
  asgd::ps::EvalSchedule resumed(0.5, 1.2);  // resumed past an evaluation
  EXPECT_FALSE(resumed.due(1.4));
  EXPECT_TRUE(resumed.due(1.5));
}

}  // namespace
