// nsync's merge rules (src/protocol/merge_*.cpp): each against a hand
// computation over a sequence of pushes on a ShardCore; server-sgd without
// momentum at server_lr = lr n_sync is the sum and at lr n_sync / L the mean; the options are
// refused outside their rule and domain; a virtual run with each rule
// completes, deterministically, and the rules differ; it records every
// minibatch's training error in update order. A merge rule and a protocol
// defined only here, each registered with one line, run through the same
// checks and the same shard.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

#include "common/error.hpp"
#include "config/config.hpp"
#include "io/results.hpp"
#include "protocol/registry.hpp"
#include "ps/protocol.hpp"
#include "ps/shard_core.hpp"
#include "sim/virtual.hpp"
#include "virtual_config.hpp"

namespace fs = std::filesystem;
using asgd::TrainConfig;

namespace {

constexpr int kLen = 5, kLearners = 4;

TrainConfig nsync_cfg(const std::string& merge) {
  TrainConfig c;
  c.protocol = "nsync";
  c.learners = kLearners;
  c.n_sync = 3;
  c.lr = 0.1;
  c.momentum = 0.9;
  c.merge = merge;
  return c;
}

// The pushed change of push k at parameter j.
float delta(int k, int j) { return 0.01f * static_cast<float>((j + 1) * (k % 2 == 0 ? 1 : -2) + k); }

// The weights after pushes 0..pushes-1 into a core starting at w0(j) = 1 + j / 4.
std::vector<double> merged(const TrainConfig& cfg, int pushes) {
  asgd::ps::ShardCore core(cfg, kLen, kLearners, 1000000);
  auto w = Kokkos::create_mirror_view(core.weights());
  for (int j = 0; j < kLen; ++j) w(j) = 1.0f + 0.25f * static_cast<float>(j);
  Kokkos::deep_copy(core.weights(), w);
  for (int k = 0; k < pushes; ++k) {
    auto in = Kokkos::create_mirror_view(core.inbox());
    for (int j = 0; j < kLen; ++j) in(j) = delta(k, j);
    Kokkos::deep_copy(core.inbox(), in);
    asgd::ps::Arrival a;
    a.learner = k % kLearners;
    a.samples = 1;
    EXPECT_TRUE(core.accept(a, 0.0));
  }
  Kokkos::deep_copy(w, core.weights());
  return {w.data(), w.data() + kLen};
}

TEST(Merge, EachRuleAgainstAHandComputation) {
  const int pushes = 6;
  for (const std::string rule : {"sum", "mean", "server-sgd", "adagrad"}) {
    TrainConfig cfg = nsync_cfg(rule);
    if (rule == "server-sgd") cfg.server_lr = 0.3, cfg.server_momentum = 0.5;
    if (rule == "adagrad") cfg.server_lr = 0.02;
    const auto got = merged(cfg, pushes);
    for (int j = 0; j < kLen; ++j) {
      double w = 1.0 + 0.25 * j, acc = 0;
      for (int k = 0; k < pushes; ++k) {
        const double d = delta(k, j), g = -d / (cfg.lr * cfg.n_sync);
        if (rule == "sum") w += d;
        if (rule == "mean") w += d / kLearners;
        if (rule == "server-sgd") acc = 0.5 * acc + g, w -= 0.3 * acc;
        if (rule == "adagrad") acc += g * g, w -= 0.02 * g / (std::sqrt(acc) + 1e-8);
      }
      EXPECT_NEAR(got[j], w, 2e-5 * std::max(1.0, std::abs(w))) << rule << " j " << j;
    }
  }
}

TEST(Merge, ServerSgdIsTheSumOrTheMeanAtTheirRatesWithoutMomentum) {
  const auto sum = merged(nsync_cfg("sum"), 5), mean = merged(nsync_cfg("mean"), 5);
  TrainConfig as_sum = nsync_cfg("server-sgd");
  as_sum.server_lr = as_sum.lr * as_sum.n_sync;
  as_sum.server_momentum = 0;
  const auto sgd = merged(as_sum, 5);
  TrainConfig over_l = as_sum;
  over_l.server_lr = as_sum.lr * as_sum.n_sync / kLearners;
  const auto sgd_l = merged(over_l, 5);
  // the default momentum is the run's (0.9): then it is neither
  const auto with_m = merged(nsync_cfg("server-sgd"), 5);
  TrainConfig m0 = nsync_cfg("server-sgd");
  m0.server_momentum = 0;
  const auto without_m = merged(m0, 5);
  for (int j = 0; j < kLen; ++j) {
    EXPECT_NEAR(sgd[j], sum[j], 1e-6) << j;
    EXPECT_NEAR(sgd_l[j], mean[j], 1e-6) << j;
    EXPECT_GT(std::abs(sum[j] - mean[j]), 1e-3) << j;  // the two differ
    EXPECT_GT(std::abs(with_m[j] - without_m[j]), 1e-4) << j;
  }
}

bool mentions(const TrainConfig& c, const std::string& what) {
  const auto p = asgd::validate(c);
  return std::any_of(p.begin(), p.end(), [&](const std::string& s) { return s.find(what) != std::string::npos; });
}

TEST(Merge, OptionsAreRefusedOutsideTheirRuleAndDomain) {
  EXPECT_TRUE(asgd::validate(nsync_cfg("adagrad")).empty());
  TrainConfig c = nsync_cfg("median");
  EXPECT_TRUE(mentions(c, "merge rule 'median' unknown (sum, mean, server-sgd, adagrad)"));
  c = nsync_cfg("mean");
  c.protocol = "softsync";
  EXPECT_TRUE(mentions(c, "--merge is an option of protocol nsync, not of softsync"));
  c = nsync_cfg("mean");
  c.server_lr = 0.1;
  EXPECT_TRUE(mentions(c, "--server-lr is an option of merge server-sgd or adagrad, not of merge mean"));
  c = nsync_cfg("adagrad");
  c.server_momentum = 0.5;
  EXPECT_TRUE(mentions(c, "--server-momentum is an option of merge server-sgd, not of merge adagrad"));
  c = nsync_cfg("server-sgd");
  c.server_lr = 0;
  EXPECT_TRUE(mentions(c, "--server-lr 0 must be in (0, 1e6)"));
  c.server_lr = NAN;
  EXPECT_TRUE(mentions(c, "--server-lr nan must be in (0, 1e6)"));
  c.server_lr = 0.1;
  c.server_momentum = 1;
  EXPECT_TRUE(mentions(c, "--server-momentum 1 must be in [0, 1)"));
}

TEST(Merge, VirtualRunsWithEachRuleCompleteDeterministicallyAndDiffer) {
  const fs::path dir = fs::temp_directory_path() / ("asgd_merge_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::vector<double> losses;
  for (const std::string rule : {"sum", "mean", "server-sgd", "adagrad"}) {
    TrainConfig c = small_virtual("nsync", dir.string());
    c.learners = 4;
    c.n_sync = 3;
    c.merge = rule;
    if (rule == "server-sgd") c.server_momentum = 0.5;
    if (rule == "adagrad") c.server_lr = 0.01;
    double first = 0;
    for (int rep = 0; rep < 2; ++rep) {
      c.run_id = rule + std::to_string(rep);
      const auto r = asgd::io::read_results(asgd::sim::train_virtual(c, {true, 2.0, 0}).paths.results);
      ASSERT_EQ(r.status, asgd::RunStatus::completed) << rule;
      ASSERT_FALSE(r.evals.empty());
      if (rep == 0) first = r.evals.back().test_loss;
      else EXPECT_EQ(first, r.evals.back().test_loss) << rule;
      EXPECT_LT(r.summary.final_test_error, 0.75) << rule;  // chance is 0.75 with 4 classes
      // every minibatch's error, in update order: update i is the mean of its n_sync
      ASSERT_EQ(r.minibatch_error.size(), r.updates.size() * 3u) << rule;
      for (std::size_t u = 0; u < r.updates.size(); ++u) {
        const double mean = (r.minibatch_error[3 * u] + r.minibatch_error[3 * u + 1] + r.minibatch_error[3 * u + 2]) / 3.0;
        ASSERT_NEAR(mean, r.updates[u].train_error, 1e-6) << rule << " update " << u;
      }
    }
    losses.push_back(first);
  }
  for (std::size_t i = 0; i < losses.size(); ++i)
    for (std::size_t k = i + 1; k < losses.size(); ++k) EXPECT_NE(losses[i], losses[k]) << i << " " << k;
  fs::remove_all(dir);
}

// A merge rule defined here alone: w += s d, s the server_lr it reads
// (default 1/2), the rate shown lr s.
class Scaled final : public asgd::protocol::MergeRule {
 public:
  explicit Scaled(const asgd::protocol::Options& o) : s_(o.server_lr.value_or(0.5)) {}
  const char* name() const override { return "scaled"; }
  double merge(const asgd::protocol::MergeStep& step, asgd::protocol::Vec w, asgd::protocol::Vec,
               asgd::protocol::CVec d) const override {
    Kokkos::View<float*, Kokkos::DefaultExecutionSpace::memory_space, Kokkos::MemoryUnmanaged> wv(w.data, w.size);
    Kokkos::View<const float*, Kokkos::DefaultExecutionSpace::memory_space, Kokkos::MemoryUnmanaged> dv(d.data, d.size);
    const auto s = static_cast<float>(s_);
    Kokkos::parallel_for(w.size, KOKKOS_LAMBDA(std::int64_t i) { wv(i) += s * dv(i); });
    return step.lr * s_;
  }

 private:
  double s_;
};

// A protocol defined here alone: asynchronous, every update the mean of 2 gradients.
class Pairs final : public asgd::protocol::Protocol {
 public:
  explicit Pairs(const asgd::protocol::Options&) {}
  const char* name() const override { return "pairs"; }
  int gradients_per_update() const override { return 2; }
};

void register_test_types() {
  namespace p = asgd::protocol;
  const auto names = p::merge_rule_names();
  if (std::find(names.begin(), names.end(), "scaled") != names.end()) return;
  p::register_merge_rule({"scaled", "w += s d", p::no_options,
                          [](const p::Options& o) -> std::unique_ptr<p::MergeRule> { return std::make_unique<Scaled>(o); },
                          {"server_lr"}});
  p::register_protocol({"pairs", "the mean of 2 gradients per update", p::no_options,
                        [](const p::Options& o) -> std::unique_ptr<p::Protocol> { return std::make_unique<Pairs>(o); },
                        {}});
}

TEST(Merge, ARuleAndAProtocolRegisteredOutsideThePartRunThroughTheSameChecksAndShard) {
  register_test_types();
  TrainConfig c = nsync_cfg("scaled");
  EXPECT_TRUE(asgd::validate(c).empty());
  c.server_lr = 0.25;  // the option it declares
  EXPECT_TRUE(asgd::validate(c).empty());
  const auto got = merged(c, 4);
  for (int j = 0; j < kLen; ++j) {
    double w = 1.0 + 0.25 * j;
    for (int k = 0; k < 4; ++k) w += 0.25 * delta(k, j);
    EXPECT_NEAR(got[j], w, 1e-6) << j;
  }
  // its declared option joins the others' owners; its name the unknown-name list
  c = nsync_cfg("mean");
  c.server_lr = 0.1;
  EXPECT_TRUE(mentions(c, "--server-lr is an option of merge server-sgd or adagrad or scaled, not of merge mean"));
  EXPECT_TRUE(mentions(nsync_cfg("median"), "unknown (sum, mean, server-sgd, adagrad, scaled)"));
  EXPECT_THROW(asgd::protocol::register_merge_rule(asgd::protocol::merge_rules().front()), asgd::Error);

  TrainConfig q = nsync_cfg("sum");
  q.merge.reset();
  q.protocol = "pairs";
  EXPECT_TRUE(asgd::validate(q).empty());
  EXPECT_EQ(asgd::ps::UpdateRule(q).gradients_per_update(), 2);
  asgd::ps::ShardCore core(q, kLen, kLearners, 1000000);
  asgd::ps::Arrival a;
  a.samples = 1;
  EXPECT_FALSE(core.accept(a, 0.0));
  a.learner = 1;
  EXPECT_TRUE(core.accept(a, 0.0));
  EXPECT_EQ(core.clock(), 1);
}

}  // namespace
