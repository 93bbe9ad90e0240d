#pragma once
// The performance model of virtual learners: a deterministic discrete-event
// simulation of a parameter server's resources on the virtual clock.
//
//  - Each learner cycles: its replies arrive from every shard, (GPU learners:
//    host staging), n local compute steps (each its own draw), then its push
//    goes to every shard.
//  - Each shard handles one push at a time, in the order the pushes were
//    made: it receives the push (a transfer), adds it (accumulate cost per
//    parameter, plus the update cost when it completes an update of c
//    gradients, plus injected costs), then, once the run has decided whom the
//    push releases, sends those learners its replies (transfers), and only
//    then takes the next push. Shards take the run's decision together: a
//    shard that has applied push p waits for the others to apply it.
//  - A transfer takes both endpoints' latencies, then its bytes flow at the
//    smaller of the two links' equal shares (every transfer on a link at once
//    shares it: a server's link is shared by every learner that talks to it).
//  - CPU work (compute steps, a shard's apply) shares `cores` processors
//    when the ranks (learners + shards) outnumber them: each working rank
//    runs at min(1, cores / (working + load x waiting)), where a waiting
//    rank (MPI's polite waits) takes `waiting_rank_load` of a core; 0 cores:
//    each rank has its own.
// Plain C++: no Kokkos, no MPI. The run (sim/virtual.cpp) does the training
// math at each decision; this class only keeps time.
#include <cstdint>
#include <functional>
#include <optional>
#include <queue>
#include <vector>

namespace asgd::perf {

struct ClusterSpec {
  int learners = 1, shards = 1;
  std::vector<double> shard_params;  // parameters per shard (payload: 4 bytes each, each way)
  int gradients_per_update = 1;      // c: a shard updates at every c-th push it applies
  double learner_latency_s = 0, learner_Bps = 1e30, server_latency_s = 0, server_Bps = 1e30;
  double accumulate_s_per_param = 0, update_s_per_param = 0;
  double inject_update_s = 0, inject_byte_s = 0;  // the real server's injected costs
  double cores = 0;                               // 0: unlimited
  double waiting_rank_load = 0;  // ranks outnumber cores: a waiting rank's share of a core
  double cycle_cpu_s = 0;        // CPU seconds a learner adds to each cycle's draw (nsync's local updates)
  double stage_s = 0;  // GPU learners: host staging per cycle (both ways)
};

// Seconds of learner l's times, as the results' per-learner rows hold them.
struct LearnerTimes {
  double compute_s = 0, push_s = 0, wait_s = 0, pull_s = 0, stage_s = 0;
};

class Cluster {
 public:
  // draw(l): the CPU seconds of learner l's next cycle of local steps.
  Cluster(ClusterSpec spec, std::function<double(int)> draw);

  // Every shard sends the weights to every learner from time t (the start).
  void start(double t);
  // Runs the clock to the next push that every shard has applied and returns
  // its learner (the run then decides), or nullopt when nothing is left to
  // happen (every learner waits for a reply).
  std::optional<int> next();
  // The run's decision on the push next() returned: the learners it releases
  // (each shard replies to them, then takes its next push).
  void release(const std::vector<int>& learners);
  double now() const { return now_; }
  const LearnerTimes& times(int l) const { return times_[static_cast<std::size_t>(l)]; }

 private:
  enum class Kind { compute, staged, recv, recv_injected, apply, apply_injected, reply_injected, reply, latency };
  struct Tag {
    Kind kind;
    int learner = -1, shard = -1;
    int transfer = -1;  // Kind::latency: the transfer whose bytes start to flow
  };
  struct Transfer {
    int learner, shard;
    double bytes;
    Tag then;
  };
  struct Activity {  // fluid work: CPU seconds or bytes
    double left = 0, max_rate = 1e300, rate = 0;
    int res[2] = {-1, -1};
    bool live = false;
    Tag tag{};
  };
  struct Timer {
    double time;
    std::uint64_t seq;
    Tag tag;
    bool operator>(const Timer& o) const { return time != o.time ? time > o.time : seq > o.seq; }
  };
  struct Shard {
    std::queue<std::int64_t> pushes;  // push ids, in the order made
    bool busy = false;
    std::int64_t job = -1;
    std::int64_t applied = 0;
    int replies_left = 0;
    std::vector<int> reply_to;
  };
  struct Push {
    int learner;
    double made;
    int applied = 0, received = 0;
  };
  struct LearnerState {
    int replies_left = 0;
    double released_at = 0, received_at = 0;
  };

  void timer(double dt, Tag tag);
  int activity(double left, double max_rate, int res0, int res1, Tag tag);
  void transfer(int learner, int shard, double bytes, Tag then);
  void rates();
  void advance(double t);
  void handle(const Tag& tag);
  void start_push(int l);
  void try_start(int k);
  void apply(int k);
  void applied(int k);
  void send_replies(int k);
  void reply_arrived(int l);
  void begin_compute(int l);
  double bytes(int k) const { return 4.0 * spec_.shard_params[static_cast<std::size_t>(k)]; }

  ClusterSpec spec_;
  std::function<double(int)> draw_;
  double now_ = 0;
  std::uint64_t seq_ = 0;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_;
  std::vector<Activity> acts_;       // slots reused
  std::vector<double> capacity_;     // resources: [cores], learner links, shard links
  std::vector<int> users_;
  int cores_res_ = -1, learner_res0_ = 0, shard_res0_ = 0;
  std::vector<Shard> shards_;
  std::vector<Push> pushes_;
  std::vector<LearnerState> learners_;
  std::vector<LearnerTimes> times_;
  std::vector<double> started_;          // per activity slot: when it started
  std::vector<Transfer> transfers_;      // slots reused once their bytes flow
  std::vector<int> free_transfers_;
  std::vector<double> pushed_at_;        // per learner: when its last push was received everywhere
  std::optional<std::int64_t> pending_;  // applied everywhere, next() has not returned it yet
  std::optional<std::int64_t> decided_;  // returned by next(), release() not called yet
};

}  // namespace asgd::perf
