// The performance model over network links (ClusterSpec::duplex): a
// learner's push sent part by part, shards taking the pushes whose bytes are
// in, and the token buckets of shaped links.
#include <algorithm>

#include "perf/cluster.hpp"

namespace asgd::perf {

// Network links: the first bytes of a transfer that pass at once, taken
// from the token buckets of its two sides (each refilled at its side's rate
// since it went idle, up to burst_bytes).
double Cluster::take_burst(int res0, int res1, double bytes) {
  if (!spec_.duplex || spec_.burst_bytes <= 0) return 0;
  double free = bytes;
  for (int r : {res0, res1}) {
    const auto i = static_cast<std::size_t>(r);
    if (quiet_from_[i] >= 0) {
      tokens_[i] = std::min(spec_.burst_bytes, tokens_[i] + capacity_[i] * (now_ - quiet_from_[i]));
      quiet_from_[i] = now_;
    }
    free = std::min(free, tokens_[i]);
  }
  for (int r : {res0, res1}) tokens_[static_cast<std::size_t>(r)] -= free;
  return free;
}

// Duplex links: learner l sends the next part of its push (its bytes flow
// at once: the shard has a receive posted for them).
void Cluster::push_part(int l) {
  const int S = spec_.shards;
  const int first = static_cast<int>((static_cast<std::int64_t>(l) * std::max(1, S / spec_.learners)) % S);
  const int k = (first + part_[static_cast<std::size_t>(l)]) % S;
  shards_[static_cast<std::size_t>(k)].pushes.push_back(current_push_[static_cast<std::size_t>(l)]);
  awaits_since_[static_cast<std::size_t>(l)] = now_;  // polls (its replies' requests too) from now
  transfer(l, k, bytes(k), Tag{Kind::recv, l, k}, true);
}

// Duplex links: learner l's send of a part is done; the next part, or its push is made.
void Cluster::push_sent(int l) {
  if (++part_[static_cast<std::size_t>(l)] < spec_.shards) {
    push_part(l);
    return;
  }
  times_[static_cast<std::size_t>(l)].push_s +=
      now_ - pushes_[static_cast<std::size_t>(current_push_[static_cast<std::size_t>(l)])].made;
  awaits_since_[static_cast<std::size_t>(l)] = now_;  // its wait for the replies polls from now
}

// Duplex links: learner l's push is in at shard k, which takes it in its turn.
void Cluster::landed(int k, int l) {
  shards_[static_cast<std::size_t>(k)].landed[static_cast<std::size_t>(l)] = 1;
  try_start(k);
}

// Duplex links: shard k takes its earliest push once that push's bytes are
// in and its own replies are sent (the real shard completes its sends before
// the weights change).
void Cluster::take_landed(int k) {
  Shard& s = shards_[static_cast<std::size_t>(k)];
  const int l = pushes_[static_cast<std::size_t>(s.pushes.front())].learner;
  if (s.landed[static_cast<std::size_t>(l)] == 0 || s.sends_pending > 0) return;
  s.job = s.pushes.front();
  s.pushes.pop_front();
  s.busy = true;
  s.landed[static_cast<std::size_t>(l)] = 0;
  double& idle = idle_since_[static_cast<std::size_t>(k)];
  const double waited = now_ - idle;
  idle = -1;
  at_poll(waited, Tag{Kind::shard_woken, l, k});  // the poll that notices it
}

}  // namespace asgd::perf
