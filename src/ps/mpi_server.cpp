#include "ps/mpi_server.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/error.hpp"
#include "common/fatal.hpp"
#include "common/text.hpp"

namespace asgd::ps {

Server::Server(RunSession& session, const Comm& comm, data::DataPair* data, engine::Engine& eng)
    : s_(session), cfg_(session.cfg()), comm_(comm), data_(data), eng_(eng), k_(comm.rank()),
      S_(cfg_.servers), L_(cfg_.learners), n_train_(data->train.n),
      shard_(shard_of(eng.n_params(), k_, S_)), core_(cfg_, shard_.len, L_, n_train_) {
  load_weights(eng.params());
  timing_.resize(static_cast<std::size_t>(L_));
  for (int l = 0; l < L_; ++l) timing_[static_cast<std::size_t>(l)].learner = l;  // pushed: -1 until its bye
  pushed_before_.assign(static_cast<std::size_t>(L_), 0);
  reply_heads_.resize(static_cast<std::size_t>(L_));
  replies_.assign(2 * static_cast<std::size_t>(L_), MPI_REQUEST_NULL);
  landing_on_ = static_cast<double>(L_) * static_cast<double>(shard_.len) * sizeof(real_t) <= kLandingBudgetBytes;
  landing_.resize(static_cast<std::size_t>(L_));
  landing_req_.assign(static_cast<std::size_t>(L_), MPI_REQUEST_NULL);
}

bool Server::resume() {
  io::CheckpointExpect want;
  want.n_params = eng_.n_params();
  want.shard_count = S_;
  want.shard_index = k_;
  want.shard_offset = shard_.offset;
  want.shard_len = shard_.len;
  want.learners = L_;
  // one update takes at most L x n_sync minibatches: past that, the clock lies
  want.max_epochs = cfg_.epochs + static_cast<double>(L_) * cfg_.n_sync * cfg_.batch /
                                      static_cast<double>(std::max<index_t>(1, n_train_)) + 1e-9;
  if (cfg_.max_steps > 0) want.max_clock = cfg_.max_steps;
  const auto ck = s_.resume(shard_checkpoint(s_.paths(), k_), want);
  if (!ck) return false;
  core_.restore(*ck);
  // Pushes of the learners before the kill whose effect survives are the
  // ones the checkpoint holds as applied; the learners now count from 0.
  for (const auto& t : core_.learner_counts())
    pushed_before_[static_cast<std::size_t>(t.learner)] = t.gradients;
  train_s_ = ck->wall_s;
  evals_ = ck->progress.evals;
  // a checkpoint written at the very end (before the results file): nothing left to train
  stopping_ = core_.done() || core_.diverged();
  if (core_.diverged()) status_ = RunStatus::diverged;
  return true;
}

void Server::use_shared(const SharedWindows* shm) {
  shm_ = shm;
  core_.move_weights_to(shm->weight_base[static_cast<std::size_t>(k_)]);
}

void Server::warm_up_took(double s) {
  train_s_ += s;
  warm_up_s_ = s;
}

void Server::load_weights(const real_t* full) {
  Kokkos::deep_copy(core_.weights(), nn::View(const_cast<real_t*>(full) + shard_.offset, shard_.len));
}

io::RunResult Server::failed_result() {
  status_ = RunStatus::failed;
  return finish_result();
}

io::RunResult Server::run() {
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
      case kHello:
        on_hello(src);
        break;
      case kPush:
        on_push(src);
        if (k_ == 0) inject_signal("server");
        break;
      case kPullDone: {
        char dummy = 0;
        recv(dummy, src, kPullDone);
        --readers_;
        break;
      }
      case kBye:
        on_bye(src, finish, byes);
        break;
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
  finish_replies();
  for (int l = 0; l < L_; ++l) cancel_landing(l);
  if (!writer) {
    checkpoint();
    return {};
  }
  // The writer: final evaluation (all shards still answer), then tell them to finish.
  if (status_ == RunStatus::completed && (evals_.empty() || evals_.back().clock != core_.clock())) run_eval();
  for (int s = 1; s < S_; ++s) {
    const char dummy = 0;
    MPI_Request r = isend(dummy, s, kFinish, comm_.get());
    polite_wait(r, Wait::event, "a finish message to reach a server shard");
  }
  checkpoint();
  return finish_result();
}

template <class T>
void Server::recv(T& v, int src, int tag) {
  MPI_Request r = irecv(v, src, tag, comm_.get());
  polite_wait(r, Wait::event, "a header that was probed");
}

void Server::on_hello(int src) {
  PushHeader h;
  recv(h, src, kHello);
  const auto& c = core_.cursors()[static_cast<std::size_t>(src - S_)];
  reply(src, ReplyHeader{core_.clock(), stopping_ ? 1 : 0, c.epoch, c.batch});
  if (shm_ == nullptr && !stopping_) post_landing(src - S_);  // its gradients come by message
}

void Server::on_bye(int src, bool& finish, int& byes) {
  PushHeader h;
  recv(h, src, kBye);
  cancel_landing(src - S_);
  auto& t = timing_[static_cast<std::size_t>(src - S_)];
  t.compute_s = h.compute_s;
  t.wait_s = h.wait_s;
  t.push_s = h.push_s;
  t.pull_s = h.pull_s;
  t.stage_s = h.stage_s;
  t.pushed = pushed_before_[static_cast<std::size_t>(src - S_)] + h.gradients;  // its own count
  if (++byes < L_) return;
  if (k_ != 0) wait_for_finish();
  finish = true;
}

// Server k > 0: send this shard to server 0, which evaluates. Answered from
// every wait of this rank (main loop, drain_readers, wait_for_finish), so
// that server 0 never waits on a shard that waits on something else.
void Server::serve_eval(int src) {
  char dummy = 0;
  recv(dummy, src, kEvalReq);
  inject_delay();
  Kokkos::fence();
  MPI_Request r = isend_floats(core_.weights().data(), shard_.len, src, kEvalData, comm_.get());
  polite_wait(r, Wait::transfer, "server 0 to take this shard for an evaluation");
}

double Server::train_clock() const { return seconds_since(start_) - paused_s_ + train_s_; }

void Server::reply(int learner_rank, ReplyHeader h) {
  inject_delay();
  sleep_s(injected_server_costs().byte_s * 4.0 * static_cast<double>(shard_.len));
  core_.sent(learner_rank - S_);  // DC-ASGD: what this learner's next gradient is compensated against
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
  // The server does not wait for them here: replies to several learners go
  // out at once, beside the pushes coming in, and finish_replies completes
  // them before the weights change.
  const auto l = static_cast<std::size_t>(learner_rank - S_);
  MPI_Request* r = &replies_[2 * l];
  polite_wait_all(2, r, Wait::transfer, "an earlier reply to reach a learner");
  reply_heads_[l] = h;
  r[0] = isend(reply_heads_[l], learner_rank, kReply, comm_.get());
  r[1] = isend_floats(core_.weights().data(), shard_.len, learner_rank, kReplyData, comm_.get());
}

// Completes every reply still going out. Cannot deadlock: each learner
// pre-posted the receives of its reply before it pushed.
void Server::finish_replies() {
  polite_wait_all(static_cast<int>(replies_.size()), replies_.data(), Wait::transfer,
                  "replies to reach the learners");
}

void Server::on_push(int src) {
  const int l = src - S_;
  PushHeader h;
  recv(h, src, kPush);
  nn::View shared;
  if (h.shm) {  // the gradient is in the learner's window: read this shard's slice there
    MPI_Win_sync(shm_->grads);
    shared = nn::View(shm_->grad_base[static_cast<std::size_t>(l)] + shard_.offset, shard_.len);
  } else if (auto& r = landing_req_[static_cast<std::size_t>(l)]; r != MPI_REQUEST_NULL) {
    polite_wait(r, Wait::transfer, "a learner's gradient");
    shared = landing_[static_cast<std::size_t>(l)];
  } else {
    MPI_Request r1 = irecv_floats(core_.inbox().data(), shard_.len, src, kPushData, comm_.get());
    polite_wait(r1, Wait::transfer, "a learner's gradient");
  }
  const nn::View* payload = shared.data() != nullptr ? &shared : nullptr;
  inject_delay();
  sleep_s(injected_server_costs().byte_s * 4.0 * static_cast<double>(shard_.len));
  if (stopping_) {  // the run is over: answer with stop, apply nothing
    reply(src, ReplyHeader{core_.clock(), 1, 0, 0});
    return;
  }
  drain_readers();  // the update changes the weights: nobody may be copying them
  finish_replies();  // nor sending them
  const bool update = core_.accept(
      {l, h.timestamp, h.samples, h.loss_sum, h.wrong, {h.cursor_epoch, h.cursor_batch}},
      train_clock(), payload);
  if (update) {
    sleep_s(injected_server_costs().update_s);
    after_update();
  }
  // the learners this push lets go (ShardCore::answer); at the end every
  // learner SSP still holds is answered too (stop)
  const ReplyHeader rh{core_.clock(), stopping_ ? 1 : 0, 0, 0};
  for (int p : core_.answer(l, update)) reply(p + S_, rh);
  if (stopping_)
    for (int q : core_.release_all()) reply(q + S_, rh);
  else if (!h.shm)
    post_landing(l);  // its gradient has been taken in: the buffer is free for the next
}

void Server::post_landing(int l) {
  if (!landing_on_) return;
  const auto i = static_cast<std::size_t>(l);
  if (landing_[i].data() == nullptr) landing_[i] = nn::View("asgd::server::landing", shard_.len);
  landing_req_[i] = irecv_floats(landing_[i].data(), shard_.len, l + S_, kPushData, comm_.get());
}

// A learner that said bye pushes no more: its posted receive is withdrawn.
void Server::cancel_landing(int l) {
  auto& r = landing_req_[static_cast<std::size_t>(l)];
  if (r == MPI_REQUEST_NULL) return;
  mpi_check(MPI_Cancel(&r), "Cancel");
  polite_wait(r, Wait::event, "a withdrawn receive");
}

// Waits until every learner that was sent a reply has copied the weights.
// Cannot deadlock: a learner copies a shard and says kPullDone as soon as
// that shard's reply arrives, whatever the other shards do; and while it
// waits this shard still answers server 0's evaluation requests (server 0
// may be gathering shards for an evaluation, with this learner's reply from
// server 0 held up behind it).
void Server::drain_readers() {
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

void Server::after_update() {
  const std::int64_t clock = core_.clock();
  if (k_ != 0) {
    // Every shard sees every push (with its samples and loss), so each can
    // tell the end itself and stops applying gradients with server 0.
    if (core_.diverged() || core_.done()) stopping_ = true;
    if (s_.checkpoint_due(clock)) checkpoint_paused();
    return;
  }
  const UpdateHooks hooks{[&] { run_eval(); }, [&] { checkpoint_paused(); }, [&] { progress(); }};
  if (const auto end = s_.after_update(clock, epoch(), core_.series().updates.back().train_loss, core_.done(), hooks)) {
    status_ = *end;
    stopping_ = true;
  }
}

void Server::progress() {
  const double t = train_clock();
  const std::int64_t samples = core_.samples();
  double tau = 0, loss = 0;
  std::size_t n = 0;
  const auto& updates = core_.series().updates;
  for (auto it = updates.rbegin(); it != updates.rend() && n < 50; ++it, ++n) {
    tau += it->mean_tau;
    loss += it->train_loss;
  }
  ProgressLine p;
  p.epoch = epoch();
  p.epochs = cfg_.epochs;
  p.clock = core_.clock();
  p.loss = loss / static_cast<double>(n);
  p.mean_tau = tau / static_cast<double>(n);
  p.samples_per_s = static_cast<double>(samples - win_samples_) / std::max(1e-9, t - win_t_);
  p.eta_s = (cfg_.epochs * static_cast<double>(data_->train.n) - static_cast<double>(samples)) / p.samples_per_s;
  s_.progress(p);
  win_samples_ = samples;
  win_t_ = t;
}

// Server 0: gather every shard, evaluate off the training clock.
void Server::run_eval() {
  const auto t0 = Clock::now();
  inject_delay();
  Kokkos::fence();
  real_t* full = eng_.params();
  Kokkos::deep_copy(nn::View(full + shard_.offset, shard_.len), core_.weights());
  for (int s = 1; s < S_; ++s) {
    const Shard sh = shard_of(eng_.n_params(), s, S_);
    const char dummy = 0;
    MPI_Request r[2];
    r[0] = irecv_floats(full + sh.offset, sh.len, s, kEvalData, comm_.get());
    r[1] = isend(dummy, s, kEvalReq, comm_.get());
    polite_wait_all(2, r, Wait::transfer, "a shard's weights for an evaluation");
  }
  eng_.params_changed();
  const Eval e = evaluate(eng_, data_->test, cfg_.eval_batch, cfg_.eval_samples);
  const double spent = seconds_since(t0);
  s_.evaluated(evals_, epoch(), core_.clock(), train_clock() - spent, e, spent);
  paused_s_ += spent;
}

void Server::checkpoint_paused() {
  const auto t0 = Clock::now();
  checkpoint();
  paused_s_ += seconds_since(t0);
}

void Server::checkpoint() {
  io::Checkpoint ck = s_.checkpoint(core_.clock(), epoch(), train_clock(), eng_.n_params());
  ck.shard_index = k_;
  ck.shard_count = S_;
  ck.shard_offset = shard_.offset;
  core_.fill_checkpoint(ck);
  ck.progress.evals = evals_;
  ck.progress.learners = core_.learner_rows(timing_);
  io::write_checkpoint(shard_checkpoint(s_.paths(), k_), ck);
}

void Server::wait_for_finish() {
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

// The result without header, status set; RunSession::finish summarises and writes it.
io::RunResult Server::finish_result() {
  io::RunResult res;
  res.updates = core_.series().updates;
  res.staleness_histogram = core_.series().staleness_histogram;
  res.evals = evals_;
  res.status = status_;
  res.learners = core_.learner_rows(timing_);
  res.summary.train_time_s = train_clock();
  res.summary.warm_up_s = warm_up_s_;
  res.train_started = started_unix_;
  res.summary.epochs = epoch();
  return res;
}

}  // namespace asgd::ps
