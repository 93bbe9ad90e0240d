// One learner, one process: SGD with momentum on the learner's own weights,
// through the shared run lifecycle (ps/session.hpp).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "common/error.hpp"
#include "common/text.hpp"
#include "common/hash.hpp"
#include "common/runinfo.hpp"
#include "ps/session.hpp"
#include "ps/shared.hpp"
#include "ps/trainer.hpp"

namespace asgd::ps {

using namespace detail;

namespace {

// The state of a single-learner run and its steps.
class Single {
 public:
  Single(RunSession& s, RunSetup& run)
      : s_(s), cfg_(s.cfg()), data_(run.data), model_(run.model),
        sampler_(data_.train.n, cfg_.seed, 0, 1, cfg_.batch), bpe_(sampler_.batches_per_epoch()),
        inc_("asgd::momentum", model_.n_params()), res_(s.outcome().result) {
    const double steps = std::ceil(cfg_.epochs * static_cast<double>(bpe_));
    if (!(steps >= 1 && steps < 0x1p62))
      throw Error(fmt::format("--epochs {} at {} updates per epoch makes {} updates: not a run",
                              cfg_.epochs, bpe_, steps));
    total_ = static_cast<std::int64_t>(steps);
    if (cfg_.max_steps > 0) total_ = std::min(total_, cfg_.max_steps);
  }

  void start(const RunInfo& info) {
    s_.header(res_, info, "single", "none (single process)");
    io::CheckpointExpect want;
    want.n_params = model_.n_params();
    want.learners = 1;
    want.max_clock = total_;
    want.max_epochs = static_cast<double>(total_) / static_cast<double>(bpe_) + 1e-9;
    if (const auto ck = s_.resume(s_.paths().checkpoint, want)) {
      restore(*ck);
    } else {
      s_.start_weights(model_);
      if (cfg_.warm_steps > 0) {
        const double t = warm_up(cfg_, model_, data_.train);
        train_s_ = t;  // warm-up steps are training: on the clock
        res_.summary.warm_up_s = t;
        if (!s_.opt().quiet)
          spdlog::info("warm start: {} single-learner steps in {:.1f}s", cfg_.warm_steps, t);
      }
    }
    s_.evals().done(epoch());
    // --device cuda: weights and momentum live on the GPU from here on; the
    // model's buffers are refreshed from it for checkpoints.
    net_ = make_gpu_net(cfg_, model_, 0);
    if (net_) {
      net_->set_momentum(inc_.data());
      res_.machine_json = machine_json(info, {1, cfg_.threads, {info.host}, res_.mpi_version,
                                              net_->device().describe()});
    }
    if (!s_.opt().quiet) {
      spdlog::info("run {} -> {}", res_.run_id, s_.paths().results);
      spdlog::info("{}", model_.summary());
      if (net_) spdlog::info("device {}", net_->device().describe());
      spdlog::info("data {}: {} train, {} test, {}x{}x{}; batch {}, {} updates ({} per epoch); BLAS {}",
                   data_.train.name, data_.train.n, data_.test.n, data_.train.h, data_.train.w,
                   data_.train.c, cfg_.batch, total_, bpe_, info.blas);
    }
  }

  // Trains to the end (or divergence); returns the status.
  std::string train() {
    win_clock_ = clock_;
    win_train_ = train_s_;
    std::int64_t steps_here = 0;
    res_.train_started = unix_now();
    while (clock_ < total_) {
      const double loss = step();
      if (s_.diverged(loss)) {
        s_.warn_diverged(clock_, loss);
        return "diverged";
      }
      if (s_.evals().due(epoch()) && clock_ < total_) evaluate_now();
      if (cfg_.checkpoint_every > 0 && clock_ % cfg_.checkpoint_every == 0 && clock_ < total_)
        checkpoint();
      if (s_.opt().abort_after > 0 && ++steps_here >= s_.opt().abort_after)
        throw Aborted(fmt::format("aborted after {} updates (test hook)", steps_here));
      if (s_.progress_due() || (!s_.opt().quiet && clock_ == total_)) progress();
    }
    if (res_.evals.empty() || res_.evals.back().clock != clock_) evaluate_now();
    return "completed";
  }

  void finish(const std::string& status) {
    std::int64_t samples = 0;
    for (const auto& u : res_.updates) samples += u.samples;
    res_.learners = {{0, train_s_, 0, 0, 0, clock_, samples}};
    res_.staleness_histogram = {clock_};  // one learner: every gradient is fresh (tau = 0)
    // the checkpoint keeps the state at the end (for warm starts and comparisons)
    s_.finish(res_, status, train_s_, epoch(), [&] { checkpoint(); });
  }

 private:
  double epoch() const { return static_cast<double>(clock_) / static_cast<double>(bpe_); }

  void restore(const io::Checkpoint& ck) {
    try {
      sampler_.restore({ck.cursors[0].epoch, ck.cursors[0].batch});
    } catch (const Error& e) {
      throw Error(fmt::format("{}: checkpoint's data cursor does not fit this run: {}",
                              s_.paths().checkpoint, e.what()));
    }
    from_host(ck.weights, model_.params());
    from_host(ck.momentum, inc_);
    clock_ = ck.clock;
    train_s_ = ck.wall_s;
    res_.updates = ck.progress.updates;
    res_.evals = ck.progress.evals;
    if (!s_.opt().quiet)
      spdlog::info("resuming {} from checkpoint at update {} ({:.2f} epochs)", res_.run_id, clock_,
                   epoch());
  }

  // One minibatch and its update; returns the minibatch's mean loss.
  double step() {
    const auto t0 = Clock::now();
    const double lr = scheduled_lr(cfg_, epoch());
    sampler_.next(idx_);
    data::gather_batch(data_.train, idx_, xh_.data(), yh_.data());
    kernels::LossSum s;
    const std::uint64_t seed = mix(cfg_.seed, static_cast<std::uint64_t>(clock_));
    if (net_) {
      net_->zero_grads();
      const gpu::Loss g = net_->forward_backward(cfg_.batch, xh_.data(), yh_.data(), true, seed, true);
      net_->sgd_update(static_cast<real_t>(lr), static_cast<real_t>(cfg_.momentum),
                       static_cast<real_t>(cfg_.weight_decay));
      net_->synchronize();  // the update is queued on the GPU's stream: count it in this step
      s = {g.loss, g.wrong};
    } else {
      Kokkos::deep_copy(x_, xh_);
      Kokkos::deep_copy(y_, yh_);
      model_.zero_grads();
      s = model_.forward_backward(cfg_.batch, x_, y_, nn::Context{true, seed}, true);
      kernels::sgd_update<nn::Space>(model_.n_params(), static_cast<real_t>(lr),
                                     static_cast<real_t>(cfg_.momentum),
                                     static_cast<real_t>(cfg_.weight_decay), model_.grads(), inc_,
                                     model_.params());
      Kokkos::fence();
    }
    train_s_ += seconds_since(t0);
    ++clock_;
    const double loss = s.loss / static_cast<double>(cfg_.batch);
    const double err = static_cast<double>(s.wrong) / static_cast<double>(cfg_.batch);
    res_.updates.push_back({clock_, train_s_, 1, 0.0, lr, loss, err, cfg_.batch});
    win_loss_ += loss;
    win_err_ += err;
    ++win_n_;
    return loss;
  }

  void evaluate_now() {
    const auto t0 = Clock::now();
    const Eval e = evaluate(model_, data_.test, cfg_.eval_batch, cfg_.eval_samples, net_.get());
    res_.evals.push_back({epoch(), clock_, train_s_, e.loss, e.error, seconds_since(t0)});
    s_.evals().done(epoch());
    if (!s_.opt().quiet)
      spdlog::info("eval  epoch {:.2f}  test loss {:.4f}  test error {:.2f}%  ({:.1f}s, off the clock)",
                   res_.evals.back().epoch, e.loss, 100 * e.error, res_.evals.back().eval_s);
  }

  void checkpoint() {
    if (net_) {
      net_->get_params(model_.params().data());
      net_->get_momentum(inc_.data());
    }
    io::Checkpoint ck = s_.checkpoint(clock_, epoch(), train_s_, model_.n_params());
    ck.weights = to_host(model_.params());
    ck.momentum = to_host(inc_);
    const auto st = sampler_.state();
    ck.cursors = {{st.epoch, st.batch}};
    ck.progress = res_;
    io::write_checkpoint(s_.paths().checkpoint, ck);
  }

  void progress() {
    const double rate = static_cast<double>((clock_ - win_clock_) * cfg_.batch) /
                        std::max(1e-9, train_s_ - win_train_);
    const double eta = static_cast<double>((total_ - clock_) * cfg_.batch) / rate;
    spdlog::info("epoch {:.2f}/{:g}  update {}/{}  loss {:.4f}  err {:.2f}%  {:.0f} samples/s "
                 "({:.1f} GFLOP/s)  ETA {}",
                 epoch(), std::min(cfg_.epochs, static_cast<double>(total_) / static_cast<double>(bpe_)),
                 clock_, total_, win_loss_ / static_cast<double>(win_n_),
                 100 * win_err_ / static_cast<double>(win_n_), rate,
                 rate * model_.flops_per_sample_train() / 1e9, fmt_duration(eta));
    s_.printed();
    win_loss_ = win_err_ = 0;
    win_n_ = 0;
    win_clock_ = clock_;
    win_train_ = train_s_;
  }

  RunSession& s_;
  const TrainConfig& cfg_;
  const data::DataPair& data_;
  nn::Model& model_;
  data::Sampler sampler_;
  index_t bpe_;
  std::int64_t total_ = 0, clock_ = 0;
  double train_s_ = 0;
  nn::View inc_;
  nn::View x_ = nn::View("asgd::x", cfg_.batch * data_.train.sample_size());
  nn::IView y_ = nn::IView("asgd::y", cfg_.batch);
  nn::View::HostMirror xh_ = Kokkos::create_mirror_view(x_);
  nn::IView::HostMirror yh_ = Kokkos::create_mirror_view(y_);
  std::vector<index_t> idx_;
  std::unique_ptr<gpu::Net> net_;
  io::RunResult& res_;
  double win_loss_ = 0, win_err_ = 0, win_train_ = 0;
  std::int64_t win_n_ = 0, win_clock_ = 0;
};

}  // namespace

TrainOutcome train_single(const TrainConfig& cfg, const TrainOptions& opt) {
  check(cfg);
  if (cfg.learners != 1 || cfg.servers != 1)
    throw Error(fmt::format(
        "train_single runs one learner; {} learners / {} servers need the MPI core", cfg.learners,
        cfg.servers));
  RunSession session(cfg, opt);
  if (session.finished()) return session.outcome();
  RunSetup run = session.load();
  Single single(session, run);
  single.start(collect_run_info());
  single.finish(single.train());
  return session.outcome();
}

}  // namespace asgd::ps
