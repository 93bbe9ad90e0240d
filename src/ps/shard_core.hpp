#pragma once
// The numerics and bookkeeping of one parameter-server shard, independent of
// any transport: staleness stamping, per-gradient rate factors, the update
// (ps::UpdateRule + the fused SGD kernel), the clock, the per-update series,
// the staleness histogram and per-learner counts. The MPI server feeds it
// gradients that arrive over MPI; the virtual server feeds it gradients from
// its event queue. One implementation, so both apply identical numerics.
#include <cstdint>
#include <span>
#include <vector>

#include "config/config.hpp"
#include "ps/protocol.hpp"
#include "io/results.hpp"
#include "nn/model.hpp"

namespace asgd::ps {

struct Arrival {
  int learner = 0;
  std::int64_t timestamp = 0;  // server clock of the weights the gradient was computed on
  std::int64_t samples = 0;
  double loss_sum = 0;
  std::int64_t wrong = 0;
  io::LearnerCursor cursor;    // the learner's data cursor after this gradient
};

// One update's row of the run's series, the same for a shard's update and
// allreduce's: taus of the gradients it applied, the applied rate, the sums
// of their losses and wrong predictions over `samples`, and the clock spread.
io::UpdateRecord update_row(std::int64_t clock, double now_s, std::span<const std::int64_t> taus, double rate,
                            double loss_sum, double wrong, std::int64_t samples, std::int64_t spread);

class ShardCore {
 public:
  // len: parameters of this shard; n_train: training samples (epochs = samples / n_train).
  ShardCore(const TrainConfig& cfg, index_t len, int learners, index_t n_train);

  const nn::View& weights() const { return w_; }
  const nn::View& momentum() const { return inc_; }
  // Where a pushed gradient (or nsync delta) should be received before accept().
  const nn::View& inbox() const { return inbox_; }

  // Takes a pushed payload that arrived at training time now_s: by default
  // the one received into inbox(), or `payload` (this shard's slice, e.g. in
  // a learner's shared-memory window). Returns true when it completed an update.
  bool accept(const Arrival& a, double now_s, const nn::View* payload = nullptr);
  // Moves the weights into `memory` (len floats, e.g. a shared-memory window
  // learners copy from); the current values are copied there first.
  void move_weights_to(real_t* memory);
  // The current weights go to `learner` (a reply): DC-ASGD keeps them as the
  // weights that learner's next gradient is compensated against.
  void sent(int learner);
  // Pushes of `learner` applied, and of the slowest learner (SSP's clocks).
  std::int64_t applied(int learner) const { return counts_[static_cast<std::size_t>(learner)]; }
  std::int64_t slowest() const;
  // The learners whose replies learner l's push lets go, in order: for a
  // barrier, the last update's learners when the push completed one (else
  // none); otherwise l joins the held learners and those the protocol's
  // may_reply lets through leave, in the order they came (SSP holds a learner
  // more than s clocks ahead of the slowest; every other protocol none).
  std::vector<int> answer(int l, bool update);
  // Every held learner, let go (the run ends).
  std::vector<int> release_all();
  // The held learners (checkpoints), and one held again (a resume).
  const std::vector<int>& held() const { return held_; }
  void hold(int l) { held_.push_back(l); }

  std::int64_t clock() const { return clock_; }
  std::int64_t samples() const { return samples_; }
  double epoch() const { return static_cast<double>(samples_) / static_cast<double>(n_train_); }
  // After an update: the loss bound was crossed / the run has its samples or updates.
  bool diverged() const { return diverged_; }
  bool done() const;
  const UpdateRule& rule() const { return rule_; }

  // updates and staleness histogram so far
  const io::RunResult& series() const { return series_; }
  // per-learner gradients and samples (timing fields left to the caller)
  std::vector<io::LearnerTiming> learner_counts() const;
  // The same rows with the timing columns (compute, wait, push, pull, stage,
  // pushed) of `timing`, one row per learner in learner order.
  std::vector<io::LearnerTiming> learner_rows(const std::vector<io::LearnerTiming>& timing) const;
  // A checkpoint's shard part: weights, momentum, the learners' data cursors,
  // the updates and the staleness histogram so far.
  void fill_checkpoint(io::Checkpoint& ck) const;
  const std::vector<io::LearnerCursor>& cursors() const { return cursors_; }

  // Continue from a checkpoint: weights, momentum, clock, samples, series, counts.
  void restore(const io::Checkpoint& ck);

 private:
  struct Pending {
    Arrival a;
    std::int64_t tau;
  };
  bool accept_payload(const Arrival& a, double now_s, const nn::View& in);
  void apply_update(double now_s, const nn::View& payload);
  // SSP: a held learner has not advanced into the clock its last push
  // completed, so the last update's clock spread counts it one clock lower
  // (then the spread never exceeds s).
  void note_held(const std::vector<int>& held);
  // nsync: merges a pushed change of weights (rule_.merge()); returns the rate shown.
  double merge_delta(const nn::View& d);

  const TrainConfig& cfg_;
  UpdateRule rule_;
  index_t len_, n_train_;
  nn::View w_, inc_, acc_, inbox_;
  nn::View sent_;  // DC-ASGD: per learner, the weights last sent to it (learners x len)
  std::int64_t clock_ = 0, samples_ = 0;
  bool diverged_ = false;
  double merge_rate_ = 0;  // the rate of the last merged delta
  std::vector<Pending> pending_;
  std::vector<int> last_learners_;
  std::vector<int> held_;  // SSP: learners whose reply waits for the slowest
  std::vector<io::LearnerCursor> cursors_;
  std::vector<std::int64_t> counts_, samples_by_;
  io::RunResult series_;
};

}  // namespace asgd::ps
