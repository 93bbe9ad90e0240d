#include "ps/mpi_train.hpp"

#include <KokkosBlas1_axpby.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>

#include "common/blas_env.hpp"
#include "ps/mpi_util.hpp"
#include "ps/protocol.hpp"
#include "ps/shard_core.hpp"
#include "ps/shared.hpp"
#include "ps/transport.hpp"
#include "io/run_lock.hpp"

namespace asgd::ps {

namespace fs = std::filesystem;
using namespace detail;

namespace {

struct Shard {
  index_t offset = 0, len = 0;
};
Shard shard_of(index_t n_params, int k, int servers) {
  const index_t lo = n_params * k / servers, hi = n_params * (k + 1) / servers;
  return {lo, hi - lo};
}

std::string shard_checkpoint(const RunPaths& p, int k) {
  if (k == 0) return p.checkpoint;
  std::string s = p.checkpoint;
  return s.substr(0, s.size() - 3) + fmt::format(".shard{}.h5", k);
}

nn::View sub(const nn::View& v, const Shard& s) {
  return Kokkos::subview(v, std::make_pair(s.offset, s.offset + s.len));
}

// ---------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------
// Node-local shared memory. When every rank is on one node, weights and
// gradients move through MPI-3 shared windows instead of messages: a learner
// writes its gradient into its own window and sends only a header; a server
// updates its shard in its own window and replies with a header; the learner
// copies the shard and says kPullDone. Each byte is copied once instead of
// twice, and the server does no copying at all. A server never changes its
// weights while a learner is copying them (it waits for kPullDone first).
// ASGD_SHM=0 turns this off (messages only).
struct SharedWindows {
  bool on = false;
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Win weights = MPI_WIN_NULL, grads = MPI_WIN_NULL;
  std::vector<real_t*> weight_base;  // per server rank: its shard
  std::vector<real_t*> grad_base;    // per learner: its whole gradient
  int unwinding_ = std::uncaught_exceptions();
  SharedWindows() = default;
  SharedWindows(const SharedWindows&) = delete;
  SharedWindows& operator=(const SharedWindows&) = delete;
  ~SharedWindows() {
    // Freeing a window is collective: while an exception unwinds (the
    // watchdog, a failed rank) the other ranks may never get here, and
    // main() ends the job with MPI_Abort anyway.
    if (std::uncaught_exceptions() > unwinding_) return;
    for (MPI_Win* w : {&weights, &grads})
      if (*w != MPI_WIN_NULL) {
        MPI_Win_unlock_all(*w);
        MPI_Win_free(w);
      }
    if (node != MPI_COMM_NULL) MPI_Comm_free(&node);
  }
};

class Server {
 public:
  Server(const TrainConfig& cfg, const TrainOptions& opt, const Comm& comm, const RunPaths& paths,
         data::DataPair* data, nn::Model& model, index_t n_train)
      : cfg_(cfg), opt_(opt), comm_(comm), paths_(paths), data_(data), model_(model),
        k_(comm.rank()), S_(cfg.servers), L_(cfg.learners), n_train_(n_train),
        shard_(shard_of(model.n_params(), k_, S_)), core_(cfg, shard_.len, L_, n_train) {
    Kokkos::deep_copy(core_.weights(), sub(model.params(), shard_));
    timing_.resize(L_);
    for (int l = 0; l < L_; ++l) timing_[l].learner = l;  // pushed: -1 until its bye
    pushed_before_.assign(static_cast<std::size_t>(L_), 0);
  }

  // Restores this shard from its checkpoint if there is one. Returns whether it did.
  bool resume() {
    const std::string path = shard_checkpoint(paths_, k_);
    if (!fs::exists(path)) return false;
    const io::Checkpoint ck = io::read_checkpoint(path);
    io::CheckpointExpect want;
    want.config_hash = config_hash(cfg_);
    want.model = cfg_.model;
    want.n_params = model_.n_params();
    want.shard_count = S_;
    want.shard_index = k_;
    want.shard_offset = shard_.offset;
    want.shard_len = shard_.len;
    want.learners = L_;
    // one update takes at most L x n_sync minibatches: past that, the clock lies
    want.max_epochs = cfg_.epochs + static_cast<double>(L_) * cfg_.n_sync * cfg_.batch /
                                        static_cast<double>(std::max<index_t>(1, n_train_)) + 1e-9;
    if (cfg_.max_steps > 0) want.max_clock = cfg_.max_steps;
    io::check_checkpoint(ck, path, want);
    core_.restore(ck);
    // Pushes of the learners before the kill whose effect survives are the
    // ones the checkpoint holds as applied; the learners now count from 0.
    for (const auto& t : core_.learner_counts()) pushed_before_[static_cast<std::size_t>(t.learner)] = t.gradients;
    train_s_ = ck.wall_s;
    evals_ = ck.progress.evals;
    last_eval_epoch_ = evals_.empty() ? epoch() : evals_.back().epoch;
    // a checkpoint written at the very end (before the results file): nothing left to train
    stopping_ = core_.done() || core_.diverged();
    if (core_.diverged()) status_ = "diverged";
    return true;
  }

  // Weights in the shared window from now on (after resume / warm start).
  void use_shared(const SharedWindows* shm) {
    shm_ = shm;
    core_.move_weights_to(shm->weight_base[static_cast<std::size_t>(k_)]);
  }

  // The warm-up steps were training: they count on the clock.
  void warm_up_took(double s) {
    train_s_ += s;
    warm_up_s_ = s;
  }

  // What was trained until the watchdog fired, marked failed.
  io::RunResult failed_result() {
    status_ = "failed";
    return finish_result();
  }

  // This shard's weights from a full parameter buffer (warm start).
  void load_weights(const nn::View& full) { Kokkos::deep_copy(core_.weights(), sub(full, shard_)); }
  const Shard& shard() const { return shard_; }

  io::RunResult run() {
    const bool writer = k_ == 0;
    start_ = Clock::now();
    started_unix_ = unix_now();
    int byes = 0;
    bool finish = false;
    while (!finish) {
      const MPI_Status st = polite_probe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_.get(),
                                         "the next message (hello, push, pull-done, bye, finish)");
      const int src = st.MPI_SOURCE;
      switch (st.MPI_TAG) {
        case kHello: {
          PushHeader h;
          recv(h, src, kHello);
          const auto& c = core_.cursors()[static_cast<std::size_t>(src - S_)];
          reply(src, ReplyHeader{core_.clock(), stopping_ ? 1 : 0, c.epoch, c.batch});
          break;
        }
        case kPush:
          on_push(src);
          break;
        case kPullDone: {
          char dummy = 0;
          recv(dummy, src, kPullDone);
          --readers_;
          break;
        }
        case kBye: {
          PushHeader h;
          recv(h, src, kBye);
          auto& t = timing_[src - S_];
          t.compute_s = h.compute_s;
          t.wait_s = h.wait_s;
          t.push_s = h.push_s;
          t.pull_s = h.pull_s;
          t.stage_s = h.stage_s;
          t.pushed = pushed_before_[static_cast<std::size_t>(src - S_)] + h.gradients;  // its own count
          if (++byes == L_) {
            if (writer) {
              finish = true;
            } else {
              wait_for_finish();
              finish = true;
            }
          }
          break;
        }
        case kEvalReq:
          serve_eval(src);
          break;
        case kFinish: {
          char dummy = 0;
          recv(dummy, src, kFinish);
          finish = true;
          break;
        }
        default:
          throw Error(fmt::format("server {}: unexpected message tag {} from rank {}", k_,
                                  st.MPI_TAG, src));
      }
    }
    if (!writer) {
      checkpoint();
      return {};
    }
    // The writer: final evaluation (all shards still answer), then tell them to finish.
    if (status_ == "completed" && (evals_.empty() || evals_.back().clock != core_.clock())) run_eval();
    for (int s = 1; s < S_; ++s) {
      const char dummy = 0;
      MPI_Request r = isend(dummy, s, kFinish, comm_.get());
      polite_wait(r, Wait::event, "a finish message to reach a server shard");
    }
    checkpoint();
    return finish_result();
  }

 private:
  template <class T>
  void recv(T& v, int src, int tag) {
    MPI_Request r = irecv(v, src, tag, comm_.get());
    polite_wait(r, Wait::event, "a header that was probed");
  }

  // Server k > 0: send this shard to server 0, which evaluates. Answered from
  // every wait of this rank (main loop, drain_readers, wait_for_finish), so
  // that server 0 never waits on a shard that waits on something else.
  void serve_eval(int src) {
    char dummy = 0;
    recv(dummy, src, kEvalReq);
    inject_delay();
    Kokkos::fence();
    MPI_Request r = isend_floats(core_.weights().data(), shard_.len, src, kEvalData, comm_.get());
    polite_wait(r, Wait::transfer, "server 0 to take this shard for an evaluation");
  }

  double epoch() const { return core_.epoch(); }
  double train_clock() const { return seconds_since(start_) - paused_s_ + train_s_; }

  void reply(int learner_rank, ReplyHeader h) {
    inject_delay();
    Kokkos::fence();
    if (shm_ != nullptr) {  // header only; the learner copies from our window
      MPI_Win_sync(shm_->weights);
      h.shm = 1;
      ++readers_;
      MPI_Request r = isend(h, learner_rank, kReply, comm_.get());
      polite_wait(r, Wait::transfer, "a reply header to reach a learner");
      return;
    }
    // The weights go with every reply, stop included: the learner pre-posts
    // both receives, so no send here can wait on a learner that waits on us.
    MPI_Request r[2];
    r[0] = isend(h, learner_rank, kReply, comm_.get());
    r[1] = isend_floats(core_.weights().data(), shard_.len, learner_rank, kReplyData, comm_.get());
    polite_wait_all(2, r, Wait::transfer, "a reply to reach a learner");
  }

  void on_push(int src) {
    const int l = src - S_;
    PushHeader h;
    recv(h, src, kPush);
    nn::View shared;
    if (h.shm) {  // the gradient is in the learner's window: read this shard's slice there
      MPI_Win_sync(shm_->grads);
      shared = nn::View(shm_->grad_base[static_cast<std::size_t>(l)] + shard_.offset, shard_.len);
    } else {
      MPI_Request r = irecv_floats(core_.inbox().data(), shard_.len, src, kPushData, comm_.get());
      polite_wait(r, Wait::transfer, "a learner's gradient");
    }
    inject_delay();
    if (stopping_) {  // the run is over: answer with stop, apply nothing
      reply(src, ReplyHeader{core_.clock(), 1, 0, 0});
      return;
    }
    drain_readers();  // the update changes the weights: nobody may be copying them
    const bool update = core_.accept(
        {l, h.timestamp, h.samples, h.loss_sum, h.wrong, {h.cursor_epoch, h.cursor_batch}},
        train_clock(), h.shm ? &shared : nullptr);
    if (update) after_update();
    const ReplyHeader rh{core_.clock(), stopping_ ? 1 : 0, 0, 0};
    if (!core_.rule().barrier()) {
      reply(src, rh);
    } else if (update) {
      for (int p : core_.last_update_learners()) reply(p + S_, rh);
    }
  }

  // Waits until every learner that was sent a reply has copied the weights.
  // Cannot deadlock: a learner copies a shard and says kPullDone as soon as
  // that shard's reply arrives, whatever the other shards do; and while it
  // waits this shard still answers server 0's evaluation requests (server 0
  // may be gathering shards for an evaluation, with this learner's reply from
  // server 0 held up behind it).
  void drain_readers() {
    while (readers_ > 0) {
      const MPI_Status st =
          k_ == 0 ? polite_probe(MPI_ANY_SOURCE, kPullDone, comm_.get(),
                                 "learners to finish copying this shard's weights (pull-done)")
                  : polite_probe_any({{MPI_ANY_SOURCE, kPullDone}, {0, kEvalReq}}, comm_.get(),
                                     "learners to finish copying this shard's weights (pull-done)");
      if (st.MPI_TAG == kEvalReq) {
        serve_eval(st.MPI_SOURCE);
        continue;
      }
      char dummy = 0;
      recv(dummy, st.MPI_SOURCE, kPullDone);
      --readers_;
    }
  }

  void after_update() {
    const std::int64_t clock = core_.clock();
    if (k_ != 0) {
      // Every shard sees every push (with its samples and loss), so each can
      // tell the end itself and stops applying gradients with server 0.
      if (core_.diverged() || core_.done()) stopping_ = true;
      if (cfg_.checkpoint_every > 0 && clock % cfg_.checkpoint_every == 0) checkpoint_paused();
      return;
    }
    if (core_.diverged()) {
      status_ = "diverged";
      stopping_ = true;
      if (!opt_.quiet)
        spdlog::warn("diverged at update {}: training loss {} (bound {})", clock,
                     core_.series().updates.back().train_loss, cfg_.diverge_loss);
      return;
    }
    if (core_.done()) {
      stopping_ = true;
      return;
    }
    if (std::floor(epoch() / cfg_.eval_every) > std::floor(last_eval_epoch_ / cfg_.eval_every))
      run_eval();
    if (cfg_.checkpoint_every > 0 && clock % cfg_.checkpoint_every == 0) checkpoint_paused();
    progress();
  }

  void progress() {
    if (opt_.quiet || seconds_since(last_print_) < opt_.progress_every_s) return;
    const double t = train_clock();
    const std::int64_t samples = core_.samples();
    const double rate = static_cast<double>(samples - win_samples_) / std::max(1e-9, t - win_t_);
    const double total = cfg_.epochs * static_cast<double>(data_->train.n);
    double tau = 0, loss = 0;
    std::size_t n = 0;
    const auto& updates = core_.series().updates;
    for (auto it = updates.rbegin(); it != updates.rend() && n < 50; ++it, ++n) {
      tau += it->mean_tau;
      loss += it->train_loss;
    }
    spdlog::info("epoch {:.2f}/{:g}  update {}  loss {:.4f}  mean tau {:.2f}  {:.0f} samples/s  ETA {}",
                 epoch(), cfg_.epochs, core_.clock(), loss / static_cast<double>(n),
                 tau / static_cast<double>(n), rate,
                 fmt_duration((total - static_cast<double>(samples)) / rate));
    last_print_ = Clock::now();
    win_samples_ = samples;
    win_t_ = t;
  }

  // Server 0: gather every shard, evaluate off the training clock.
  void run_eval() {
    const auto t0 = Clock::now();
    inject_delay();
    Kokkos::fence();
    const nn::View full = model_.params();
    Kokkos::deep_copy(sub(full, shard_), core_.weights());
    for (int s = 1; s < S_; ++s) {
      const Shard sh = shard_of(model_.n_params(), s, S_);
      const char dummy = 0;
      MPI_Request r[2];
      r[0] = irecv_floats(full.data() + sh.offset, sh.len, s, kEvalData, comm_.get());
      r[1] = isend(dummy, s, kEvalReq, comm_.get());
      polite_wait_all(2, r, Wait::transfer, "a shard's weights for an evaluation");
    }
    const Eval e = evaluate(model_, data_->test, cfg_.eval_batch, cfg_.eval_samples);
    const double spent = seconds_since(t0);
    evals_.push_back({epoch(), core_.clock(), train_clock() - spent, e.loss, e.error, spent});
    paused_s_ += spent;
    last_eval_epoch_ = epoch();
    if (!opt_.quiet)
      spdlog::info("eval  epoch {:.2f}  update {}  test loss {:.4f}  test error {:.2f}%  ({:.1f}s, off the clock)",
                   epoch(), core_.clock(), e.loss, 100 * e.error, spent);
  }

  void checkpoint_paused() {
    const auto t0 = Clock::now();
    checkpoint();
    paused_s_ += seconds_since(t0);
  }

  void checkpoint() {
    io::Checkpoint ck;
    ck.run_id = resolved_run_id(cfg_);
    ck.model = cfg_.model;
    ck.config_hash = config_hash(cfg_);
    ck.n_params = model_.n_params();
    ck.shard_index = k_;
    ck.shard_count = S_;
    ck.shard_offset = shard_.offset;
    ck.clock = core_.clock();
    ck.schedule_step = core_.clock();
    ck.epochs = epoch();
    ck.wall_s = train_clock();
    ck.weights = to_host(core_.weights());
    ck.momentum = to_host(core_.momentum());
    ck.cursors = core_.cursors();
    ck.rng_state = {cfg_.seed};
    ck.progress.updates = core_.series().updates;
    ck.progress.evals = evals_;
    ck.progress.staleness_histogram = core_.series().staleness_histogram;
    ck.progress.learners = learner_rows();
    // the run's configuration travels with it: the reader can then refuse a
    // clock past the run's end by itself
    ck.progress.config_json = nlohmann::json(cfg_).dump();
    io::write_checkpoint(shard_checkpoint(paths_, k_), ck);
  }

  std::vector<io::LearnerTiming> learner_rows() const {
    std::vector<io::LearnerTiming> rows = core_.learner_counts();
    for (int l = 0; l < L_; ++l) {
      rows[l].compute_s = timing_[l].compute_s;
      rows[l].wait_s = timing_[l].wait_s;
      rows[l].push_s = timing_[l].push_s;
      rows[l].pull_s = timing_[l].pull_s;
      rows[l].stage_s = timing_[l].stage_s;
      rows[l].pushed = timing_[l].pushed;
    }
    return rows;
  }

  void wait_for_finish() {
    // Keep serving evaluation requests until server 0 says finish.
    for (;;) {
      const MPI_Status st =
          polite_probe(0, MPI_ANY_TAG, comm_.get(), "server 0 to say finish (or ask for this shard)");
      if (st.MPI_TAG == kEvalReq) {
        serve_eval(0);
        continue;
      }
      char dummy = 0;
      recv(dummy, 0, st.MPI_TAG);
      if (st.MPI_TAG == kFinish) return;
      throw Error(fmt::format("server {}: unexpected tag {} while finishing", k_, st.MPI_TAG));
    }
  }

  io::RunResult finish_result() {
    io::RunResult res;
    res.updates = core_.series().updates;
    res.staleness_histogram = core_.series().staleness_histogram;
    res.evals = evals_;
    res.status = status_;
    res.learners = learner_rows();
    res.summary.train_time_s = train_clock();
    res.summary.warm_up_s = warm_up_s_;
    res.train_started = started_unix_;
    res.train_finished = unix_now();
    res.summary.epochs = epoch();
    summarise(res, cfg_.target_error);
    return res;
  }

  const TrainConfig& cfg_;
  const TrainOptions& opt_;
  const Comm& comm_;
  RunPaths paths_;
  data::DataPair* data_;
  nn::Model& model_;
  int k_, S_, L_;
  index_t n_train_;
  Shard shard_;
  ShardCore core_;
  const SharedWindows* shm_ = nullptr;
  int readers_ = 0;  // learners sent a reply that have not said kPullDone
  double train_s_ = 0, paused_s_ = 0, last_eval_epoch_ = 0, warm_up_s_ = 0, started_unix_ = 0;
  Clock::time_point start_, last_print_ = Clock::now();
  std::int64_t win_samples_ = 0;
  double win_t_ = 0;
  bool stopping_ = false;
  std::string status_ = "completed";
  std::vector<io::LearnerTiming> timing_;
  std::vector<std::int64_t> pushed_before_;  // per learner: applied pushes of the checkpoint resumed from
  std::vector<io::EvalRecord> evals_;
};

// ---------------------------------------------------------------------------
// Learner
// ---------------------------------------------------------------------------
// net: this learner's GPU (--device cuda), else nullptr. With a GPU the
// weights are staged host -> device after each pull and the gradient device
// -> host before each push (timed as stage_s), unless the MPI library is
// CUDA-aware and messages are in use: then replies land in and pushes leave
// from device memory directly.
void run_learner(const TrainConfig& cfg, const Comm& comm, const data::Dataset& train,
                 nn::Model& model, const SharedWindows& shm, gpu::Net* net, bool cuda_aware) {
  const int S = cfg.servers, L = cfg.learners, l = comm.rank() - S;
  const UpdateRule rule(cfg);
  std::vector<Shard> shards;
  for (int s = 0; s < S; ++s) shards.push_back(shard_of(model.n_params(), s, S));
  data::Sampler sampler(train.n, cfg.seed, l, L, cfg.batch);
  const index_t bpe = sampler.batches_per_epoch();
  std::vector<std::int64_t> clocks(S, 0);
  std::vector<ReplyHeader> replies(S);
  PushHeader totals;
  real_t* params = model.params().data();
  const bool direct = net != nullptr && cuda_aware && !shm.on;  // MPI moves device memory
  real_t* recv_base = direct ? net->device_params() : params;

  // Replies (header + weights) from every server are received into the
  // parameter buffer. Receives are posted BEFORE the matching push is sent,
  // so a server's reply never waits on this learner (no cycle with a server
  // 0 that is busy gathering shards for an evaluation).
  std::vector<MPI_Request> heads(S), bodies(S);
  auto post_receives = [&] {
    for (int s = 0; s < S; ++s) {
      heads[s] = irecv(replies[s], s, kReply, comm.get());
      if (!shm.on)
        bodies[s] = irecv_floats(recv_base + shards[s].offset, shards[s].len, s, kReplyData, comm.get());
    }
  };
  // Returns whether server 0 said stop.
  // With shared memory each shard is copied and released (kPullDone) as soon
  // as its own reply arrives, never after waiting for another shard: a shard
  // that waits for our kPullDone then waits on nothing else (with S >= 2 a
  // release after all replies deadlocked: two shards each holding a reply
  // the other's learner needed).
  const char pull_done = 0;
  std::vector<MPI_Request> released(S, MPI_REQUEST_NULL);
  auto finish_receives = [&](double* wait_s, double* pull_s) {
    const auto t0 = Clock::now();
    double copy_s = 0;
    if (shm.on) {
      for (int left = S; left > 0; --left) {
        const int s = polite_wait_any(S, heads.data(), Wait::event, "a reply from a server shard");
        const auto c0 = Clock::now();
        inject_delay();
        MPI_Win_sync(shm.weights);
        std::memcpy(params + shards[s].offset, shm.weight_base[static_cast<std::size_t>(s)],
                    static_cast<std::size_t>(shards[s].len) * sizeof(real_t));
        released[s] = isend(pull_done, s, kPullDone, comm.get());
        copy_s += seconds_since(c0);
      }
      polite_wait_all(S, released.data(), Wait::transfer, "pull-done messages to reach the servers");
    } else {
      polite_wait_all(S, heads.data(), Wait::event, "replies from every server shard");
      const auto c0 = Clock::now();
      polite_wait_all(S, bodies.data(), Wait::transfer, "the weights from every server shard");
      copy_s = seconds_since(c0);
    }
    for (int s = 0; s < S; ++s) clocks[s] = replies[s].clock;
    if (wait_s) *wait_s += seconds_since(t0) - copy_s;
    if (pull_s) *pull_s += copy_s;
    return replies[0].stop != 0;
  };

  // hello: fetch the weights (and, after a resume, this learner's data cursor)
  post_receives();
  {
    std::vector<MPI_Request> r;
    for (int s = 0; s < S; ++s) r.push_back(isend(totals, s, kHello, comm.get()));
    polite_wait_all(S, r.data(), Wait::event, "hello messages to reach the servers");
  }
  bool stop = finish_receives(nullptr, nullptr);
  if (replies[0].cursor_epoch > 0 || replies[0].cursor_batch > 0)
    sampler.restore({replies[0].cursor_epoch, replies[0].cursor_batch});

  // Backward passes write straight into this learner's shared window: the
  // servers read the gradient there, no copy. (The window is free to write:
  // a server has consumed the last gradient before it replies.)
  if (shm.on) model.use_grad_memory(shm.grad_base[static_cast<std::size_t>(l)]);
  if (net && !direct) {  // page-locked staging buffers copy at full DMA speed
    const auto bytes = static_cast<std::size_t>(model.n_params()) * sizeof(real_t);
    net->pin(params, bytes);
    net->pin(model.grads().data(), bytes);
  }
  const real_t* send_base = direct ? net->device_grads() : model.grads().data();
  nn::View x("asgd::x", cfg.batch * train.sample_size());
  nn::IView y("asgd::y", cfg.batch);
  auto xh = Kokkos::create_mirror_view(x);
  auto yh = Kokkos::create_mirror_view(y);
  std::vector<index_t> idx;
  nn::View local_inc, fetched;
  if (rule.delta() && !net) {
    local_inc = nn::View("asgd::learner::inc", model.n_params());
    fetched = nn::View("asgd::learner::fetched", model.n_params());
    Kokkos::deep_copy(fetched, model.params());
  }
  std::int64_t step = 0;
  while (!stop) {
    PushHeader h;
    if (net) {
      if (!direct) net->set_params(params);
      if (rule.delta()) net->keep_fetched();
    }
    const auto t0 = Clock::now();
    const int local_steps = rule.delta() ? cfg.n_sync : 1;
    for (int i = 0; i < local_steps; ++i) {
      const auto st = sampler.state();
      sampler.next(idx);
      data::gather_batch(train, idx, xh.data(), yh.data());
      const std::uint64_t seed = mix(mix(cfg.seed, static_cast<std::uint64_t>(l)), step++);
      const double epoch = static_cast<double>(st.epoch) +
                           static_cast<double>(st.batch) / static_cast<double>(bpe);
      const auto lr = static_cast<real_t>(scheduled_lr(cfg, epoch));
      const auto momentum = static_cast<real_t>(cfg.momentum);
      const auto wd = static_cast<real_t>(cfg.weight_decay);
      if (net) {
        net->zero_grads();
        const gpu::Loss s = net->forward_backward(cfg.batch, xh.data(), yh.data(), true, seed, true);
        h.loss_sum += s.loss;
        h.wrong += s.wrong;
        if (rule.delta()) net->sgd_update(lr, momentum, wd);
      } else {
        Kokkos::deep_copy(x, xh);
        Kokkos::deep_copy(y, yh);
        model.zero_grads();
        const auto s = model.forward_backward(cfg.batch, x, y, nn::Context{true, seed}, true);
        h.loss_sum += s.loss;
        h.wrong += s.wrong;
        if (rule.delta())
          kernels::sgd_update<nn::Space>(model.n_params(), lr, momentum, wd, model.grads(),
                                         local_inc, model.params());
      }
      h.samples += cfg.batch;
    }
    if (rule.delta()) {  // push the accumulated change: local minus fetched
      if (net) {
        net->delta_to_grads();
      } else {
        Kokkos::deep_copy(model.grads(), model.params());
        KokkosBlas::axpy(real_t(-1), fetched, model.grads());
      }
    }
    if (net)
      net->synchronize();
    else
      Kokkos::fence();
    const auto st = sampler.state();
    h.cursor_epoch = st.epoch;
    h.cursor_batch = st.batch;
    const double compute = seconds_since(t0);
    totals.compute_s += compute;
    if (net && !direct) net->get_grads(model.grads().data());

    inject_delay();
    const auto t1 = Clock::now();
    post_receives();
    if (shm.on) {  // the gradient already is in this learner's window; headers only
      MPI_Win_sync(shm.grads);
      h.shm = 1;
    }
    std::vector<PushHeader> hs(S, h);
    std::vector<MPI_Request> r;
    for (int s = 0; s < S; ++s) {
      hs[s].timestamp = clocks[s];
      hs[s].compute_s = compute;
      r.push_back(isend(hs[s], s, kPush, comm.get()));
      if (!shm.on)
        r.push_back(isend_floats(send_base + shards[s].offset, shards[s].len, s, kPushData,
                                 comm.get()));
    }
    polite_wait_all(static_cast<int>(r.size()), r.data(), Wait::transfer,
                    "this learner's push to reach the servers");
    totals.push_s += seconds_since(t1);
    totals.gradients += 1;
    stop = finish_receives(&totals.wait_s, &totals.pull_s);
    if (rule.delta() && !stop && !net) Kokkos::deep_copy(fetched, model.params());
  }
  if (net) totals.stage_s = net->staging_s();
  std::vector<MPI_Request> r;
  for (int s = 0; s < S; ++s) r.push_back(isend(totals, s, kBye, comm.get()));
  polite_wait_all(S, r.data(), Wait::event, "bye messages to reach the servers");
}

// The host name of every rank (rank 0 gets them all; others get an empty list).
std::vector<std::string> rank_hosts(const Comm& comm) {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  mpi_check(MPI_Get_processor_name(name, &len), "Get_processor_name");
  std::vector<char> all(comm.rank() == 0 ? static_cast<std::size_t>(comm.size()) * MPI_MAX_PROCESSOR_NAME : 1);
  mpi_check(MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME,
                       MPI_CHAR, 0, comm.get()),
            "Gather");
  std::vector<std::string> hosts;
  if (comm.rank() == 0)
    for (int r = 0; r < comm.size(); ++r) {
      const char* p = all.data() + static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME;
      hosts.emplace_back(p, strnlen(p, MPI_MAX_PROCESSOR_NAME));
    }
  return hosts;
}

// Every rank stops when any failed; the lowest failing rank reports it, so a
// problem every rank meets (a truncated data file) is printed once, not once
// per rank.
void stop_if_any_failed(const Comm& comm, const std::string& error, const char* elsewhere) {
  const int mine = error.empty() ? comm.size() : comm.rank();
  int first = 0;
  mpi_check(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm.get()), "Allreduce");
  if (first == comm.size()) return;
  if (first == comm.rank()) throw SetupFailed(error);
  throw ReportedElsewhere(elsewhere);
}

}  // namespace

TrainOutcome train_mpi(const TrainConfig& cfg, MPI_Comm parent, const TrainOptions& opt) {
  Comm comm(parent);
  const int S = cfg.servers, L = cfg.learners;
  if (auto problems = validate(cfg); !problems.empty()) {
    try {
      check(cfg);
    } catch (const Error& e) {
      throw CollectiveError(e.what());
    }
  }
  if (comm.size() != S + L)
    throw CollectiveError(fmt::format(
        "started with {} MPI ranks, but --servers {} + --learners {} need exactly {} (mpiexec -n {})",
        comm.size(), S, L, S + L, S + L));
  const bool server = comm.rank() < S;
  const bool writer = comm.rank() == 0;
  set_rank_label(server ? fmt::format("rank {} (server {})", comm.rank(), comm.rank())
                        : fmt::format("rank {} (learner {})", comm.rank(), comm.rank() - S));
  // Server 0 gives up first, so that it can still write the failed result;
  // every other rank a little later (when every rank is stuck, all fire).
  set_stall_timeout(writer ? opt.stall_timeout_s : opt.stall_timeout_s * 1.2 + 1);

  // Set-up on every rank; any failure is reported by the rank that saw it and
  // every rank stops before training starts.
  TrainOutcome out;
  std::optional<data::DataPair> data;
  std::optional<nn::Model> model;
  std::optional<Server> srv;
  std::optional<io::RunLock> lock;  // the writer's: one trainer per run
  std::string error;
  int skip = 0;
  try {
    out.paths = prepare_paths(cfg);
    if (writer) lock.emplace(out.paths.checkpoint, out.paths.results, resolved_run_id(cfg));
    // A finished run is not run again; a failed one (the watchdog) is resumed
    // from its checkpoints and its results file replaced at the end.
    if (writer && fs::exists(out.paths.results)) {
      const io::RunResult done = io::read_results(out.paths.results);
      // the same run id with another configuration is not "already finished"
      check_same_config(cfg, done.config_json, out.paths.results);
      if (done.status != "failed") skip = 1;
    }
    check_resources(cfg);  // before anything is loaded or allocated
    set_blas_threads(cfg.threads);
    data = data::load_dataset(cfg.data);
    model.emplace(nn::make_model(cfg.model, {data->train.h, data->train.w, data->train.c},
                                 data->train.classes));
    model->finalize(writer ? std::max(cfg.batch, cfg.eval_batch) : cfg.batch);
    model->init(cfg.seed);
    if (server) {
      srv.emplace(cfg, opt, comm, out.paths, &*data, *model, data->train.n);
      if (!skip) out.resumed = srv->resume();
      if (!skip && !out.resumed && !cfg.warm_start.empty()) {
        load_warm_start(cfg, *model);
        srv->load_weights(model->params());
      }
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  stop_if_any_failed(comm, error, "set-up failed on another rank");
  mpi_check(MPI_Bcast(&skip, 1, MPI_INT, 0, comm.get()), "Bcast");
  if (skip) {
    out.skipped = true;
    if (writer) out.result = io::read_results(out.paths.results);
    return out;
  }
  // Every shard resumes from its checkpoint, or none does: a mix (one shard's
  // checkpoint lost) cannot be continued consistently.
  const int mine = server ? (out.resumed ? 1 : 0) : -1;
  std::vector<int> all(static_cast<std::size_t>(comm.size()));
  mpi_check(MPI_Allgather(&mine, 1, MPI_INT, all.data(), 1, MPI_INT, comm.get()), "Allgather");
  int resumed_shards = 0;
  for (int v : all) resumed_shards += v == 1 ? 1 : 0;
  if (resumed_shards != 0 && resumed_shards != S)
    throw CollectiveError(fmt::format(
        "{} of {} server shards have a checkpoint in {}; resume needs all of them (remove the "
        "shard checkpoints of run {} to start again)",
        resumed_shards, S, fs::path(out.paths.checkpoint).parent_path().string(),
        resolved_run_id(cfg)));
  out.resumed = resumed_shards == S;

  // Warm start from single-learner steps: server 0 makes them, every rank
  // takes the result (the learners fetch from the servers anyway).
  if (!out.resumed && cfg.warm_steps > 0) {
    double t = 0;
    if (writer) t = warm_up(cfg, *model, data->train);
    Kokkos::fence();
    mpi_check(MPI_Bcast(model->params().data(), static_cast<int>(model->n_params()), MPI_FLOAT, 0,
                        comm.get()),
              "Bcast");
    mpi_check(MPI_Bcast(&t, 1, MPI_DOUBLE, 0, comm.get()), "Bcast");
    if (server) {
      srv->load_weights(model->params());
      srv->warm_up_took(t);  // on the training clock
    }
    if (writer && !opt.quiet)
      spdlog::info("warm start: {} single-learner steps on server 0 in {:.1f}s", cfg.warm_steps, t);
  }

  // Node-local shared windows when every rank is on this node (see SharedWindows).
  SharedWindows shm;
  {
    mpi_check(MPI_Comm_split_type(comm.get(), MPI_COMM_TYPE_SHARED, comm.rank(), MPI_INFO_NULL,
                                  &shm.node),
              "Comm_split_type");
    int node_size = 0;
    mpi_check(MPI_Comm_size(shm.node, &node_size), "Comm_size");
    const char* env = std::getenv("ASGD_SHM");
    int want = (node_size == comm.size() && !(env && std::string(env) == "0")) ? 1 : 0;
    int everyone = 0;
    mpi_check(MPI_Allreduce(&want, &everyone, 1, MPI_INT, MPI_MIN, comm.get()), "Allreduce");
    if (everyone) {
      const index_t floats = server ? shard_of(model->n_params(), comm.rank(), S).len
                                    : model->n_params();
      void* base = nullptr;
      mpi_check(MPI_Win_allocate_shared(server ? floats * static_cast<MPI_Aint>(sizeof(real_t)) : 0,
                                        sizeof(real_t), MPI_INFO_NULL, shm.node, &base, &shm.weights),
                "Win_allocate_shared");
      mpi_check(MPI_Win_allocate_shared(server ? 0 : floats * static_cast<MPI_Aint>(sizeof(real_t)),
                                        sizeof(real_t), MPI_INFO_NULL, shm.node, &base, &shm.grads),
                "Win_allocate_shared");
      mpi_check(MPI_Win_lock_all(MPI_MODE_NOCHECK, shm.weights), "Win_lock_all");
      mpi_check(MPI_Win_lock_all(MPI_MODE_NOCHECK, shm.grads), "Win_lock_all");
      auto query = [](MPI_Win w, int rank) {
        MPI_Aint size = 0;
        int disp = 0;
        void* p = nullptr;
        mpi_check(MPI_Win_shared_query(w, rank, &size, &disp, &p), "Win_shared_query");
        return static_cast<real_t*>(p);
      };
      for (int k = 0; k < S; ++k) shm.weight_base.push_back(query(shm.weights, k));
      for (int l = 0; l < L; ++l) shm.grad_base.push_back(query(shm.grads, S + l));
      shm.on = true;
      if (server) srv->use_shared(&shm);
    }
  }

  // --device cuda: each learner takes a GPU by its rank among the learners on
  // its node. A learner that cannot get one stops the whole run before training.
  std::unique_ptr<gpu::Net> net;
  const bool cuda_aware = cfg.device == "cuda" && mpi_cuda_aware();
  if (cfg.device == "cuda") {
    MPI_Comm learners_here = MPI_COMM_NULL;
    mpi_check(MPI_Comm_split(shm.node, server ? 0 : 1, comm.rank(), &learners_here), "Comm_split");
    int node_learner = 0;
    mpi_check(MPI_Comm_rank(learners_here, &node_learner), "Comm_rank");
    mpi_check(MPI_Comm_free(&learners_here), "Comm_free");
    std::string gpu_error;
    try {
      if (!server) net = make_gpu_net(cfg, *model, node_learner);
    } catch (const std::exception& e) {
      gpu_error = fmt::format("learner {}: {}", comm.rank() - S, e.what());
    }
    stop_if_any_failed(comm, gpu_error, "a learner could not set up its GPU");
    if (net && !opt.quiet)
      spdlog::info("learner {} on {}{}", comm.rank() - S, net->device().describe(),
                   cuda_aware && !shm.on ? ", CUDA-aware MPI (no host staging)" : ", host staging");
  }

  const RunInfo info = collect_run_info();
  const std::vector<std::string> nodes = rank_hosts(comm);  // collective
  // learners' GPUs are theirs to know; their logs name each device
  const std::string gpu_note =
      cfg.device == "cuda" ? fmt::format("cuda: one GPU per learner ({} learners)", L) : "";
  if (writer && !opt.quiet) {
    spdlog::info("run {} -> {}", resolved_run_id(cfg), out.paths.results);
    spdlog::info("{}", model->summary());
    spdlog::info("{} servers + {} learners, protocol {}{}, lr policy {}, batch {} per learner; "
                 "data {} ({} train); BLAS {}",
                 S, L, cfg.protocol,
                 cfg.protocol == "softsync" ? fmt::format(" n={} (c={})", cfg.softsync_n,
                                                          UpdateRule(cfg).gradients_per_update())
                 : cfg.protocol == "nsync" ? fmt::format(" n_sync={}", cfg.n_sync)
                                           : std::string(),
                 cfg.lr_policy, cfg.batch, data->train.name, data->train.n, info.blas);
    if (out.resumed) spdlog::info("resuming {} from its checkpoints", resolved_run_id(cfg));
  }
  auto header = [&](io::RunResult& res) {
    const std::string mpi = mpi_library_version();
    fill_header(res, cfg, info, cfg.protocol, mpi);
    res.machine_json = machine_json(info, {S + L, cfg.threads, nodes, mpi, gpu_note});
  };
  if (server) {
    io::RunResult res;
    try {
      res = srv->run();
    } catch (const Stalled&) {
      if (writer) {  // what was trained so far, marked failed; the checkpoint stays for a resume
        res = srv->failed_result();
        header(res);
        res.transport = shm.on ? "shared-memory" : "messages";
        io::write_results(out.paths.results, res);
      }
      throw;
    }
    if (writer) {
      header(res);
      res.transport = shm.on ? "shared-memory" : "messages";  // ASGD_SHM=0: messages
      io::write_results(out.paths.results, res);
      out.result = std::move(res);
    }
  } else {
    run_learner(cfg, comm, data->train, *model, shm, net.get(), cuda_aware);
  }
  return out;
}

}  // namespace asgd::ps
