#pragma once
// The performance model of virtual learners: a deterministic discrete-event
// simulation of a parameter server's resources on the virtual clock.
//
//  - Each learner cycles: its replies arrive from every shard, (GPU learners:
//    host staging), n local compute steps (each its own draw), then its push
//    goes to every shard, one shard at a time.
//  - Each shard handles one push at a time, in the order the pushes were
//    made: it receives the push (a transfer; over shared windows a header, the
//    gradient being in the learner's window), adds it (accumulate cost per
//    parameter, plus the update cost when it completes an update of c
//    gradients, plus injected costs), sends the learners the push releases
//    its replies (transfers), and then takes the next push. The run
//    decides whom a push releases when the first shard has applied it; every
//    other shard replies as decided once it has applied the push itself (as
//    the real shards do, each on its own: they see the same pushes in the
//    same order, so they decide alike).
//  - A transfer takes both endpoints' latencies, then its bytes flow at the
//    smaller of the two links' equal shares (every transfer on a link at once
//    shares it: a server's link is shared by every learner that talks to it).
//  - Two kinds of links (`duplex`). Shared windows (ranks of one node, the
//    default): a link is one capacity that both directions share, and a
//    shard's replies go to every released learner at once (each learner
//    copies the weights itself). Network links (ranks on different nodes):
//    each endpoint sends and receives at its rate at once (a transfer takes
//    the sender's send side and the receiver's receive side). A learner's
//    push goes to its shards one at a time (learner l starting at shard
//    l x max(1, S / L) mod S, as the real learners do), the next part when
//    all but `send_buffer_bytes` of the last have left (the real send is
//    done when the rest is in the kernel's buffers); its bytes flow at once,
//    whatever the shard is doing (the real shard posts the receive of each
//    learner's next gradient ahead), and the shard takes the pushes in the
//    order their parts began, each once its bytes are in. A send that is done
//    has its rest in the sender's queue (a FIFO: the emulated cluster's
//    bfifo, a NIC's queue) ahead of what the sender sends later: on the
//    sender's send side the rests of done sends flow first, in the order
//    their sends were done, and the sends still going share what they leave.
//    A shard's replies
//    go to every released learner at once and the shard goes on; it applies
//    its next push only when they are sent (all but the buffers' bytes).
//  - CPU work (compute steps, a shard's apply) shares `cores` processors
//    when the ranks (learners + shards) outnumber them: each working rank
//    runs at min(1, cores / (max(working, cores) + waiting load)) (the
//    waiting ranks' polls land on every core, busy or not), where a waiting rank
//    (MPI's polite waits) takes a share of a core while it waits and what
//    its polls cost (perf/wake.hpp PollCost): with a `wake` schedule the two
//    come from the calibration's loads of a rank that has waited long
//    (waiting_rank_load) and of one whose waits are brief (brief_wait_load;
//    without it a poll costs waiting_rank_load x (max_pause_s + overshoot_s)
//    and the wait nothing else), and a poll's cost is spread over the spacing
//    of its polls at the moment (wait_load), so a rank early in its wait takes
//    more; without one, `waiting_rank_load` of a core. 0
//    cores: each rank has its own. A shard's apply adds `per_push_s` to each push.
//    Over network links the bytes flowing take `cpu_s_per_byte` of the
//    cores first (the kernel's network path), and the working ranks share
//    what is left whenever they want more than that.
//  - Waits end at a poll (`wake`, perf/wake.hpp), or at a doorbell's wake-up
//    where the ranks share a node and the profile has `wake.doorbell_s`: an idle shard takes a push
//    at the first poll after it arrived; over shared windows a shard goes on
//    at the first poll after its learners' copies of a reply are done, and a
//    learner starts computing at the first poll after its last reply (over messages
//    the reply's bytes take longer than a poll's pause: its header is
//    noticed while they flow).
// Plain C++: no Kokkos, no MPI. The run (sim/virtual.cpp) does the training
// math at each decision; this class only keeps time.
#include <cstdint>
#include <functional>
#include <string>
#include <optional>
#include <deque>
#include <limits>
#include <list>
#include <queue>
#include <vector>

#include "perf/wake.hpp"

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
  double brief_wait_load = -1;   // the same for waits of kBriefWait_s (perf/wake.hpp); negative: not measured
  double cycle_cpu_s = 0;        // CPU seconds a learner adds to each cycle's draw (nsync's local updates)
  double stage_s = 0;  // GPU learners: host staging per cycle (both ways)
  bool duplex = false;  // network links (see above); false: shared windows
  // Shared windows: the learners read the weights in the shards' windows
  // (ps::UpdateRule::weights_read_in_place): a reply is a header, no copy.
  bool replies_in_place = false;
  // Network links: the bytes a sender's send buffers hold. A shard's send is
  // done (it sends the next reply, or takes the next push) when all but
  // these bytes of a reply have left; the rest still flows to the learner.
  double send_buffer_bytes = 0;
  // Network links: a token bucket of this many bytes on each side of each
  // link, refilled at the link's rate while that side is idle; a transfer's
  // first bytes pass at once while both its sides have tokens. 0: none.
  double burst_bytes = 0;
  // Network links: the CPU seconds per byte a transfer's flow takes from the
  // cores (the kernel's network path and MPI progress at both ends), before
  // the ranks' CPU work shares what is left. 0: none.
  double cpu_s_per_byte = 0;
  // Network links: a message of more bytes than this is sent by MPI's
  // rendezvous: its bytes flow from the receiver's next poll (the receiver
  // answers the sender's request when its wait polls). Default: every
  // message goes at once.
  double eager_bytes = 1e300;
  double per_push_s = 0;  // a shard's CPU time per push apart from the per-parameter work
  WakeSchedule wake;      // when a waiting rank notices its event (off: at once)
};

// How much of a resource's capacity the run used, from start() to now:
// `what` names it ("cores", "shard 0 receive", "learner 2 link", ...).
struct Usage {
  std::string what;
  double share = 0;
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
  // Runs the clock to the next push that a shard has applied first and
  // returns its learner (the run then decides), or nullopt when nothing is left to
  // happen (every learner waits for a reply).
  std::optional<int> next();
  // The run's decision on the push next() returned: the learners it releases
  // (each shard replies to them once it has applied the push, then takes
  // its next push).
  void release(const std::vector<int>& learners);
  double now() const { return now_; }
  // Every resource's usage (the cores first, where they are limited), and the busiest.
  std::vector<Usage> usage() const;
  Usage busiest() const;
  // The cores' share of their capacity used (nullopt: the cores are not limited).
  std::optional<double> cores_share() const;
  const LearnerTimes& times(int l) const { return times_[static_cast<std::size_t>(l)]; }

 private:
  enum class Kind {
    compute, staged, recv, recv_injected, apply, apply_injected, reply_injected, reply, reply_sent, latency,
    woken, shard_woken, shard_released, push_sent, rerate
  };
  struct Tag {
    Kind kind;
    int learner = -1, shard = -1;
    int transfer = -1;  // Kind::latency: the transfer whose bytes start to flow
    double since = 0;   // Kind::rerate: the wait it belongs to (when that began)
    double mark = 0;    // Kind::rerate: this change's time into that wait
  };
  struct Transfer {
    int learner, shard;
    double bytes;
    Tag then;
    bool to_shard;  // a push (learner to shard), else a reply
  };
  struct Activity {  // fluid work: CPU seconds or bytes
    double left = 0, max_rate = 1e300, rate = 0;
    int res[2] = {-1, -1};
    bool live = false;
    Tag tag{};
    bool notify_sent = false;  // `notify` fires when the send is done (send_done_at)
    Tag notify{};
    int tx = -1;             // duplex transfers: the sender's send side
    double queued_at = -1;   // duplex: since when its sender is done (its rest waits in the sender's queue)
  };
  struct Timer {
    double time;
    std::uint64_t seq;
    Tag tag;
    bool operator>(const Timer& o) const { return time != o.time ? time > o.time : seq > o.seq; }
  };
  struct Shard {
    std::deque<std::int64_t> pushes;  // push ids waiting, in the order made
    bool busy = false;
    std::int64_t job = -1;
    std::int64_t applied = 0;
    int replies_left = 0;
    std::vector<int> reply_to;
    std::size_t next_reply = 0;  // duplex: the next of reply_to to send to
    int sends_pending = 0;       // duplex: replies whose send is not done
    std::vector<char> landed;    // duplex: per learner, its push's bytes are in
    double replied_at = 0;       // when it sent its last replies (shared windows: it then waits for the copies)
    std::vector<std::int64_t> applied_of;       // per learner: its last push this shard applied
    std::vector<std::int64_t> applied_seq;      // per learner: when (this shard's count of applies)
    std::list<std::vector<int>> decisions;      // releases this shard has not replied for yet
  };
  struct Push {
    int learner;
    double made;
    int applied = 0, received = 0;
    bool decided = false;
  };
  struct LearnerState {
    int replies_left = 0;
    double released_at = 0, received_at = 0;
  };

  void timer(double dt, Tag tag);
  double at_poll(double waited, Tag then);
  int activity(double left, double max_rate, int res0, int res1, Tag tag);
  void transfer(int learner, int shard, double bytes, Tag then, bool to_shard);
  void send_reply(int k);
  void send_replies(int k, int l);
  void reply_received(int k, int l);
  void rates();
  void fifo_rates();
  void sum_queues();
  double send_done_at(const Activity& x) const;
  int rank_of(const Tag& tag) const;
  void waits_from(int r);
  void rerate(const Tag& tag);
  double waiting_load(double waiting) const;
  void advance(double t);
  void handle(const Tag& tag);
  void transferred(int id);
  void received(int k, int l);
  void start_push(int l);
  void try_start(int k);
  void apply(int k);
  void applied(int k);
  void send_replies(int k);
  void serve(int k);
  void reply_arrived(int l);
  void begin_compute(int l);
  void push_part(int l);
  void push_sent(int l);
  void landed(int k, int l);
  void take_landed(int k);
  double take_burst(int res0, int res1, double bytes);
  double bytes(int k) const { return 4.0 * spec_.shard_params[static_cast<std::size_t>(k)]; }
  double share(int res) const;  // of resource res's capacity, from start() to now
  static constexpr double kInf = std::numeric_limits<double>::infinity();

  ClusterSpec spec_;
  std::function<double(int)> draw_;
  double now_ = 0;
  std::uint64_t seq_ = 0;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_;
  std::vector<Activity> acts_;       // slots reused
  // resources: [cores], learner links, shard links (duplex: each link's
  // send and receive sides, learners' then shards')
  std::vector<double> capacity_;
  std::vector<int> users_;
  std::vector<double> busy_;  // per resource: capacity-seconds used
  double net_cpu_ = 0;        // the cores the flowing transfers take (cpu_s_per_byte)
  std::vector<std::size_t> queued_;  // fifo_rates' scratch: the queued rests' slots
  std::vector<double> left_;         // fifo_rates' scratch: per send side, what the queued rests leave (-1: none queued)
  std::vector<int> going_;           // fifo_rates' scratch: per send side, its sends still going
  std::vector<double> queued_bytes_, queued_rate_;  // sum_queues: per send side, its queued rests and their rate
  std::vector<double> awaits_since_;  // per learner: waiting for its replies since (-1: not waiting)
  // per rank (learners, then shards): off the cores since (-1: on them), for
  // the load of its polls (ranks outnumbering the cores)
  std::vector<double> off_cores_since_;
  PollCost poll_cost_;
  double started_at_ = 0;
  std::vector<double> tokens_, quiet_from_;  // per resource: its bucket's bytes, idle since (-1: in use)
  int cores_res_ = -1, learner_tx0_ = 0, learner_rx0_ = 0, shard_tx0_ = 0, shard_rx0_ = 0;
  std::vector<Shard> shards_;
  std::vector<Push> pushes_;
  std::vector<LearnerState> learners_;
  std::vector<LearnerTimes> times_;
  std::vector<double> started_;          // per activity slot: when it started
  std::vector<Transfer> transfers_;      // slots reused once their bytes flow
  std::vector<int> free_transfers_;
  std::vector<double> pushed_at_;        // per learner: when its last push was received everywhere
  std::vector<std::int64_t> current_push_;  // per learner: its last push (-1: none yet)
  std::vector<int> sending_;                // per learner: shards receiving its push now
  std::vector<int> part_;                   // duplex, per learner: parts of its push sent
  std::vector<double> wait_from_;           // per learner: when its push reached every shard (-1: not waiting)
  std::vector<double> idle_since_;          // per shard: since when it has had no push to take (-1: busy)
  int deciding_ = -1;                       // the shard whose apply awaits the run's decision
  std::optional<std::int64_t> pending_;  // applied by a shard first, next() has not returned it yet
  std::optional<std::int64_t> decided_;  // returned by next(), release() not called yet
};

}  // namespace asgd::perf
