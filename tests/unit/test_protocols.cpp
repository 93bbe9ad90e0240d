// The protocols beyond the seeds, at the level of their rules: the registry
// (names, each option refused outside its protocol and outside its domain),
// DC-ASGD's compensation term against a direct computation (and lambda 0 as
// plain ASGD), SSP's bound, EASGD's elastic exchange against a hand
// computation, and virtual runs of each: SSP's clock spread never above s,
// s = 0 a barrier, dcasgd with lambda 0 bit-identical to asynchronous SGD,
// allreduce bit-identical to hardsync, EASGD's centre evaluated and kept.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "config/config.hpp"
#include "engine/engine.hpp"
#include "io/results.hpp"
#include "nn/zoo.hpp"
#include "protocol/registry.hpp"
#include "ps/local_steps.hpp"
#include "ps/shard_core.hpp"
#include "sim/virtual.hpp"
#include "virtual_config.hpp"

namespace fs = std::filesystem;
using asgd::TrainConfig;

namespace {

std::vector<std::string> problems(const TrainConfig& c) { return asgd::validate(c); }

bool mentions(const std::vector<std::string>& p, const std::string& what) {
  return std::any_of(p.begin(), p.end(), [&](const std::string& s) { return s.find(what) != std::string::npos; });
}

TEST(Registry, EveryProtocolIsRegisteredOnce) {
  const auto names = asgd::protocol::protocol_names();
  for (const char* want : {"hardsync", "softsync", "nsync", "allreduce", "ssp", "easgd", "dcasgd"})
    EXPECT_EQ(std::count(names.begin(), names.end(), want), 1) << want;
}

TEST(Registry, OptionsAreRefusedOutsideTheirProtocolAndDomain) {
  TrainConfig c;
  c.learners = 4;
  EXPECT_TRUE(problems(c).empty());
  c.staleness = 2;  // ssp's option under hardsync
  EXPECT_TRUE(mentions(problems(c), "--staleness is an option of protocol ssp"));
  c.protocol = "ssp";
  EXPECT_TRUE(problems(c).empty());
  c.staleness = -5;
  EXPECT_TRUE(mentions(problems(c), "--staleness -5"));
  c = TrainConfig{};
  c.learners = 4;
  c.protocol = "easgd";
  c.alpha = 1.5;
  EXPECT_TRUE(mentions(problems(c), "--alpha 1.5 must be in (0, 1)"));
  c.alpha = 0.2;
  c.tau = 0;
  EXPECT_TRUE(mentions(problems(c), "--tau 0"));
  c.tau = 3;
  EXPECT_TRUE(problems(c).empty());
  c.protocol = "dcasgd";  // easgd's options under dcasgd
  EXPECT_TRUE(mentions(problems(c), "--tau is an option of protocol easgd"));
  EXPECT_TRUE(mentions(problems(c), "--alpha is an option of protocol easgd"));
  c = TrainConfig{};
  c.protocol = "dcasgd";
  c.lambda_dc = -0.5;
  EXPECT_TRUE(mentions(problems(c), "--lambda-dc -0.5"));
  c.lambda_dc = NAN;
  EXPECT_TRUE(mentions(problems(c), "--lambda-dc"));
  c = TrainConfig{};
  c.protocol = "allreduce";
  c.servers = 2;
  EXPECT_TRUE(mentions(problems(c), "allreduce has no server ranks"));
}

TEST(Ssp, MayReplyWithinTheBound) {
  TrainConfig c;
  c.protocol = "ssp";
  c.staleness = 2;
  const auto p = asgd::protocol::make_protocol(asgd::protocol_options(c));
  EXPECT_TRUE(p->may_reply(5, 3));
  EXPECT_FALSE(p->may_reply(6, 3));
  c.staleness = 0;
  EXPECT_FALSE(asgd::protocol::make_protocol(asgd::protocol_options(c))->may_reply(1, 0));
  EXPECT_TRUE(asgd::protocol::make_protocol(asgd::protocol_options(c))->may_reply(1, 1));
}

// w1 = w0 - lr (g + lambda g*g*(w0 - w_sent)) with momentum and weight decay 0,
// where w_sent are the weights the learner was sent, older than w0.
TEST(DcAsgd, CompensationAgainstADirectComputation) {
  for (double lambda : {0.0, 0.7}) {
    TrainConfig cfg;
    cfg.learners = 2;
    cfg.protocol = "dcasgd";
    cfg.lambda_dc = lambda;
    cfg.lr = 0.5;
    cfg.momentum = 0;
    cfg.weight_decay = 0;
    const int len = 4;
    asgd::ps::ShardCore core(cfg, len, 2, 1000000);
    auto w = Kokkos::create_mirror_view(core.weights());
    for (int j = 0; j < len; ++j) w(j) = 1.0f + 0.25f * static_cast<float>(j);
    Kokkos::deep_copy(core.weights(), w);
    core.sent(0);  // learner 0 computes on these
    std::vector<double> sent(w.data(), w.data() + len);
    auto push = [&](int learner, float scale) {
      auto in = Kokkos::create_mirror_view(core.inbox());
      for (int j = 0; j < len; ++j) in(j) = scale * static_cast<float>(j + 1);
      Kokkos::deep_copy(core.inbox(), in);
      asgd::ps::Arrival a;
      a.learner = learner;
      a.timestamp = 0;
      a.samples = 1;
      core.sent(learner);  // learner 1's own weights: no delay for it
      EXPECT_TRUE(core.accept(a, 0.0));
      core.sent(learner);
    };
    // learner 1 moves the weights; then learner 0's delayed gradient arrives
    core.sent(0);
    for (int j = 0; j < len; ++j) sent[j] = w(j);
    push(1, 0.5f);
    auto before = Kokkos::create_mirror(core.weights());  // a copy (a host mirror view would alias)
    Kokkos::deep_copy(before, core.weights());
    // learner 0's gradient, compensated against `sent` (not re-sent before it arrives)
    auto in = Kokkos::create_mirror_view(core.inbox());
    for (int j = 0; j < len; ++j) in(j) = 0.3f * static_cast<float>(j + 1);
    Kokkos::deep_copy(core.inbox(), in);
    asgd::ps::Arrival a;
    a.learner = 0;
    a.timestamp = 0;
    a.samples = 1;
    ASSERT_TRUE(core.accept(a, 0.0));
    auto after = Kokkos::create_mirror_view(core.weights());
    Kokkos::deep_copy(after, core.weights());
    for (int j = 0; j < len; ++j) {
      const double g = in(j);
      const double want = before(j) - cfg.lr * (g + lambda * g * g * (before(j) - sent[j]));
      EXPECT_NEAR(after(j), want, 1e-6) << "lambda " << lambda << " j " << j;
      if (lambda > 0) {
        EXPECT_GT(std::abs(before(j) - sent[j]), 1e-3);  // the delay is real
      }
    }
  }
}

// d = alpha (x - c); x -= d; d is pushed.
TEST(Easgd, ElasticExchangeAgainstAHandComputation) {
  TrainConfig cfg;
  cfg.protocol = "easgd";
  cfg.learners = 4;
  cfg.alpha = 0.25;
  cfg.model = "mlp";
  const auto spec = asgd::nn::model_spec("mlp", {4, 4, 1}, 3);
  auto eng = asgd::engine::make_engine("cpu", spec, 2);
  eng->init(7);
  const asgd::index_t n = eng->n_params();
  std::vector<float> x(eng->params(), eng->params() + n), centre(static_cast<std::size_t>(n));
  for (asgd::index_t i = 0; i < n; ++i) centre[static_cast<std::size_t>(i)] = 0.01f * static_cast<float>(i % 7);
  const asgd::ps::UpdateRule rule(cfg);
  EXPECT_EQ(rule.local_steps(), 10);  // the default tau
  EXPECT_DOUBLE_EQ(rule.elastic_alpha(), 0.25);
  asgd::data::Dataset none;
  asgd::ps::LocalSteps local(cfg, rule, none);
  local.elastic(*eng, centre.data());
  for (asgd::index_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    const float d = 0.25f * (x[k] - centre[k]);
    EXPECT_EQ(eng->grads()[i], d) << i;
    EXPECT_EQ(eng->params()[i], x[k] - d) << i;
    // the pair's sum is kept: x' + (c + d) = x + c
    EXPECT_NEAR(eng->params()[i] + centre[k] + d, x[k] + centre[k], 1e-6) << i;
  }
}

class VirtualProtocols : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("asgd_protocols_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  TrainConfig base(const std::string& protocol, const std::string& id) const {
    TrainConfig c = small_virtual(protocol, dir_.string());
    c.eval_every = 0.5;
    c.learners = 6;
    c.compute_cv = 0.5;
    c.straggler = 2;
    c.straggler_factor = 3;
    c.checkpoint_every = 0;
    c.run_id = id;
    return c;
  }
  asgd::io::RunResult run(const TrainConfig& c) {
    return asgd::io::read_results(asgd::sim::train_virtual(c, {true, 2.0, 0}).paths.results);
  }
  fs::path dir_;
};

TEST_F(VirtualProtocols, SspClockSpreadNeverExceedsS) {
  for (int s : {0, 1, 3}) {
    TrainConfig c = base("ssp", "ssp" + std::to_string(s));
    c.staleness = s;
    const auto r = run(c);
    ASSERT_EQ(r.status, asgd::RunStatus::completed);
    std::int64_t most = 0;
    for (const auto& u : r.updates) most = std::max(most, u.clock_spread);
    EXPECT_LE(most, s) << "s = " << s;
    if (s == 3) {
      EXPECT_GE(most, 2);  // the straggler makes the bound bite
    }
    if (s == 0) {  // a barrier: every learner the same number of pushes, to one
      std::int64_t lo = r.learners[0].gradients, hi = lo;
      for (const auto& l : r.learners) lo = std::min(lo, l.gradients), hi = std::max(hi, l.gradients);
      EXPECT_LE(hi - lo, 1);
    }
  }
}

TEST_F(VirtualProtocols, DcAsgdWithLambdaZeroIsAsynchronousSgd) {
  TrainConfig a = base("dcasgd", "dc0");
  a.lambda_dc = 0;
  TrainConfig b = base("softsync", "async");
  b.softsync_n = b.learners;  // c = 1: every gradient its own update
  const auto ra = run(a), rb = run(b);
  ASSERT_EQ(ra.updates.size(), rb.updates.size());
  for (std::size_t i = 0; i < ra.updates.size(); ++i)
    ASSERT_EQ(ra.updates[i].train_loss, rb.updates[i].train_loss) << i;
  ASSERT_EQ(ra.evals.size(), rb.evals.size());
  EXPECT_EQ(ra.evals.back().test_loss, rb.evals.back().test_loss);
  TrainConfig d = base("dcasgd", "dc1");
  d.lambda_dc = 2;
  const auto rd = run(d);
  EXPECT_NE(rd.evals.back().test_loss, rb.evals.back().test_loss);  // the term does something
}

TEST_F(VirtualProtocols, AllreduceIsHardsync) {
  const auto a = run(base("allreduce", "ar")), b = run(base("hardsync", "hs"));
  ASSERT_EQ(a.updates.size(), b.updates.size());
  for (std::size_t i = 0; i < a.updates.size(); ++i) {
    ASSERT_EQ(a.updates[i].train_loss, b.updates[i].train_loss) << i;
    ASSERT_EQ(a.updates[i].wall_s, b.updates[i].wall_s) << i;
  }
}

TEST_F(VirtualProtocols, EasgdEvaluatesAndKeepsTheCentre) {
  TrainConfig c = base("easgd", "ea");
  c.tau = 4;
  c.alpha = 0.15;
  c.checkpoint_every = 5;
  auto opt = asgd::ps::TrainOptions{true, 2.0, 0};
  opt.abort_after = 7;  // a checkpoint with the learners' state at update 5
  EXPECT_THROW(asgd::sim::train_virtual(c, opt), asgd::ps::Aborted);
  const auto ck = asgd::io::read_checkpoint((dir_ / "t" / "checkpoints" / "ea.h5").string());
  ASSERT_EQ(ck.virtual_state.centre.size(), ck.virtual_state.weights.size());
  // the checkpoint's weights are the centre: a learner that pulled at update 5
  // holds exactly them as its centre, and its own weights differ
  bool some_equal = false, differ = false;
  const std::size_t P = ck.weights.size();
  for (std::size_t l = 0; l < 6; ++l) {
    const bool same = std::equal(ck.weights.begin(), ck.weights.end(), ck.virtual_state.centre.begin() + l * P);
    some_equal = some_equal || (same && ck.virtual_state.timestamp[l] == ck.clock);
    differ = differ || !std::equal(ck.weights.begin(), ck.weights.end(), ck.virtual_state.weights.begin() + l * P);
  }
  EXPECT_TRUE(some_equal);
  EXPECT_TRUE(differ);
  const auto r = asgd::io::read_results(asgd::sim::train_virtual(c, {true, 2.0, 0}).paths.results);
  EXPECT_EQ(r.status, asgd::RunStatus::completed);
  EXPECT_LT(r.summary.final_test_error, 0.75);  // chance is 0.75 with 4 classes
}

}  // namespace
