// The performance model (perf/cluster.hpp) against cases worked by hand, and
// machine profiles (perf/profile.hpp): reading, writing, every refusal.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "common/error.hpp"
#include "config/config.hpp"
#include "perf/cluster.hpp"
#include "perf/profile.hpp"

namespace asgd::perf {
namespace {

ClusterSpec one(double params = 1000) {
  ClusterSpec s;
  s.shard_params = {params};
  return s;
}

// Runs the cluster for n decisions, releasing the pusher each time (an
// asynchronous server); returns the times of the decisions.
std::vector<double> async_times(Cluster& c, int n) {
  std::vector<double> t;
  for (int i = 0; i < n; ++i) {
    const auto l = c.next();
    if (!l) break;
    t.push_back(c.now());
    c.release({*l});
  }
  return t;
}

TEST(Cluster, OneLearnerCycleIsPullComputePushApply) {
  ClusterSpec s = one(1e6);  // 4 MB each way
  s.learner_latency_s = 1e-5;
  s.server_latency_s = 2e-5;
  s.learner_Bps = 8e9;
  s.server_Bps = 4e9;  // the slower link decides
  s.accumulate_s_per_param = 1e-9;
  s.update_s_per_param = 2e-9;
  Cluster c(s, [](int) { return 0.05; });
  c.start(1.0);
  // the reply copies the weights; the push is a header (the gradient is in
  // the learner's window already): its latency only
  const double transfer = 3e-5 + 4e6 / 4e9;
  const double cycle = transfer + 3e-5 + 0.05 + 1e6 * 3e-9;
  const auto t = async_times(c, 3);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_NEAR(t[0], 1.0 + cycle, 1e-12);
  EXPECT_NEAR(t[1], 1.0 + 2 * cycle, 1e-12);
  EXPECT_NEAR(t[2], 1.0 + 3 * cycle, 1e-12);
  EXPECT_NEAR(c.times(0).compute_s, 3 * 0.05, 1e-12);
}

// Learners that read the weights in the shards' windows: a reply is its
// latency only, as the push is.
TEST(Cluster, RepliesReadInPlaceCarryNoBytes) {
  ClusterSpec s = one(1e6);  // 4 MB each way
  s.learner_latency_s = 1e-5;
  s.server_latency_s = 2e-5;
  s.learner_Bps = s.server_Bps = 4e9;
  s.update_s_per_param = 2e-9;
  s.replies_in_place = true;
  Cluster c(s, [](int) { return 0.05; });
  c.start(1.0);
  const double push = 3e-5, reply = 3e-5;
  const double cycle = push + reply + 0.05 + 1e6 * 2e-9;
  const auto t = async_times(c, 3);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_NEAR(t[0], 1.0 + cycle, 1e-12);
  EXPECT_NEAR(t[2], 1.0 + 3 * cycle, 1e-12);
  EXPECT_NEAR(c.times(0).pull_s, 3 * reply, 1e-12);
}

TEST(Cluster, UpdateCostOnlyAtEveryCthPush) {
  ClusterSpec s = one(1e6);
  s.learners = 2;
  s.gradients_per_update = 2;
  s.accumulate_s_per_param = 1e-9;  // 1 ms per push
  s.update_s_per_param = 1e-8;      // 10 ms per update
  s.inject_update_s = 0.1;          // and 100 ms injected per update
  Cluster c(s, [](int) { return 1.0; });
  c.start(0);
  // both push at 1.0; the first is applied at 1.001, the second (an update) at 1.001 + 0.011 + 0.1
  EXPECT_EQ(c.next(), 0);
  EXPECT_NEAR(c.now(), 1.001, 1e-12);
  c.release({});  // a barrier: nobody yet
  EXPECT_EQ(c.next(), 1);
  EXPECT_NEAR(c.now(), 1.112, 1e-12);
}

TEST(Cluster, ServerBoundThroughputIsItsServiceRate) {
  ClusterSpec s = one(1e6);
  s.learners = 8;
  s.accumulate_s_per_param = 1e-8;  // 10 ms per push: 100 pushes/s at most
  Cluster c(s, [](int) { return 0.001; });
  c.start(0);
  const auto t = async_times(c, 400);
  ASSERT_EQ(t.size(), 400u);
  EXPECT_NEAR((t[399] - t[99]) / 300, 0.01, 1e-9);
}

TEST(Cluster, ComputeBoundThroughputScalesWithLearners) {
  for (int L : {1, 2, 4}) {
    ClusterSpec s = one(10);
    s.learners = L;
    Cluster c(s, [](int) { return 0.1; });
    c.start(0);
    const auto t = async_times(c, 40 * L);
    EXPECT_NEAR((t.back() - t[10 * L - 1]) / (30 * L), 0.1 / L, 1e-9) << L;
  }
}

TEST(Cluster, ALinkIsSharedByItsTransfers) {
  ClusterSpec s = one(1e6);  // 4 MB
  s.learners = 2;
  s.learner_Bps = 4e9;
  s.server_Bps = 4e9;
  Cluster c(s, [](int) { return 0.5; });
  c.start(0);
  // the two first replies share the shard's link: both done at 2 ms; both
  // push (headers) at 0.502; the shard takes learner 0's first
  EXPECT_EQ(c.next(), 0);
  EXPECT_NEAR(c.now(), 0.502, 1e-12);
  EXPECT_NEAR(c.times(0).pull_s, 0.002, 1e-12);
}

TEST(Cluster, CoresAreSharedWhenRanksOutnumberThem) {
  // the time of the first push, every minibatch 0.1 s of CPU
  const auto first = [](const ClusterSpec& spec) {
    Cluster c(spec, [](int) { return 0.1; });
    c.start(0);
    EXPECT_EQ(c.next(), 0);
    return c.now();
  };
  ClusterSpec s = one(10);
  s.learners = 2;
  s.cores = 1;  // 3 ranks on one core: the two computing learners share it
  EXPECT_NEAR(first(s), 0.2, 1e-12);
  // two cores and a waiting rank that takes 0.2 of a core: 2 / 2.2 each
  s.cores = 2;
  s.waiting_rank_load = 0.2;
  EXPECT_NEAR(first(s), 0.11, 1e-12);
  // as many cores as ranks: nobody shares
  s.cores = 3;
  EXPECT_NEAR(first(s), 0.1, 1e-12);
  // one learner computing, two shards waiting (0.2 of a core each) on 2
  // cores: the polls land on the computing core as on the idle one, 2 / 2.4
  ClusterSpec t = one(10);
  t.shards = 2;
  t.shard_params = {5, 5};
  t.cores = 2;
  t.waiting_rank_load = 0.2;
  EXPECT_NEAR(first(t), 0.12, 1e-12);
  // as many cores as ranks: the learner has a core of its own
  t.cores = 3;
  EXPECT_NEAR(first(t), 0.1, 1e-12);
}

TEST(Cluster, ShardsSplitTheBytesAndTheApply) {
  ClusterSpec s;
  s.shards = 2;
  s.shard_params = {5e5, 5e5};
  s.server_Bps = 2e9;  // 1 ms per 2 MB shard
  s.accumulate_s_per_param = 2e-9;  // 1 ms per shard
  Cluster c(s, [](int) { return 0.01; });
  c.start(0);
  // replies: the learner's link (unlimited) takes both shards' at once: 1 ms;
  // the push is headers; each shard applies its half at once: 1 ms
  EXPECT_EQ(c.next(), 0);
  EXPECT_NEAR(c.now(), 0.001 + 0.01 + 0.001, 1e-12);
}

TEST(Cluster, InjectedByteCostOnEveryTransferAtTheShard) {
  ClusterSpec s = one(1e6);
  s.inject_byte_s = 1e-9;  // 4 ms per 4 MB
  Cluster c(s, [](int) { return 0.1; });
  c.start(0);
  const auto t = async_times(c, 2);
  EXPECT_NEAR(t[0], 0.004 + 0.1 + 0.004, 1e-12);
  EXPECT_NEAR(t[1] - t[0], 0.004 + 0.1 + 0.004, 1e-12);
}

TEST(Cluster, DeterministicWithRandomDraws) {
  auto run = [] {
    ClusterSpec s = one(3e6);
    s.learners = 5;
    s.shards = 2;
    s.shard_params = {1.5e6, 1.5e6};
    s.cores = 2;
    s.waiting_rank_load = 0.1;
    s.learner_Bps = 5e9;
    s.server_Bps = 8e9;
    s.accumulate_s_per_param = 3e-10;
    s.update_s_per_param = 5e-10;
    s.gradients_per_update = 2;
    std::mt19937_64 g(3);
    Cluster c(s, [&g](int) { return 0.01 + 1e-3 * static_cast<double>(g() % 100); });
    c.start(0);
    std::vector<std::pair<int, double>> out;
    for (int i = 0; i < 300; ++i) {
      const auto l = c.next();
      out.emplace_back(*l, c.now());
      c.release(i % 2 ? std::vector<int>{*l, (*l + 1) % 5} : std::vector<int>{});
    }
    return out;
  };
  EXPECT_EQ(run(), run());
}

// Messages (ranks on different nodes): a shard sends its replies to every
// released learner at once, and the pushes of several learners flow into it
// at once (it has a receive posted for each).
TEST(Cluster, MessagesRepliesAndPushesGoAtOnce) {
  ClusterSpec s = one(1e6);  // 4 MB: 1 ms at the shard's 4 GB/s
  s.learners = 2;
  s.server_Bps = 4e9;
  s.duplex = true;
  Cluster c(s, [](int) { return 0.5; });
  c.start(0);
  // both replies share the shard's send side: 2 ms; both pushes (at 0.502)
  // share its receive side: in at 0.504, learner 0's taken first
  EXPECT_EQ(c.next(), 0);
  EXPECT_NEAR(c.now(), 0.504, 1e-12);
  EXPECT_NEAR(c.times(0).pull_s, 0.002, 1e-12);
  EXPECT_NEAR(c.times(1).pull_s, 0.002, 1e-12);
  c.release({0});
  // already in, but applied only once the reply to learner 0 is sent (the
  // weights must not change under a send): 1 ms
  EXPECT_EQ(c.next(), 1);
  EXPECT_NEAR(c.now(), 0.505, 1e-12);
}

// One learner, two shards of 4 and 12 MB, its link 4 GB/s the bottleneck.
// Messages: its push goes to one shard at a time (shard 0's part first), and
// shard 0 replies as soon as it has applied its part, while the part for
// shard 1 still flows; the reply and that part each take one side of the
// learner's link. Shared windows: the push is headers (the gradient is in the
// learner's window), the replies share the link.
TEST(Cluster, MessagesSendAndReceiveAtOnceAndShardsReplyOnTheirOwn) {
  const auto run = [](bool duplex) {
    ClusterSpec s;
    s.shards = 2;
    s.shard_params = {1e6, 3e6};
    s.learner_Bps = 4e9;
    s.duplex = duplex;
    Cluster c(s, [](int) { return 0.01; });
    c.start(0);
    const auto t = async_times(c, 2);
    return std::make_pair(t, c.times(0).pull_s);
  };
  // messages: replies by 4 ms, push at 14 ms, shard 0 has its 4 MB at 15 ms
  const auto [dt, dpull] = run(true);
  ASSERT_EQ(dt.size(), 2u);
  EXPECT_NEAR(dt[0], 0.015, 1e-12);
  // shard 0's reply arrives at 16 ms while shard 1's 12 MB flow to 18 ms,
  // its reply arrives at 21 ms; push at 31 ms, shard 0's part at 32 ms
  EXPECT_NEAR(dt[1], 0.032, 1e-12);
  EXPECT_NEAR(dpull, 0.004 + 0.006, 1e-12);
  // shared: the replies share the link (shard 0's done at 2 ms, shard 1's
  // at 4 ms); the push is headers to both shards at 14 ms
  const auto [st, spull] = run(false);
  ASSERT_EQ(st.size(), 2u);
  EXPECT_NEAR(st[0], 0.014, 1e-12);
  // and again: replies by 18 ms, headers at 28 ms
  EXPECT_NEAR(st[1], 0.028, 1e-12);
  EXPECT_NEAR(spull, 0.004 + 0.004, 1e-12);
}

// A send is done when its rest and the bytes queued ahead of it fit the
// sender's queue, a FIFO: one learner, two shards of 4 MB, its link 4 GB/s,
// 3 MB of queue. The part for shard 0 is sent after its first MB (12.25 ms);
// its 3 MB leave first, in at 13 ms, and the part for shard 1 flows behind
// them: its send is done when its last 3 MB fit the queue (13.25 ms), and it
// is in at 14 ms.
TEST(Cluster, ASendIsDoneWhenItsRestFitsTheSendersQueue) {
  ClusterSpec s;
  s.shards = 2;
  s.shard_params = {1e6, 1e6};
  s.learner_Bps = 4e9;
  s.duplex = true;
  s.send_buffer_bytes = 3e6;
  Cluster c(s, [](int) { return 0.01; });
  c.start(0);
  // the two replies share the learner's receive side: 2 ms; push at 12 ms
  EXPECT_EQ(c.next(), 0);
  EXPECT_NEAR(c.times(0).pull_s, 0.002, 1e-12);
  EXPECT_NEAR(c.now(), 0.013, 1e-12);
  EXPECT_NEAR(c.times(0).push_s, 0, 1e-12);  // part 1's send is not done yet
  // shard 1 has its part at 14 ms and replies (to 15 ms): the next push at
  // 25 ms is in at shard 0 at 26 ms, the first push's send took 1.25 ms
  c.release({0});
  EXPECT_EQ(c.next(), 0);
  EXPECT_NEAR(c.now(), 0.026, 1e-12);
  EXPECT_NEAR(c.times(0).push_s, 0.00125, 1e-12);
}

// A shaped link's token bucket: after a pause the first burst_bytes of a
// transfer pass at once. One learner, one shard, 400 KB each way at 1 MB/s,
// 100 KB buckets: every transfer after a pause of 0.1 s or more takes 0.3 s.
TEST(Cluster, ATokenBucketLetsTheFirstBytesThroughAfterAPause) {
  ClusterSpec s = one(1e5);
  s.learner_Bps = s.server_Bps = 1e6;
  s.duplex = true;
  s.burst_bytes = 1e5;
  Cluster c(s, [](int) { return 1.0; });
  c.start(0);
  EXPECT_EQ(c.next(), 0);  // reply to 0.3 s, compute to 1.3 s, push in at 1.6 s
  EXPECT_NEAR(c.now(), 1.6, 1e-12);
  EXPECT_NEAR(c.times(0).pull_s, 0.3, 1e-12);
  c.release({0});
  EXPECT_EQ(c.next(), 0);  // reply to 1.9 s, compute to 2.9 s, push in at 3.2 s
  EXPECT_NEAR(c.now(), 3.2, 1e-12);
  // without buckets: 0.4 s a transfer
  s.burst_bytes = 0;
  Cluster d(s, [](int) { return 1.0; });
  d.start(0);
  d.next();
  EXPECT_NEAR(d.now(), 1.8, 1e-12);
}

// MPI's rendezvous over messages: a message above eager_bytes flows from the
// receiver's next poll, once the sender has noticed the answer at a poll of
// its own. One learner, one shard (polling from 0), 40 KB each way at 1 MB/s,
// a 1 s step, polls every 0.25 s at most (at 0.262143 s + 0.25 k): the push
// made at 1.04 s lands at 1.08 s and is noticed at 1.262143 s; sent by
// rendezvous it flows from the shard's poll at 1.262143 s plus the learner's
// first poll after 0.222143 s of waiting (0.262143 s: 0.04 s later), lands
// at 1.342143 s and is noticed at the next poll, 1.512143 s.
TEST(Cluster, ALargeMessageFlowsFromTheReceiversNextPoll) {
  ClusterSpec s = one(1e4);
  s.learner_Bps = s.server_Bps = 1e6;
  s.duplex = true;
  s.wake = WakeSchedule{0, 0.25, 0, true};
  const auto first = [](ClusterSpec spec) {
    Cluster c(spec, [](int) { return 1.0; });
    c.start(0);
    EXPECT_EQ(c.next(), 0);
    return c.now();
  };
  EXPECT_NEAR(first(s), 1.262143, 1e-9);
  s.eager_bytes = 4e4;  // the message fits: no change
  EXPECT_NEAR(first(s), 1.262143, 1e-9);
  s.eager_bytes = 65536;
  EXPECT_NEAR(first(s), 1.262143, 1e-9);
  s.eager_bytes = 1e4;
  EXPECT_NEAR(first(s), 1.512143, 1e-9);
}

// The bytes flowing take cpu_s_per_byte of the cores before the ranks' work.
// 2 learners and 1 shard on 1 core, 1 MB each way at 1 MB/s per side: the
// replies share the shard's side to 2 s; the learners compute together at
// half a core each, learner 1 (0.5 s of CPU) to 3 s, learner 0 (1 s) then
// alone, to 3.5 s. At 0.5 us a byte, learner 1's push flowing from 3 s
// takes half the core: learner 0 computes at half speed to 4 s.
TEST(Cluster, FlowingBytesTakeTheCoresFirst) {
  ClusterSpec s = one(2.5e5);
  s.learners = 2;
  s.cores = 1;
  s.learner_Bps = s.server_Bps = 1e6;
  s.duplex = true;
  const auto run = [](const ClusterSpec& spec) {
    Cluster c(spec, [](int l) { return l == 0 ? 1.0 : 0.5; });
    c.start(0);
    for (int i = 0; i < 2; ++i) c.release({c.next().value()});
    return c;
  };
  const Cluster free = run(s);
  EXPECT_NEAR(free.times(0).compute_s, 1.5, 1e-9);
  EXPECT_NEAR(free.times(1).compute_s, 1.0, 1e-9);
  s.cpu_s_per_byte = 0.5e-6;
  const Cluster taxed = run(s);
  EXPECT_NEAR(taxed.times(0).compute_s, 2.0, 1e-9);
  // the cores' account holds the network's share
  EXPECT_EQ(taxed.usage().front().what, "cores");
  EXPECT_GT(taxed.usage().front().share, free.usage().front().share + 0.1);
}

// What bounds a run, in the model's own account: with 4 learners and one
// shard on 25 MB/s links the shard's link is busy all the time; with a
// 50 s step on 2 cores for 5 ranks the cores are.
TEST(Cluster, TheBusiestResourceIsWhatBoundsTheRun) {
  const auto run = [](double step, double cores) {
    ClusterSpec s;
    s.learners = 4;
    s.shard_params = {3.3e6};
    s.learner_Bps = s.server_Bps = 25e6;
    s.duplex = true;
    s.cores = cores;
    Cluster c(s, [step](int) { return step; });
    c.start(0);
    for (int i = 0; i < 40; ++i) {
      const auto l = c.next();
      c.release({*l});
    }
    return c;
  };
  const Cluster links = run(0.01, 0);
  EXPECT_EQ(links.busiest().what.rfind("shard 0 ", 0), 0u) << links.busiest().what;
  EXPECT_GT(links.busiest().share, 0.9);
  EXPECT_LE(links.busiest().share, 1.0 + 1e-9);
  const Cluster cores = run(50.0, 2);
  EXPECT_EQ(cores.busiest().what, "cores");
  EXPECT_GT(cores.busiest().share, 0.9);
  EXPECT_EQ(cores.usage().front().what, "cores");
  EXPECT_EQ(cores.usage().size(), 1u + 2 * 4 + 2);  // the cores, each learner's and the shard's two sides
  ASSERT_TRUE(cores.cores_share());
  EXPECT_DOUBLE_EQ(*cores.cores_share(), cores.usage().front().share);
  EXPECT_FALSE(links.cores_share());  // no limit on the cores: no share
}

// Hardsync rounds across nodes: a lenet-sized model (13 MB a push) on
// 25 MB/s links. From 2 learners on, one shard's link bounds the run (it
// carries every push and every reply); a second shard on a node of its own
// halves each shard's bytes and doubles the throughput. With one learner its
// own link bounds the run, and a second shard gains only the overlap of
// shard 0's reply with the push's second half (0.78 s of transfers a round
// against 1.04 s: 1.3x with the 0.09 s compute step, less the send buffers').
TEST(Cluster, OneShardsLinkSaturatesAndASecondRelievesIt) {
  const auto rate = [](int learners, int shards) {
    ClusterSpec s;
    s.learners = learners;
    s.shards = shards;
    s.shard_params.assign(static_cast<std::size_t>(shards), 3.3e6 / shards);
    s.learner_Bps = s.server_Bps = 25e6;
    s.duplex = true;
    s.send_buffer_bytes = 2.6e6;
    Cluster c(s, [](int) { return 0.09; });
    c.start(0);
    std::vector<int> all(static_cast<std::size_t>(learners));
    for (int l = 0; l < learners; ++l) all[static_cast<std::size_t>(l)] = l;
    double t0 = 0;
    const int rounds = 12;
    for (int r = 0; r < rounds; ++r) {
      for (int p = 0; p < learners; ++p) {
        EXPECT_TRUE(c.next());
        c.release(p + 1 == learners ? all : std::vector<int>{});
      }
      if (r == 1) t0 = c.now();
    }
    return (rounds - 2) * learners / (c.now() - t0);  // minibatches per second
  };
  EXPECT_NEAR(rate(4, 1) / rate(2, 1), 1.0, 0.05);  // the shard's link is the bound
  EXPECT_GT(rate(4, 2) / rate(4, 1), 1.8);
  EXPECT_GT(rate(1, 2) / rate(1, 1), 1.15);
  EXPECT_LT(rate(1, 2) / rate(1, 1), 1.35);
}

TEST(Cluster, NothingLeftWhenEveryoneWaits) {
  ClusterSpec s = one(10);
  Cluster c(s, [](int) { return 0.1; });
  c.start(0);
  ASSERT_EQ(c.next(), 0);
  c.release({});
  EXPECT_FALSE(c.next().has_value());
}

// The poll that notices an event: within the spin, at once; then at the end
// of the sleep it falls in (1, 2, 4, ... us, each `overshoot` longer), and
// past the doubling at steps of the longest pause.
TEST(Wake, AnEventIsNoticedAtTheNextPoll) {
  const WakeSchedule w{50e-6, 8e-6, 2e-6, true};
  EXPECT_EQ(wake_delay(w, 30e-6), 0.0);
  EXPECT_EQ(wake_delay(WakeSchedule{50e-6, 8e-6, 2e-6, false}, 1.0), 0.0);
  // polls at 50, 53, 57, 63, then every 10 us: 73, 83, ...
  EXPECT_NEAR(wake_delay(w, 51e-6), 2e-6, 1e-12);
  EXPECT_NEAR(wake_delay(w, 53e-6), 0.0, 1e-12);
  EXPECT_NEAR(wake_delay(w, 60e-6), 3e-6, 1e-12);
  EXPECT_NEAR(wake_delay(w, 64e-6), 9e-6, 1e-12);
  EXPECT_NEAR(wake_delay(w, 1001e-6), 2e-6, 1e-12);  // 63 + 94 x 10 = 1003
  for (double t = 51e-6; t < 5e-3; t *= 1.37) {
    const double d = wake_delay(w, t);
    EXPECT_GE(d, 0.0) << t;
    EXPECT_LT(d, 10e-6 + 1e-12) << t;  // never more than one pause and its overshoot
  }
}

// With a doorbell (ranks of one node), an event is noticed at the next poll
// or the doorbell's wake-up after it, whichever comes first; within the spin,
// at once as without.
TEST(Wake, ADoorbellEndsTheWaitWhenItComesBeforeThePoll) {
  WakeSchedule w{50e-6, 500e-6, 2e-6, true};
  w.bell_s = 15e-6;
  EXPECT_EQ(wake_delay(w, 30e-6), 0.0);
  WakeSchedule no_bell = w;
  no_bell.bell_s = -1;
  for (double t = 51e-6; t < 0.1; t *= 1.37) {
    const double d = wake_delay(w, t);
    EXPECT_NEAR(d, std::min(15e-6, wake_delay(no_bell, t)), 1e-15) << t;
  }
  EXPECT_NEAR(wake_delay(w, 10e-3), 15e-6, 1e-15);  // deep into the 500 us pauses
  w.on = false;
  EXPECT_EQ(wake_delay(w, 10e-3), 0.0);
}

// A waiting rank's load: its polls' CPU over their spacing, the overshoot
// alone while it spins, then each pause and its overshoot; it stops changing
// once the pauses reach the longest.
TEST(Wake, AWaitsLoadIsItsPollsCpuOverTheirSpacing) {
  const WakeSchedule w{50e-6, 8e-6, 2e-6, true};
  EXPECT_NEAR(wait_load(w, PollCost{0, 1e-6}, 30e-6), 0.5, 1e-12);
  EXPECT_NEAR(wait_load(w, PollCost{0, 1e-6}, 51e-6), 1.0 / 3, 1e-12);  // the 1 us pause: polls 3 us apart
  EXPECT_NEAR(wait_load(w, PollCost{0, 1e-6}, 54e-6), 0.25, 1e-12);
  EXPECT_NEAR(wait_load(w, PollCost{0, 1e-6}, 60e-6), 1.0 / 6, 1e-12);
  EXPECT_NEAR(wait_load(w, PollCost{0, 1e-6}, 63e-6), 0.1, 1e-12);
  EXPECT_NEAR(wait_load(w, PollCost{0, 1e-6}, 10.0), 0.1, 1e-12);
  EXPECT_EQ(wait_load(w, PollCost{0, 1.0}, 30e-6), 1.0);  // never more than a core
  EXPECT_NEAR(next_load_change(w, 0), 50e-6, 1e-12);
  EXPECT_NEAR(next_load_change(w, 50e-6), 53e-6, 1e-12);
  EXPECT_NEAR(next_load_change(w, 53e-6), 57e-6, 1e-12);
  EXPECT_NEAR(next_load_change(w, 57e-6), 63e-6, 1e-12);
  EXPECT_EQ(next_load_change(w, 63e-6), std::numeric_limits<double>::infinity());
  // for every wait, the change comes later than now and the load never grows
  for (double t = 1e-6; t < 1e-3; t *= 1.21) {
    EXPECT_GT(next_load_change(w, t), t) << t;
    EXPECT_LE(wait_load(w, PollCost{0, 1e-6}, next_load_change(w, t) + 1e-9), wait_load(w, PollCost{0, 1e-6}, t)) << t;
  }
}

// A wait's mean load over its first span: each stretch of the schedule at
// its own load (0.5 while it spins, then 1/3, 1/4, 1/6 and 0.1).
TEST(Wake, AWaitsMeanLoadWalksItsSchedule) {
  const WakeSchedule w{50e-6, 8e-6, 2e-6, true};
  const PollCost c{0, 1e-6};
  EXPECT_NEAR(mean_wait_load(w, c, 100e-6), (50 * 0.5 + 3.0 / 3 + 4 * 0.25 + 6.0 / 6 + 37 * 0.1) / 100, 1e-12);
  EXPECT_NEAR(mean_wait_load(w, c, 20e-6), 0.5, 1e-12);
  EXPECT_NEAR(mean_wait_load(w, c, 0), 0.5, 1e-12);
  // a share of a core while waiting adds to every stretch
  EXPECT_NEAR(mean_wait_load(w, PollCost{0.2, 1e-6}, 100e-6), 0.317 + 0.2, 1e-12);
}

// The calibration's two loads split a wait's cost between its time and its
// polls: the long wait's load is kept, and a wait of kBriefWait_s has, on
// average, the brief load; outside what the two terms can give, one of them.
TEST(Wake, TwoLoadsSplitAWaitsCostBetweenItsTimeAndItsPolls) {
  const WakeSchedule w{50e-6, 500e-6, 68e-6, true};
  const double gap = 568e-6;
  const PollCost dense = poll_cost(w, 0.1, -1);  // no brief figure: the polls cost everything
  EXPECT_NEAR(dense.per_wait, 0, 1e-15);
  EXPECT_NEAR(dense.per_poll_s, 0.1 * gap, 1e-15);
  const double most = mean_wait_load(w, dense, kBriefWait_s);
  EXPECT_GT(most, 0.5);  // dense polls early in a wait
  EXPECT_EQ(poll_cost(w, 0.1, most + 0.1).per_poll_s, dense.per_poll_s);
  const PollCost flat = poll_cost(w, 0.1, 0.05);  // brief at most long: the polls cost nothing
  EXPECT_EQ(flat.per_wait, 0.1);
  EXPECT_EQ(flat.per_poll_s, 0.0);
  for (double brief : {0.12, 0.3, 0.5}) {
    const PollCost c = poll_cost(w, 0.1, brief);
    EXPECT_GT(c.per_wait, 0) << brief;
    EXPECT_GT(c.per_poll_s, 0) << brief;
    EXPECT_LT(c.per_poll_s, dense.per_poll_s) << brief;
    EXPECT_NEAR(mean_wait_load(w, c, kBriefWait_s), brief, 1e-9) << brief;
    EXPECT_NEAR(wait_load(w, c, 10.0), 0.1, 1e-12) << brief;  // the long wait's load
  }
  // no schedule: waiting_rank_load throughout
  WakeSchedule off = w;
  off.on = false;
  EXPECT_EQ(poll_cost(off, 0.1, 0.3).per_wait, 0.1);
  EXPECT_EQ(poll_cost(off, 0.1, 0.3).per_poll_s, 0.0);
}

// With ranks outnumbering the cores a waiting rank takes what its polls cost:
// waiting_rank_load (measured on a long wait) gives a poll's CPU, and a rank
// early in its wait, polling densely, takes more of the cores than one that
// has waited long.
TEST(Cluster, AWaitingRanksLoadFollowsItsPolls) {
  ClusterSpec s = one(10);
  s.learners = 2;
  s.cores = 2;
  s.waiting_rank_load = 0.1;  // a poll: 0.1 x (0.5 + 0.5) ms = 100 us of CPU
  const auto first = [&](WakeSchedule w) {
    s.wake = w;
    Cluster c(s, [](int) { return 0.1; });
    c.start(0);
    EXPECT_TRUE(c.next().has_value());
    return c.now();
  };
  // the shard spins through the whole compute: 100 us per 0.5 ms, 0.2 of a
  // core, and the learners share the rest: 2 / 2.2 each
  EXPECT_NEAR(first(WakeSchedule{1.0, 0.5e-3, 0.5e-3, true}), 0.11, 1e-9);
  // sleeping from the start, its polls thin out within 5 ms to the long
  // wait's 0.1 of a core: a little slower than 2 / 2.1 each
  const double sleeping = first(WakeSchedule{0, 0.5e-3, 0.5e-3, true});
  EXPECT_GT(sleeping, 0.105 + 1e-5);
  EXPECT_LT(sleeping, 0.106);
  // no schedule: waiting_rank_load throughout
  s.wake = WakeSchedule{};
  Cluster c(s, [](int) { return 0.1; });
  c.start(0);
  c.next();
  EXPECT_NEAR(c.now(), 0.105, 1e-9);
  // a brief wait measured as costly as a long one: its polls cost nothing, the
  // spinning shard takes the long wait's 0.1 of a core, 2 / 2.1 each
  s.brief_wait_load = 0.1;
  EXPECT_NEAR(first(WakeSchedule{1.0, 0.5e-3, 0.5e-3, true}), 0.105, 1e-9);
  s.brief_wait_load = -1;
  // as many cores as ranks: waiting costs nothing, dense polls or not
  s.cores = 3;
  EXPECT_NEAR(first(WakeSchedule{1.0, 0.5e-3, 0.5e-3, true}), 0.1, 1e-9);
}

// A learner that waits past the spin starts computing at the poll after its
// reply; an idle shard takes a push at the poll after it came; each push
// costs the shard per_push_s.
TEST(Cluster, WaitsEndAtAPollAndEachPushCostsTheShard) {
  ClusterSpec s = one(1000);
  s.accumulate_s_per_param = 1e-7;  // the apply: 100 us, a wait past the spin
  s.per_push_s = 20e-6;
  s.wake = WakeSchedule{50e-6, 500e-6, 0, true};
  Cluster c(s, [](int) { return 1e-3; });
  c.start(0);
  const auto t = async_times(c, 3);
  ASSERT_EQ(t.size(), 3u);
  // The shard idles from 0 and polls at 50, 51, 53, ..., 561, then every 500 us:
  // the push made at 1000 us is noticed at 1061, applied (20 + 100 us) at 1181.
  EXPECT_NEAR(t[0], 1181e-6, 1e-12);
  // The learner waited 120 us for the reply: its polls at 50, 51, 53, 57, 65,
  // 81, 113, 177 us start its compute 57 us late; the shard, idle for 1057 us,
  // notices the next push 4 us late (at 1061): 1000 + 120 + 57 + 4.
  EXPECT_NEAR(t[1] - t[0], 1181e-6, 1e-12);
  EXPECT_NEAR(t[2] - t[1], 1181e-6, 1e-12);
  EXPECT_NEAR(c.times(0).wait_s, 3 * 120e-6 + 2 * 57e-6, 1e-12);  // the applies, and the late polls
  const double cycle = t[2] - t[1];
  ClusterSpec plain = one(1000);
  plain.accumulate_s_per_param = 1e-7;
  Cluster p(plain, [](int) { return 1e-3; });
  p.start(0);
  const auto u = async_times(p, 3);
  EXPECT_NEAR(u[2] - u[1], 1e-3 + 100e-6, 1e-12);
  EXPECT_NEAR(cycle - (u[2] - u[1]), 20e-6 + 57e-6 + 4e-6, 1e-12);
}

// Over shared windows a shard waits for its learners' copies of a reply
// (their pull-done messages) and notices them at a poll, as it notices pushes.
TEST(Cluster, AShardNoticesTheCopiesOfItsReplyAtAPoll) {
  ClusterSpec s = one(1000);  // 4000 bytes each way: 100 us at 4e7 B/s
  s.learner_Bps = s.server_Bps = 4e7;
  s.wake = WakeSchedule{50e-6, 500e-6, 0, true};
  Cluster c(s, [](int) { return 1e-3; });
  c.start(0);
  const auto t = async_times(c, 3);
  ASSERT_EQ(t.size(), 3u);
  // reply 100 us; the learner, 100 us into its wait, starts 13 us late (poll at 113);
  // the shard, 100 us into its wait for the copy, goes on at 113 too, idles 1000 us
  // and takes the push (a header) 61 us late (poll at 1061 of that wait).
  EXPECT_NEAR(t[1] - t[0], 100e-6 + 13e-6 + 1e-3 + 61e-6, 1e-12);
  EXPECT_NEAR(t[2] - t[1], t[1] - t[0], 1e-12);
}

// ------------------------------------------------------------------ profiles

class Profiles : public ::testing::Test {
 protected:
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("asgd-test-perf-" + std::to_string(::getpid()));
  void SetUp() override { std::filesystem::create_directories(dir); }
  void TearDown() override { std::filesystem::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) {
    const auto p = (dir / name).string();
    std::ofstream(p) << text;
    return p;
  }
  static std::string valid() {
    return "name: t\n"
           "cores: {value: 2, measured: \"affinity\"}\n"
           "compute:\n"
           "  - model: lenet\n    batch: 64\n    seconds: {value: 0.07, measured: \"timed\"}\n"
           "    cv: {value: 0.01, measured: \"timed\"}\n"
           "  - device: cuda\n    gflops: {value: 500, assumed: \"a GPU\"}\n    cv: {value: 0.02, assumed: \"x\"}\n"
           "link:\n"
           "  learner: {latency_s: {value: 1e-6, measured: \"p\"}, bandwidth_Bps: {value: 1e+10, measured: \"p\"}}\n"
           "  server: {latency_s: {value: 1e-6, measured: \"p\"}, bandwidth_Bps: {value: 1e+10, measured: \"p\"}}\n"
           "  pcie_Bps: {value: 6e+9, stated: \"the paper, p. 3\"}\n"
           "server:\n"
           "  accumulate_s_per_param: {value: 2e-10, measured: \"core\"}\n"
           "  update_s_per_param: {value: 4e-10, measured: \"core\"}\n";
  }
  // The error message of reading `text`, or "" when it reads.
  std::string refusal(const std::string& text) {
    try {
      read_profile(write("p.yaml", text));
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(Profiles, ReadsWritesAndReadsBack) {
  const Profile p = read_profile(write("p.yaml", valid()));
  EXPECT_EQ(p.name, "t");
  ASSERT_EQ(p.compute.size(), 2u);
  EXPECT_DOUBLE_EQ(p.compute[0].seconds->value, 0.07);
  EXPECT_EQ(p.compute[1].gflops->source, "assumed");
  EXPECT_EQ(p.pcie_Bps->note, "the paper, p. 3");
  const auto again = write("q.yaml", profile_yaml(p));
  const Profile q = read_profile(again);
  EXPECT_EQ(profile_yaml(q), profile_yaml(p));
}

// Texts that need quoting and figures that 6 digits would round come back
// exactly (fuzz_profile found a model name in single quotes read back without
// them: the model was written unquoted).
TEST_F(Profiles, TheExchangeReadsBackAndIsChecked) {
  std::string text = valid();
  const std::string at = "  pcie_Bps:";
  text.insert(text.find(at), "  exchange: {value: messages, measured: \"two hosts\"}\n");
  const Profile p = read_profile(write("p.yaml", text));
  ASSERT_TRUE(p.exchange);
  EXPECT_EQ(p.exchange->value, "messages");
  EXPECT_EQ(p.exchange->note, "two hosts");
  EXPECT_EQ(profile_yaml(read_profile(write("q.yaml", profile_yaml(p)))), profile_yaml(p));
  EXPECT_FALSE(read_profile(write("r.yaml", valid())).exchange);  // absent: shared windows
  auto refused = [&](const std::string& entry) {
    std::string t = valid();
    t.insert(t.find(at), "  exchange: " + entry + "\n");
    return refusal(t);
  };
  EXPECT_NE(refused("{value: ethernet, measured: \"x\"}").find("link.exchange.value: 'ethernet' is not messages"),
            std::string::npos);
  EXPECT_NE(refused("{value: messages}").find("link.exchange: say where"), std::string::npos);
  EXPECT_NE(refused("{value: messages, measured: \"\"}").find("link.exchange.measured: say how"),
            std::string::npos);
  EXPECT_NE(refused("messages").find("link.exchange: want {value"), std::string::npos);
}

// The network's CPU per byte and MPI's eager limit: optional, read back, and
// a bad value is named by its key.
TEST_F(Profiles, TheNetworksCpuAndEagerLimitReadBackAndAreChecked) {
  const std::string at = "  pcie_Bps:";
  std::string text = valid();
  text.insert(text.find(at), "  cpu_s_per_byte: {value: 6e-09, measured: \"busy\"}\n"
                             "  eager_bytes: {value: 65536, stated: \"ompi_info\"}\n");
  const Profile p = read_profile(write("p.yaml", text));
  ASSERT_TRUE(p.cpu_s_per_byte && p.eager_bytes);
  EXPECT_DOUBLE_EQ(p.cpu_s_per_byte->value, 6e-9);
  EXPECT_EQ(p.eager_bytes->source, "stated");
  EXPECT_EQ(profile_yaml(read_profile(write("q.yaml", profile_yaml(p)))), profile_yaml(p));
  const Profile none = read_profile(write("r.yaml", valid()));
  EXPECT_FALSE(none.cpu_s_per_byte || none.eager_bytes);
  const auto refused = [&](const std::string& entry) {
    std::string t = valid();
    t.insert(t.find(at), entry + "\n");
    return refusal(t);
  };
  EXPECT_NE(refused("  cpu_s_per_byte: {value: -1, measured: \"x\"}").find("link.cpu_s_per_byte"), std::string::npos);
  EXPECT_NE(refused("  eager_bytes: {value: 1e13, measured: \"x\"}").find("link.eager_bytes"), std::string::npos);
  EXPECT_NE(refused("  eager_bytes: {value: 65536}").find("link.eager_bytes"), std::string::npos);
}

TEST_F(Profiles, TextsAndFiguresComeBackExactly) {
  std::string text = valid();
  const auto at = [&](const std::string& from, const std::string& to) {
    const auto i = text.find(from);
    ASSERT_NE(i, std::string::npos) << from;
    text.replace(i, from.size(), to);
  };
  at("model: lenet", "model: \"'a' #b: ~\"");
  at("value: 0.07", "value: 0.123456789012345");
  at("value: 1e-6, measured: \"p\"}, bandwidth", "value: 2.2250738585072014e-308, measured: \"p\"}, bandwidth");
  at("value: 500, assumed: \"a GPU\"", "value: 500, assumed: \"tab\\tnew\\nline \\\"q\\\" \\\\ \\x01 \\u0085 \\ufeff\"");
  at("name: t", "name: \"- [x]\"");
  const Profile p = read_profile(write("p.yaml", text));
  EXPECT_EQ(p.compute[0].model, "'a' #b: ~");
  EXPECT_EQ(p.compute[1].gflops->note, "tab\tnew\nline \"q\" \\ \x01 \u0085 \ufeff");
  const Profile q = read_profile(write("q.yaml", profile_yaml(p)));
  EXPECT_EQ(q.name, p.name);
  EXPECT_EQ(q.compute[0].model, p.compute[0].model);
  EXPECT_EQ(q.compute[0].seconds->value, 0.123456789012345);
  EXPECT_EQ(q.learner.latency_s.value, 2.2250738585072014e-308);
  EXPECT_EQ(q.compute[1].gflops->note, p.compute[1].gflops->note);
  EXPECT_EQ(profile_yaml(q), profile_yaml(p));
}

TEST_F(Profiles, ComputeTimeByModelThenByThroughput) {
  const Profile p = read_profile(write("p.yaml", valid()));
  const auto lenet = compute_time(p, "lenet", 64, 1, 1e6);
  ASSERT_TRUE(lenet);
  EXPECT_DOUBLE_EQ(lenet->mean_s, 0.07);
  EXPECT_FALSE(lenet->cuda);
  const auto mlp = compute_time(p, "mlp", 32, 1, 2e6);  // 2 MFLOP x 32 / 500 GFLOP/s
  ASSERT_TRUE(mlp);
  EXPECT_DOUBLE_EQ(mlp->mean_s, 2e6 * 32 / 500e9);
  EXPECT_TRUE(mlp->cuda);
  EXPECT_NE(mlp->from.find("compute[1]"), std::string::npos);
}

TEST_F(Profiles, NoComputeTimeForAModelIsRefusedByName) {
  std::string text = valid();
  text.erase(text.find("  - device: cuda"), text.find("link:") - text.find("  - device: cuda"));
  const Profile p = read_profile(write("p.yaml", text));
  EXPECT_FALSE(compute_time(p, "alexnet", 64, 1, 1e9));
  EXPECT_FALSE(compute_time(p, "lenet", 32, 1, 1e9));  // another batch
  const std::string msg = no_compute_time(p, "alexnet", 64, 1);
  EXPECT_NE(msg.find("p.yaml"), std::string::npos);
  EXPECT_NE(msg.find("alexnet"), std::string::npos);
  EXPECT_NE(msg.find("compute"), std::string::npos);
}

// The per-exchange figures: optional, read back exactly, checked.
TEST_F(Profiles, PerPushAndWakeReadBackAndAreChecked) {
  const std::string extra = "  per_push_s: {value: 2.5e-6, measured: \"core\"}\n"
                            "wake:\n  spin_s: {value: 5e-05, stated: \"code\"}\n"
                            "  max_pause_s: {value: 0.0005, stated: \"code\"}\n"
                            "  overshoot_s: {value: 5.3e-05, measured: \"sleeps\"}\n";
  const Profile p = read_profile(write("w.yaml", valid() + extra));
  ASSERT_TRUE(p.per_push_s && p.wake);
  EXPECT_DOUBLE_EQ(p.per_push_s->value, 2.5e-6);
  EXPECT_DOUBLE_EQ(p.wake->overshoot_s.value, 5.3e-5);
  EXPECT_EQ(p.wake->spin_s.source, "stated");
  const Profile q = read_profile(write("w2.yaml", profile_yaml(p)));
  EXPECT_EQ(profile_yaml(q), profile_yaml(p));
  const Profile none = read_profile(write("n.yaml", valid()));
  EXPECT_FALSE(none.per_push_s || none.wake);

  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = valid() + extra;
    return t.replace(t.find(from), from.size(), to);
  };
  EXPECT_NE(refusal(with("value: 2.5e-6", "value: -1")).find("server.per_push_s.value"), std::string::npos);
  EXPECT_NE(refusal(with("value: 5.3e-05", "value: 2")).find("wake.overshoot_s.value"), std::string::npos);
  EXPECT_NE(refusal(with("value: 0.0005", "value: 1e-7")).find("wake.max_pause_s: below the first pause"),
            std::string::npos);
  EXPECT_NE(refusal(with("  spin_s: {value: 5e-05, stated: \"code\"}\n", "")).find("wake.spin_s"), std::string::npos);
  EXPECT_NE(refusal(with("wake:\n", "wake:\n  nap_s: 3\n")).find("wake.nap_s"), std::string::npos);
  EXPECT_FALSE(p.wake->doorbell_s);
  // a doorbell's wake-up: optional, read back, checked like the others
  const std::string bell = extra + "  doorbell_s: {value: 1.2e-05, measured: \"rings\"}\n";
  const Profile b = read_profile(write("b.yaml", valid() + bell));
  ASSERT_TRUE(b.wake && b.wake->doorbell_s);
  EXPECT_DOUBLE_EQ(b.wake->doorbell_s->value, 1.2e-5);
  EXPECT_EQ(b.wake->doorbell_s->source, "measured");
  EXPECT_EQ(profile_yaml(read_profile(write("b2.yaml", profile_yaml(b)))), profile_yaml(b));
  std::string neg = valid() + bell;
  neg.replace(neg.find("value: 1.2e-05"), 14, "value: -3");
  EXPECT_NE(refusal(neg).find("wake.doorbell_s.value"), std::string::npos);
}

TEST_F(Profiles, EachBadFigureNamesTheFileAndKey) {
  const std::string v = valid();
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = v;
    const auto at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return t.replace(at, from.size(), to);
  };
  struct Case {
    std::string text, key, what;
  };
  const std::vector<Case> cases = {
      {with("  update_s_per_param: {value: 4e-10, measured: \"core\"}\n", ""), "server.update_s_per_param", "missing"},
      {with("{value: 2e-10,", "{value: -2e-10,"), "server.accumulate_s_per_param.value", "negative"},
      {with("bandwidth_Bps: {value: 1e+10, measured: \"p\"}}\n  server", "bandwidth_Bps: {value: 0, measured: \"p\"}}\n  server"),
       "link.learner.bandwidth_Bps.value", "outside [1, "},
      {with("{value: 0.07, measured: \"timed\"}", "{value: 1e+308, measured: \"timed\"}"), "compute[0].seconds.value",
       "outside [0, 1e+06]"},
      {with("{value: 500, assumed", "{value: 1e-9, assumed"), "compute[1].gflops.value", "outside [0.001, "},
      {with("cv: {value: 0.01,", "cv: {value: 11,"), "compute[0].cv.value", "outside [0, 10]"},
      {with("{value: 2e-10,", "{value: 2,"), "server.accumulate_s_per_param.value", "outside [0, 1]"},
      {with("name: t\n", "name: t\nname: u\n"), "name", "given twice"},
      {with("name: t\n", "name: \"\"\n"), "name", "empty"},
      {with("{value: 0.07, measured: \"timed\"}", "{value: fast, measured: \"timed\"}"), "compute[0].seconds.value",
       "not a finite number"},
      {with("{value: 0.07, measured: \"timed\"}", "{value: 0.07}"), "compute[0].seconds", "measured, stated or assumed"},
      {with("name: t\n", "name: t\nspeed: 3\n"), "speed", "unknown key"},
      {with("    batch: 64\n", "    batch: 64\n    colour: red\n"), "compute[0].colour", "unknown key"},
      {with("  pcie_Bps: {value: 6e+9, stated: \"the paper, p. 3\"}\n", ""), "link.pcie_Bps", "missing"},
      {with("name: t\n", ""), "name", "missing"},
      {with("    batch: 64\n", "    batch: 6.5\n"), "compute[0].batch", "whole number"},
      {with("cores: {value: 2,", "cores: {value: nan,"), "cores.value", "not a finite number"},
      {"name: [unclosed\n", "line", "not YAML"},
      {with("  server: {", "? server: {"), "(top)", "plain names"},  // a complex key (found by fuzz_profile)
  };
  for (const auto& c : cases) {
    const std::string msg = refusal(c.text);
    EXPECT_NE(msg.find("p.yaml"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.key), std::string::npos) << c.key << ": " << msg;
    EXPECT_NE(msg.find(c.what), std::string::npos) << c.what << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  try {
    read_profile((dir / "absent.yaml").string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("absent.yaml: cannot open profile file"), std::string::npos) << e.what();
  }
  try {  // a folder (yaml-cpp's own read failed with a stream error, exit 1)
    read_profile(dir.string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is a folder, not a profile file"), std::string::npos) << e.what();
  }
}

TEST_F(Profiles, ThePapersProfilesRead) {
  const char* src = std::getenv("ASGD_SOURCE_DIR");
  if (src == nullptr) GTEST_SKIP() << "ASGD_SOURCE_DIR not set";
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(src) / "profiles")) {
    if (e.path().extension() != ".yaml") continue;
    const Profile p = read_profile(e.path().string());
    EXPECT_FALSE(p.compute.empty()) << e.path();
    for (const Figure* f : {&p.learner.bandwidth_Bps, &p.server.bandwidth_Bps, &p.update_s_per_param})
      EXPECT_FALSE(f->note.empty()) << e.path();
    ++n;
  }
  EXPECT_GE(n, 2);
}

TEST_F(Profiles, TheConfigRefusesAProfileBeforeAnyWork) {
  TrainConfig c;
  c.virtual_learners = true;
  c.timing = "normal";
  c.profile = write("p.yaml", valid());
  EXPECT_TRUE(validate(c).empty());
  c.model = "alexnet";  // no entry of its own, and the gflops entry covers it
  EXPECT_TRUE(validate(c).empty());
  auto first = [&] {
    const auto p = validate(c);
    return p.empty() ? std::string() : p.front();
  };
  c.model = "lenet";
  c.virtual_learners = false;
  EXPECT_NE(first().find("--virtual"), std::string::npos);
  c.virtual_learners = true;
  c.timing = "calibrate";  // the default: the profile is the calibration
  EXPECT_TRUE(validate(c).empty());
  c.compute_s = 0.1;
  EXPECT_NE(first().find("--compute-s"), std::string::npos);
  c.compute_s = 0;
  c.profile = (dir / "absent.yaml").string();
  EXPECT_NE(first().find("absent.yaml: cannot open profile file"), std::string::npos);
  std::string text = valid();
  text.erase(text.find("  - device: cuda"), text.find("link:") - text.find("  - device: cuda"));
  c.profile = write("cpu-only.yaml", text);
  c.model = "mlp";
  EXPECT_NE(first().find("no entry for model mlp"), std::string::npos);
  c.profile = write("p2.yaml", valid());
  c.protocol = "allreduce";  // no servers: not modelled
  EXPECT_NE(first().find("protocol allreduce has none"), std::string::npos);
}

}  // namespace
}  // namespace asgd::perf
