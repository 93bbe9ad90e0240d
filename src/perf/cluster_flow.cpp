// The fluid part of the performance model: timers, activities that share
// resources (cores, links) equally, and the clock's advance over them.
#include "perf/cluster.hpp"

#include <algorithm>

namespace asgd::perf {

void Cluster::timer(double dt, Tag tag) { timers_.push({now_ + dt, seq_++, tag}); }

// The rank whose CPU work a cores activity's tag is (learners, then shards),
// or -1.
int Cluster::rank_of(const Tag& tag) const {
  if (tag.kind == Kind::compute) return tag.learner;
  if (tag.kind == Kind::apply) return spec_.learners + tag.shard;
  return -1;
}

// A fluid activity: `left` units at up to max_rate per second, on at most two
// resources whose capacity it shares equally with their other users.
int Cluster::activity(double left, double max_rate, int res0, int res1, Tag tag) {
  std::size_t slot = 0;
  while (slot < acts_.size() && acts_[slot].live) ++slot;
  if (slot == acts_.size()) {
    acts_.emplace_back();
    started_.push_back(0);
  }
  Activity& a = acts_[slot];
  a = Activity{};
  a.left = left;
  a.max_rate = max_rate;
  a.res[0] = res0;
  a.res[1] = res1;
  a.live = true;
  a.tag = tag;
  started_[slot] = now_;
  if (const int r = rank_of(tag); r >= 0 && res0 == cores_res_)  // on the cores: its polls stop
    off_cores_since_[static_cast<std::size_t>(r)] = -1;
  for (int r : a.res)
    if (r >= 0 && users_[static_cast<std::size_t>(r)]++ == 0) quiet_from_[static_cast<std::size_t>(r)] = -1;
  rates();
  return static_cast<int>(slot);
}

void Cluster::rates() {
  // the links first: their equal shares
  const auto on_cores = [&](const Activity& a) { return a.res[0] == cores_res_ || a.res[1] == cores_res_; };
  net_cpu_ = 0;
  for (auto& a : acts_) {
    if (!a.live || (cores_res_ >= 0 && on_cores(a))) continue;
    double r = a.max_rate;
    for (int res : a.res)
      if (res >= 0) r = std::min(r, capacity_[static_cast<std::size_t>(res)] / users_[static_cast<std::size_t>(res)]);
    a.rate = r;
  }
  if (spec_.duplex) fifo_rates();
  for (auto& a : acts_)
    if (a.live && spec_.duplex && !(cores_res_ >= 0 && on_cores(a))) net_cpu_ += a.rate * spec_.cpu_s_per_byte;
  if (cores_res_ < 0) return;
  // the cores: what the flowing bytes leave, shared when the working ranks
  // (and, ranks outnumbering the cores, the waiting ones) want more. With
  // the ranks outnumbering the cores, the waiting ones' polls land on every
  // core, busy or not: a core that computes carries its share of them even
  // while another core is idle, so the working ranks share the cores' room
  // with the polls as if every core were taken.
  const double working = users_[static_cast<std::size_t>(cores_res_)];
  const double ranks = spec_.learners + spec_.shards;
  const double want =
      ranks > spec_.cores ? std::max(working, spec_.cores) + waiting_load(ranks - working) : working;
  net_cpu_ = std::min(net_cpu_, 0.95 * spec_.cores);
  const double left = spec_.cores - net_cpu_;
  const double cpu = working > 0 && want > left ? std::min(1.0, left / want) : 1.0;
  for (auto& a : acts_)
    if (a.live && on_cores(a)) a.rate = std::min(a.max_rate, cpu);
}

// Duplex links: on a send side with rests of done sends queued, those flow
// first (in the order their sends were done, each at most its receiver's
// share), and the sends still going share what they leave equally. The
// equal shares rates() gave stand elsewhere.
void Cluster::fifo_rates() {
  queued_.clear();
  for (std::size_t i = 0; i < acts_.size(); ++i)
    if (acts_[i].live && acts_[i].tx >= 0 && acts_[i].queued_at >= 0) queued_.push_back(i);
  if (queued_.empty()) return;
  std::sort(queued_.begin(), queued_.end(), [&](std::size_t a, std::size_t b) {
    return acts_[a].queued_at != acts_[b].queued_at ? acts_[a].queued_at < acts_[b].queued_at : a < b;
  });
  const auto rx_share = [&](const Activity& a) {
    const int rx = a.res[0] == a.tx ? a.res[1] : a.res[0];
    return rx < 0 ? kInf : capacity_[static_cast<std::size_t>(rx)] / users_[static_cast<std::size_t>(rx)];
  };
  left_.assign(capacity_.size(), -1);
  for (std::size_t i : queued_) {
    Activity& a = acts_[i];
    const auto tx = static_cast<std::size_t>(a.tx);
    if (left_[tx] < 0) left_[tx] = capacity_[tx];
    a.rate = std::min({a.max_rate, left_[tx], rx_share(a)});
    left_[tx] -= a.rate;
  }
  const auto going = [&](const Activity& a) {
    return a.live && a.tx >= 0 && a.queued_at < 0 && left_[static_cast<std::size_t>(a.tx)] >= 0;
  };
  going_.assign(capacity_.size(), 0);
  for (const Activity& a : acts_)
    if (going(a)) ++going_[static_cast<std::size_t>(a.tx)];
  for (Activity& a : acts_)
    if (going(a)) {
      const auto tx = static_cast<std::size_t>(a.tx);
      a.rate = std::min({a.max_rate, left_[tx] / going_[tx], rx_share(a)});
    }
}

// Per send side: the bytes of done sends queued there now, and how fast they
// leave (send_done_at reads both).
void Cluster::sum_queues() {
  queued_bytes_.assign(capacity_.size(), 0);
  queued_rate_.assign(capacity_.size(), 0);
  for (const Activity& a : acts_)
    if (a.live && a.tx >= 0 && a.queued_at >= 0) {
      queued_bytes_[static_cast<std::size_t>(a.tx)] += a.left;
      queued_rate_[static_cast<std::size_t>(a.tx)] += a.rate;
    }
}

// When a send still going is done: when its rest and the bytes queued ahead
// of it fit the sender's queue (send_buffer_bytes). Both shrink at their
// rates until the next change of rates. The queues' sums are sum_queues' of
// now.
double Cluster::send_done_at(const Activity& x) const {
  const auto tx = static_cast<std::size_t>(x.tx);
  const double qrate = queued_rate_[tx];
  const double over = x.left + queued_bytes_[tx] - spec_.send_buffer_bytes;
  if (over <= 0) return now_;
  return x.rate + qrate > 0 ? now_ + over / (x.rate + qrate) : kInf;
}

// What the ranks off the cores take of them by their polls: each its wait's
// load where a poll's CPU is known (the wake schedule), else
// waiting_rank_load each.
double Cluster::waiting_load(double waiting) const {
  if (poll_cost_.per_poll_s <= 0) return poll_cost_.per_wait * waiting;
  double load = 0;
  for (double since : off_cores_since_)
    if (since >= 0) load += wait_load(spec_.wake, poll_cost_, now_ - since);
  return load;
}

void Cluster::advance(double t) {
  const double dt = t - now_;
  if (dt > 0 && cores_res_ >= 0) busy_[static_cast<std::size_t>(cores_res_)] += net_cpu_ * dt;
  if (dt > 0)
    for (auto& a : acts_) {
      if (!a.live) continue;
      a.left = std::max(0.0, a.left - a.rate * dt);
      for (int r : a.res)
        if (r >= 0) busy_[static_cast<std::size_t>(r)] += a.rate * dt;
    }
  now_ = std::max(now_, t);
}

double Cluster::share(int res) const {
  const double span = now_ - started_at_;
  const auto r = static_cast<std::size_t>(res);
  return span > 0 ? busy_[r] / (capacity_[r] * span) : 0.0;
}

std::optional<double> Cluster::cores_share() const {
  if (cores_res_ < 0) return std::nullopt;
  return share(cores_res_);
}

std::vector<Usage> Cluster::usage() const {
  std::vector<Usage> out;
  if (cores_res_ >= 0) out.push_back({"cores", share(cores_res_)});
  const auto sides = [&](const char* who, int n, int tx0, int rx0) {
    for (int i = 0; i < n; ++i) {
      if (tx0 == rx0) {
        out.push_back({std::string(who) + " " + std::to_string(i) + " link", share(tx0 + i)});
        continue;
      }
      out.push_back({std::string(who) + " " + std::to_string(i) + " send", share(tx0 + i)});
      out.push_back({std::string(who) + " " + std::to_string(i) + " receive", share(rx0 + i)});
    }
  };
  sides("learner", spec_.learners, learner_tx0_, learner_rx0_);
  sides("shard", spec_.shards, shard_tx0_, shard_rx0_);
  return out;
}

Usage Cluster::busiest() const {
  Usage best;
  for (const Usage& u : usage())
    if (u.share > best.share) best = u;
  return best;
}

// The bytes of a transfer flow after both endpoints' latencies.
void Cluster::transfer(int learner, int shard, double bytes, Tag then, bool to_shard) {
  int id = 0;
  if (free_transfers_.empty()) {
    id = static_cast<int>(transfers_.size());
    transfers_.push_back({});
  } else {
    id = free_transfers_.back();
    free_transfers_.pop_back();
  }
  transfers_[static_cast<std::size_t>(id)] = {learner, shard, bytes, then, to_shard};
  Tag t{Kind::latency};
  t.transfer = id;
  // MPI's rendezvous: a large message flows once the receiver's wait polls
  double handshake = 0;
  if (spec_.duplex && bytes > spec_.eager_bytes) {
    const double since = to_shard ? idle_since_[static_cast<std::size_t>(shard)]
                                  : awaits_since_[static_cast<std::size_t>(learner)];
    // the receiver's poll answers the request; the sender, waiting from
    // now, notices the answer at one of its own polls
    if (since >= 0) handshake = wake_delay(spec_.wake, now_ - since);
    handshake += wake_delay(spec_.wake, handshake);
  }
  timer(spec_.learner_latency_s + spec_.server_latency_s + handshake, t);
}

// A message's latency has passed: its bytes start to flow.
void Cluster::transferred(int id) {
  const Transfer x = transfers_[static_cast<std::size_t>(id)];
  free_transfers_.push_back(id);
  // duplex: the sender's send is done when the rest fits its buffers
  const Tag sent{x.to_shard ? Kind::push_sent : Kind::reply_sent, x.learner, x.shard};
  const int r0 = x.to_shard ? learner_tx0_ + x.learner : learner_rx0_ + x.learner;
  const int r1 = x.to_shard ? shard_rx0_ + x.shard : shard_tx0_ + x.shard;
  const double left = x.bytes > 0 ? x.bytes - take_burst(r0, r1, x.bytes) : 0;
  if (left <= 0) {  // nothing to send, or all of it in the buckets
    if (spec_.duplex) timer(0, sent);
    handle(x.then);
    return;
  }
  const int a = activity(left, kInf, r0, r1, x.then);
  if (!spec_.duplex) return;
  Activity& act = acts_[static_cast<std::size_t>(a)];
  act.tx = x.to_shard ? r0 : r1;
  sum_queues();
  if (left + queued_bytes_[static_cast<std::size_t>(act.tx)] <= spec_.send_buffer_bytes) {
    act.queued_at = now_;  // all of it fits the sender's queue: the send is done
    timer(0, sent);
  } else {
    act.notify_sent = true;
    act.notify = sent;
  }
  rates();  // in the sender's queue, or behind it
}

}  // namespace asgd::perf
