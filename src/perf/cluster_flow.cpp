// The fluid part of the performance model: timers, activities that share
// resources (cores, links) equally, and the clock's advance over them.
#include "perf/cluster.hpp"

#include <algorithm>

namespace asgd::perf {

void Cluster::timer(double dt, Tag tag) { timers_.push({now_ + dt, seq_++, tag}); }

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
  for (int r : a.res)
    if (r >= 0) ++users_[static_cast<std::size_t>(r)];
  rates();
  return static_cast<int>(slot);
}

void Cluster::rates() {
  // the cores: shared only when the ranks outnumber them
  double cpu = 1;
  if (cores_res_ >= 0) {
    const double working = users_[static_cast<std::size_t>(cores_res_)];
    const double ranks = spec_.learners + spec_.shards;
    if (ranks > spec_.cores && working > 0)
      cpu = std::min(1.0, spec_.cores / (working + spec_.waiting_rank_load * (ranks - working)));
  }
  for (auto& a : acts_) {
    if (!a.live) continue;
    double r = a.max_rate;
    for (int res : a.res) {
      if (res < 0) continue;
      r = std::min(r, res == cores_res_ ? cpu
                                        : capacity_[static_cast<std::size_t>(res)] / users_[static_cast<std::size_t>(res)]);
    }
    a.rate = r;
  }
}

void Cluster::advance(double t) {
  const double dt = t - now_;
  if (dt > 0)
    for (auto& a : acts_)
      if (a.live) a.left = std::max(0.0, a.left - a.rate * dt);
  now_ = std::max(now_, t);
}

}  // namespace asgd::perf
