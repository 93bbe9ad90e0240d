#include "perf/cluster.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace asgd::perf {

Cluster::Cluster(ClusterSpec spec, std::function<double(int)> draw)
    : spec_(std::move(spec)), draw_(std::move(draw)) {
  const auto L = static_cast<std::size_t>(spec_.learners);
  const auto S = static_cast<std::size_t>(spec_.shards);
  if (spec_.learners < 1 || spec_.shards < 1 || spec_.shard_params.size() != S || spec_.gradients_per_update < 1)
    throw std::invalid_argument("perf::Cluster: learners, shards, shard sizes and c must be positive");
  if (spec_.cores > 0) {
    cores_res_ = 0;
    capacity_.push_back(spec_.cores);
  }
  learner_tx0_ = learner_rx0_ = static_cast<int>(capacity_.size());
  capacity_.insert(capacity_.end(), L, spec_.learner_Bps);
  if (spec_.duplex) {
    learner_rx0_ = static_cast<int>(capacity_.size());
    capacity_.insert(capacity_.end(), L, spec_.learner_Bps);
  }
  shard_tx0_ = shard_rx0_ = static_cast<int>(capacity_.size());
  capacity_.insert(capacity_.end(), S, spec_.server_Bps);
  if (spec_.duplex) {
    shard_rx0_ = static_cast<int>(capacity_.size());
    capacity_.insert(capacity_.end(), S, spec_.server_Bps);
  }
  users_.assign(capacity_.size(), 0);
  busy_.assign(capacity_.size(), 0);
  tokens_.assign(capacity_.size(), spec_.burst_bytes);
  quiet_from_.assign(capacity_.size(), 0);
  shards_.resize(S);
  for (auto& s : shards_) {
    s.applied_of.assign(L, -1);
    s.applied_seq.assign(L, 0);
    s.landed.assign(L, 0);
  }
  part_.assign(L, 0);
  current_push_.assign(L, -1);
  sending_.assign(L, 0);
  learners_.resize(L);
  times_.resize(L);
  pushed_at_.assign(L, -1);
  wait_from_.assign(L, -1);
  idle_since_.assign(S, -1);
  awaits_since_.assign(L, -1);
  off_cores_since_.assign(L + S, -1);
  // what a waiting rank costs: from the loads of a rank that has waited long
  // and of one whose waits are brief (the calibration's cores probe)
  poll_cost_ = poll_cost(spec_.wake, spec_.waiting_rank_load, spec_.brief_wait_load);
}

// A waiting rank's polls thin out: the cores' shares change (unless that
// wait is over), and again at the schedule's next change.
void Cluster::rerate(const Tag& tag) {
  if (off_cores_since_[static_cast<std::size_t>(tag.learner)] != tag.since) return;
  rates();
  const double next = next_load_change(spec_.wake, tag.mark);
  if (next == kInf) return;
  Tag t = tag;
  t.mark = next;
  timer(tag.since + next - now_, t);
}

// Rank r leaves the cores (its compute or apply done, or the run starting):
// its polls' load follows its wait's schedule of pauses, recomputed where it
// changes.
void Cluster::waits_from(int r) {
  off_cores_since_[static_cast<std::size_t>(r)] = now_;
  if (poll_cost_.per_poll_s <= 0 || cores_res_ < 0 || spec_.learners + spec_.shards <= spec_.cores) return;
  const double next = next_load_change(spec_.wake, 0);
  if (next == kInf) return;
  Tag t{Kind::rerate, r};
  t.since = now_;
  t.mark = next;
  timer(next, t);
}

// `then` at the poll that notices an event `waited` seconds into a wait: at
// once within the spin, else by a timer. Returns how late that poll is.
double Cluster::at_poll(double waited, Tag then) {
  const double late = wake_delay(spec_.wake, waited);
  if (late > 0)
    timer(late, then);
  else
    handle(then);
  return late;
}

std::optional<int> Cluster::next() {
  if (decided_) throw std::logic_error("perf::Cluster::next: release() the push returned before");
  while (!pending_) {
    const double tt = timers_.empty() ? kInf : timers_.top().time;
    double ta = kInf;
    std::size_t a = acts_.size();
    if (spec_.duplex) sum_queues();
    for (std::size_t i = 0; i < acts_.size(); ++i) {
      if (!acts_[i].live) continue;
      const Activity& x = acts_[i];
      double t = x.rate > 0 ? now_ + x.left / x.rate : kInf;
      if (x.notify_sent) t = send_done_at(x);
      if (t < ta) {
        ta = t;
        a = i;
      }
    }
    if (tt == kInf && ta == kInf) return std::nullopt;
    if (tt <= ta) {
      const Timer x = timers_.top();
      timers_.pop();
      advance(x.time);
      handle(x.tag);
    } else {
      advance(ta);
      Activity& done = acts_[a];
      if (done.notify_sent) {  // its sender is done; the bytes flow on
        done.notify_sent = false;
        done.queued_at = now_;
        rates();
        handle(done.notify);
        continue;
      }
      done.live = false;
      done.left = 0;
      if (const int r = rank_of(done.tag); r >= 0) waits_from(r);
      for (int r : done.res)
        if (r >= 0 && --users_[static_cast<std::size_t>(r)] == 0) quiet_from_[static_cast<std::size_t>(r)] = now_;
      rates();
      if (done.tag.kind == Kind::compute) times_[static_cast<std::size_t>(done.tag.learner)].compute_s += now_ - started_[a];
      handle(done.tag);
    }
  }
  decided_ = pending_;
  pending_.reset();
  return pushes_[static_cast<std::size_t>(*decided_)].learner;
}

void Cluster::handle(const Tag& tag) {
  const int k = tag.shard, l = tag.learner;
  switch (tag.kind) {
    case Kind::latency:
      transferred(tag.transfer);
      return;
    case Kind::staged:
      activity(draw_(l) + spec_.cycle_cpu_s, 1.0, cores_res_, -1, Tag{Kind::compute, l, -1});
      return;
    case Kind::compute:
      start_push(l);
      return;
    case Kind::recv:
      if (spec_.duplex)
        landed(k, l);
      else
        received(k, l);
      return;
    case Kind::recv_injected:
      apply(k);
      return;
    case Kind::apply:
      if (shards_[static_cast<std::size_t>(k)].applied % spec_.gradients_per_update == 0 && spec_.inject_update_s > 0) {
        timer(spec_.inject_update_s, Tag{Kind::apply_injected, l, k});
        return;
      }
      [[fallthrough]];
    case Kind::apply_injected:
      applied(k);
      return;
    case Kind::reply_injected:
      send_replies(k, l);
      return;
    case Kind::reply:
      reply_received(k, l);
      return;
    case Kind::shard_released:
      serve(k);
      return;
    case Kind::woken:
      begin_compute(l);
      return;
    case Kind::shard_woken:
      if (spec_.duplex)
        received(k, l);
      else  // the gradient is in the learner's window already: a header moves, no bytes
        transfer(l, k, 0.0, Tag{Kind::recv, l, k}, true);
      return;
    case Kind::reply_sent:
      if (--shards_[static_cast<std::size_t>(k)].sends_pending == 0) try_start(k);
      return;
    case Kind::push_sent:
      push_sent(l);
      return;
    case Kind::rerate:
      rerate(tag);
      return;
  }
}

// Shard k's replies leave, all at once: over a duplex link one after the
// other with nothing between them but their injected costs, and the shard
// goes on after the last.
void Cluster::send_replies(int k, int l) {
  Shard& s = shards_[static_cast<std::size_t>(k)];
  if (spec_.duplex) {
    transfer(s.reply_to[s.next_reply++], k, bytes(k), Tag{Kind::reply, l, k}, false);
    if (s.next_reply < s.reply_to.size())
      send_reply(k);
    else
      serve(k);
    return;
  }
  const double copy = spec_.replies_in_place ? 0.0 : bytes(k);
  for (int q : s.reply_to) transfer(q, k, copy, Tag{Kind::reply, q, k}, false);
}

// Learner l has shard k's reply. Over a duplex link the shard went on when
// its send was done (reply_sent); otherwise, once every learner's copy is
// done, the shard notices their pull-done messages at a poll.
void Cluster::reply_received(int k, int l) {
  reply_arrived(l);
  if (spec_.duplex) return;
  if (--shards_[static_cast<std::size_t>(k)].replies_left > 0) return;
  at_poll(now_ - shards_[static_cast<std::size_t>(k)].replied_at, Tag{Kind::shard_released, -1, k});
}

// Shard k has received a push from learner l.
void Cluster::received(int k, int l) {
  Push& p = pushes_[static_cast<std::size_t>(shards_[static_cast<std::size_t>(k)].job)];
  if (!spec_.duplex) {
    --sending_[static_cast<std::size_t>(p.learner)];
    for (int q = 0; q < spec_.shards; ++q)
      if (q != k) try_start(q);
  }
  if (++p.received == spec_.shards) {
    wait_from_[static_cast<std::size_t>(p.learner)] = now_;
    // released before its push reached every shard: it waited for nothing
    if (learners_[static_cast<std::size_t>(p.learner)].released_at < p.made)
      pushed_at_[static_cast<std::size_t>(p.learner)] = now_;
    if (!spec_.duplex) times_[static_cast<std::size_t>(p.learner)].push_s += now_ - p.made;
  }
  if (spec_.inject_byte_s > 0) {
    timer(bytes(k) * spec_.inject_byte_s, Tag{Kind::recv_injected, l, k});
    return;
  }
  apply(k);
}

void Cluster::start(double t) {
  now_ = t;
  started_at_ = t;
  std::vector<int> all;
  for (int l = 0; l < spec_.learners; ++l) all.push_back(l);
  for (auto& ln : learners_) {
    ln.replies_left = spec_.shards;
    ln.released_at = t;
  }
  awaits_since_.assign(awaits_since_.size(), t);
  for (int r = 0; r < spec_.learners + spec_.shards; ++r) waits_from(r);
  for (int k = 0; k < spec_.shards; ++k) {
    Shard& s = shards_[static_cast<std::size_t>(k)];
    s.busy = true;
    s.reply_to = all;
    send_replies(k);
  }
}

void Cluster::start_push(int l) {
  const auto id = static_cast<std::int64_t>(pushes_.size());
  Push p;
  p.learner = l;
  p.made = now_;
  pushes_.push_back(std::move(p));
  current_push_[static_cast<std::size_t>(l)] = id;
  if (spec_.duplex) {
    part_[static_cast<std::size_t>(l)] = 0;
    push_part(l);
    return;
  }
  for (int k = 0; k < spec_.shards; ++k) {
    shards_[static_cast<std::size_t>(k)].pushes.push_back(id);
    try_start(k);
  }
}

// An idle shard takes the earliest push whose learner is not sending to
// another shard at the moment, and else waits for one: a learner's push goes
// to one shard at a time (the real learners send their parts one after the
// other, so over full-duplex network links a shard that has its part replies
// while the learner still sends the others), and the shards spread over the
// learners where there are enough.
void Cluster::try_start(int k) {
  Shard& s = shards_[static_cast<std::size_t>(k)];
  if (s.busy) return;
  double& idle = idle_since_[static_cast<std::size_t>(k)];
  if (idle < 0) idle = now_;  // polling for a push from now on
  if (s.pushes.empty()) return;
  if (spec_.duplex) {
    take_landed(k);
    return;
  }
  const auto it = std::find_if(s.pushes.begin(), s.pushes.end(), [&](std::int64_t id) {
    return sending_[static_cast<std::size_t>(pushes_[static_cast<std::size_t>(id)].learner)] == 0;
  });
  if (it == s.pushes.end()) return;  // taken up when a learner's send ends
  s.job = *it;
  s.pushes.erase(it);
  s.busy = true;
  const int l = pushes_[static_cast<std::size_t>(s.job)].learner;
  ++sending_[static_cast<std::size_t>(l)];
  const double waited = now_ - idle;
  idle = -1;
  at_poll(waited, Tag{Kind::shard_woken, l, k});  // the poll that notices the push
}


// The push received: its apply (and the update's, at every c-th) on a CPU.
void Cluster::apply(int k) {
  Shard& s = shards_[static_cast<std::size_t>(k)];
  const bool update = ++s.applied % spec_.gradients_per_update == 0;
  const double work = spec_.per_push_s + spec_.shard_params[static_cast<std::size_t>(k)] *
                                             (spec_.accumulate_s_per_param + (update ? spec_.update_s_per_param : 0.0));
  const Tag t{Kind::apply, pushes_[static_cast<std::size_t>(s.job)].learner, k};
  if (work > 0)
    activity(work, 1.0, cores_res_, -1, t);
  else
    handle(t);
}

// Shard k has applied its push. The first shard to apply a push has the run
// decide (next() returns it); the decision is then every shard's.
void Cluster::applied(int k) {
  Shard& s = shards_[static_cast<std::size_t>(k)];
  Push& p = pushes_[static_cast<std::size_t>(s.job)];
  s.applied_of[static_cast<std::size_t>(p.learner)] = s.job;
  s.applied_seq[static_cast<std::size_t>(p.learner)] = s.applied;
  if (!p.decided) {
    p.decided = true;
    deciding_ = k;
    pending_ = s.job;
    return;
  }
  serve(k);
}

void Cluster::release(const std::vector<int>& learners) {
  if (!decided_) throw std::logic_error("perf::Cluster::release: no push to decide on");
  decided_.reset();
  for (int q : learners) {
    auto& ln = learners_[static_cast<std::size_t>(q)];
    const double pushed = pushed_at_[static_cast<std::size_t>(q)];
    if (pushed >= 0) times_[static_cast<std::size_t>(q)].wait_s += now_ - pushed;
    pushed_at_[static_cast<std::size_t>(q)] = -1;
    ln.replies_left = spec_.shards;
    ln.released_at = now_;
  }
  if (!learners.empty())
    for (auto& s : shards_) s.decisions.push_back(learners);
  const int k0 = deciding_;
  deciding_ = -1;
  serve(k0);
  for (int k = 0; k < spec_.shards; ++k)
    if (k != k0 && !shards_[static_cast<std::size_t>(k)].busy) serve(k);
}

// Shard k is free (its push applied, or its replies sent): it replies for
// every decision whose learners' pushes it has applied (all of them: a
// hardsync update waits for its last push here too), else takes a push.
void Cluster::serve(int k) {
  Shard& s = shards_[static_cast<std::size_t>(k)];
  s.busy = false;
  s.reply_to.clear();
  for (auto d = s.decisions.begin(); d != s.decisions.end();) {
    const bool ready = std::all_of(d->begin(), d->end(), [&](int q) {
      return s.applied_of[static_cast<std::size_t>(q)] == current_push_[static_cast<std::size_t>(q)];
    });
    if (ready) {
      s.reply_to.insert(s.reply_to.end(), d->begin(), d->end());
      d = s.decisions.erase(d);
    } else {
      ++d;
    }
  }
  if (s.reply_to.empty()) {
    try_start(k);
    return;
  }
  // in the order this shard applied their pushes, as the real one replies
  std::stable_sort(s.reply_to.begin(), s.reply_to.end(), [&](int a, int b) {
    return s.applied_seq[static_cast<std::size_t>(a)] < s.applied_seq[static_cast<std::size_t>(b)];
  });
  s.busy = true;
  send_replies(k);
}

void Cluster::send_replies(int k) {
  Shard& s = shards_[static_cast<std::size_t>(k)];
  const auto n = static_cast<int>(s.reply_to.size());
  s.replies_left = n;
  s.replied_at = now_;
  if (spec_.duplex) {
    s.next_reply = 0;
    s.sends_pending += n;
    send_reply(k);
    return;
  }
  if (spec_.inject_byte_s > 0) {
    timer(n * bytes(k) * spec_.inject_byte_s, Tag{Kind::reply_injected, -1, k});
    return;
  }
  handle(Tag{Kind::reply_injected, -1, k});
}

// Duplex links: the next reply of shard k (its injected cost, then its bytes).
void Cluster::send_reply(int k) {
  const Shard& s = shards_[static_cast<std::size_t>(k)];
  const Tag t{Kind::reply_injected, s.reply_to[s.next_reply], k};
  if (spec_.inject_byte_s > 0) {
    timer(bytes(k) * spec_.inject_byte_s, t);
    return;
  }
  handle(t);
}

void Cluster::reply_arrived(int l) {
  auto& ln = learners_[static_cast<std::size_t>(l)];
  if (--ln.replies_left > 0) return;
  times_[static_cast<std::size_t>(l)].pull_s += now_ - ln.released_at;
  double& from = wait_from_[static_cast<std::size_t>(l)];
  const double waited = from >= 0 && !spec_.duplex ? now_ - from : 0;
  from = -1;
  // the poll that notices the last reply
  times_[static_cast<std::size_t>(l)].wait_s += at_poll(waited, Tag{Kind::woken, l, -1});
}

void Cluster::begin_compute(int l) {
  awaits_since_[static_cast<std::size_t>(l)] = -1;
  if (spec_.stage_s > 0) {
    times_[static_cast<std::size_t>(l)].stage_s += spec_.stage_s;
    timer(spec_.stage_s, Tag{Kind::staged, l, -1});
    return;
  }
  handle(Tag{Kind::staged, l, -1});
}

}  // namespace asgd::perf
