#include "ps/shard_core.hpp"

#include <KokkosBlas1_axpby.hpp>
#include <KokkosBlas1_scal.hpp>

#include <algorithm>
#include <cmath>

#include "ps/run_parts.hpp"
#include "ps/trainer.hpp"

namespace asgd::ps {
namespace {

protocol::Vec vec(const nn::View& v) { return {v.data(), static_cast<index_t>(v.extent(0))}; }
protocol::CVec cvec(const nn::View& v) { return {v.data(), static_cast<index_t>(v.extent(0))}; }

}  // namespace

ShardCore::ShardCore(const TrainConfig& cfg, index_t len, int learners, index_t n_train)
    : cfg_(cfg), rule_(cfg), len_(len), n_train_(n_train) {
  w_ = nn::View("asgd::server::w", len);
  inc_ = nn::View("asgd::server::inc", len);
  inbox_ = nn::View("asgd::server::inbox", len);
  if (!rule_.delta() && (rule_.gradients_per_update() > 1 || rule_.delay_compensation() > 0))
    acc_ = nn::View("asgd::server::acc", len);
  if (rule_.delay_compensation() > 0) sent_ = nn::View("asgd::server::sent", len * learners);
  cursors_.assign(learners, {0, 0});
  counts_.assign(learners, 0);
  samples_by_.assign(learners, 0);
}

bool ShardCore::done() const { return run_done(cfg_, samples_, clock_, n_train_); }

void ShardCore::move_weights_to(real_t* memory) {
  nn::View moved(memory, len_);
  Kokkos::deep_copy(moved, w_);
  Kokkos::fence();
  w_ = moved;
}

void ShardCore::sent(int learner) {
  if (sent_.data() == nullptr) return;
  const auto at = static_cast<index_t>(learner) * len_;
  Kokkos::deep_copy(Kokkos::subview(sent_, std::make_pair(at, at + len_)), w_);
}

void ShardCore::note_held(const std::vector<int>& held) {
  if (held.empty() || series_.updates.empty()) return;
  std::vector<std::int64_t> clocks = counts_;
  for (int l : held) clocks[static_cast<std::size_t>(l)] -= 1;
  const auto [lo, hi] = std::minmax_element(clocks.begin(), clocks.end());
  series_.updates.back().clock_spread = *hi - *lo;
}

std::vector<int> ShardCore::answer(int l, bool update) {
  if (rule_.barrier()) return update ? last_learners_ : std::vector<int>{};
  held_.push_back(l);
  const std::int64_t low = slowest();
  std::vector<int> go, still;
  for (int q : held_) (rule_.may_reply(counts_[static_cast<std::size_t>(q)], low) ? go : still).push_back(q);
  held_.swap(still);
  note_held(held_);
  return go;
}

std::vector<int> ShardCore::release_all() {
  std::vector<int> go;
  go.swap(held_);
  return go;
}

std::int64_t ShardCore::slowest() const { return *std::min_element(counts_.begin(), counts_.end()); }

bool ShardCore::accept(const Arrival& a, double now_s, const nn::View* payload) {
  const nn::View& in = payload != nullptr ? *payload : inbox_;
  if (sent_.data() != nullptr) {  // DC-ASGD (c = 1): the compensated gradient is the payload
    const auto at = static_cast<index_t>(a.learner) * len_;
    if (rule_.protocol().compensate(vec(acc_), cvec(in), cvec(w_), {sent_.data() + at, len_})) {
      Kokkos::fence();
      payload = &acc_;
    }
  }
  return accept_payload(a, now_s, payload != nullptr ? *payload : inbox_);
}

// A pushed change of weights (nsync) or elastic difference (EASGD), merged
// by the run's merge rule into the weights; the rule's state is the shard's
// momentum buffer, so checkpoints keep it.
double ShardCore::merge_delta(const nn::View& d) {
  const protocol::MergeStep step{scheduled_lr(cfg_, epoch()), rule_.local_steps(), static_cast<int>(counts_.size())};
  return rule_.merge().merge(step, vec(w_), vec(inc_), cvec(d));
}

bool ShardCore::accept_payload(const Arrival& a, double now_s, const nn::View& in) {
  const std::int64_t tau = std::max<std::int64_t>(0, clock_ - a.timestamp);
  pending_.push_back({a, tau});
  const auto f = static_cast<real_t>(rule_.factor(tau));
  if (rule_.delta()) {
    merge_rate_ = merge_delta(in);
  } else if (rule_.gradients_per_update() == 1) {
    // c = 1: the update reads the gradient where it arrived (no accumulator pass)
  } else if (pending_.size() == 1) {
    KokkosBlas::scal(acc_, f, in);  // the first gradient sets acc: no zeroing pass
  } else if (static_cast<int>(pending_.size()) < rule_.gradients_per_update()) {
    KokkosBlas::axpy(f, in, acc_);
  }  // else the last of c: apply_update sums it in the update's pass
  // the inbox is reused by the next receive: the kernels above must be done
  // with it (they run asynchronously on a device backend)
  Kokkos::fence();
  if (static_cast<int>(pending_.size()) < rule_.gradients_per_update()) return false;
  apply_update(now_s, in);
  return true;
}

void ShardCore::apply_update(double now_s, const nn::View& payload) {
  std::vector<std::int64_t> taus;
  double loss = 0;
  std::int64_t samples = 0, wrong = 0;
  last_learners_.clear();
  for (const auto& p : pending_) {
    taus.push_back(p.tau);
    samples += p.a.samples;
    loss += p.a.loss_sum;
    wrong += p.a.wrong;
    counts_[p.a.learner] += 1;
    samples_by_[p.a.learner] += p.a.samples;
    cursors_[p.a.learner] = p.a.cursor;
    last_learners_.push_back(p.a.learner);
    auto& hist = series_.staleness_histogram;
    if (static_cast<std::size_t>(p.tau) >= hist.size())
      hist.resize(static_cast<std::size_t>(p.tau) + 1, 0);
    hist[static_cast<std::size_t>(p.tau)] += 1;
  }
  const double lr = scheduled_lr(cfg_, epoch());
  double rate = rule_.delta() ? merge_rate_ : lr;
  if (!rule_.delta()) {
    const UpdateRule::Scales sc = rule_.scales(taus);  // weight decay scaled with the step
    const bool direct = rule_.gradients_per_update() == 1;
    const auto lr_r = static_cast<real_t>(lr), mom = static_cast<real_t>(cfg_.momentum);
    const auto wd = static_cast<real_t>(cfg_.weight_decay * sc.rate);
    if (direct)
      kernels::sgd_update<nn::Space>(len_, lr_r, mom, wd, payload, inc_, w_,
                                     static_cast<real_t>(sc.gradient * rule_.factor(taus[0])));
    else  // acc holds the first c - 1 gradients; the last is summed in this pass
      kernels::sgd_update_sum<nn::Space>(len_, lr_r, mom, wd, acc_, static_cast<real_t>(rule_.factor(taus.back())),
                                         payload, inc_, w_, static_cast<real_t>(sc.gradient));
    rate = lr * sc.rate;
  }
  Kokkos::fence();
  pending_.clear();
  ++clock_;
  samples_ += samples;
  const std::int64_t spread = *std::max_element(counts_.begin(), counts_.end()) - slowest();
  series_.updates.push_back(update_row(clock_, now_s, taus, rate, loss, static_cast<double>(wrong), samples, spread));
  const double mean_loss = series_.updates.back().train_loss;
  if (!std::isfinite(mean_loss) || mean_loss > cfg_.diverge_loss) diverged_ = true;
}

io::UpdateRecord update_row(std::int64_t clock, double now_s, std::span<const std::int64_t> taus, double rate,
                            double loss_sum, double wrong, std::int64_t samples, std::int64_t spread) {
  double mean_tau = 0;
  for (auto t : taus) mean_tau += static_cast<double>(t);
  mean_tau /= static_cast<double>(taus.size());
  const double n = static_cast<double>(samples);
  return {clock, now_s, static_cast<std::int32_t>(taus.size()), mean_tau, rate,
          samples > 0 ? loss_sum / n : 0, samples > 0 ? wrong / n : 0, samples, spread};
}

std::vector<io::LearnerTiming> ShardCore::learner_counts() const {
  std::vector<io::LearnerTiming> rows(counts_.size());
  for (std::size_t l = 0; l < rows.size(); ++l) {
    rows[l].learner = static_cast<std::int32_t>(l);
    rows[l].gradients = counts_[l];
    rows[l].samples = samples_by_[l];
  }
  return rows;
}

std::vector<io::LearnerTiming> ShardCore::learner_rows(const std::vector<io::LearnerTiming>& timing) const {
  std::vector<io::LearnerTiming> rows = learner_counts();
  for (std::size_t l = 0; l < rows.size() && l < timing.size(); ++l) {
    const io::LearnerTiming& t = timing[l];
    rows[l].compute_s = t.compute_s;
    rows[l].wait_s = t.wait_s;
    rows[l].push_s = t.push_s;
    rows[l].pull_s = t.pull_s;
    rows[l].stage_s = t.stage_s;
    rows[l].pushed = t.pushed;
  }
  return rows;
}

void ShardCore::fill_checkpoint(io::Checkpoint& ck) const {
  ck.weights = to_host(w_);
  ck.momentum = to_host(inc_);
  ck.cursors = cursors_;
  ck.progress.updates = series_.updates;
  ck.progress.staleness_histogram = series_.staleness_histogram;
}

void ShardCore::restore(const io::Checkpoint& ck) {
  Kokkos::deep_copy(w_, Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                            ck.weights.data(), ck.weights.size()));
  Kokkos::deep_copy(inc_, Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                              ck.momentum.data(), ck.momentum.size()));
  clock_ = ck.clock;
  samples_ = static_cast<std::int64_t>(std::llround(ck.epochs * static_cast<double>(n_train_)));
  for (std::size_t l = 0; l < cursors_.size() && l < ck.cursors.size(); ++l) cursors_[l] = ck.cursors[l];
  series_.updates = ck.progress.updates;
  series_.staleness_histogram = ck.progress.staleness_histogram;
  for (const auto& t : ck.progress.learners)
    if (t.learner >= 0 && static_cast<std::size_t>(t.learner) < counts_.size()) {
      counts_[t.learner] = t.gradients;
      samples_by_[t.learner] = t.samples;
    }
}

}  // namespace asgd::ps
