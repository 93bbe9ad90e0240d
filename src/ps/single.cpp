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
#include "ps/run_parts.hpp"
#include "ps/trainer.hpp"

namespace asgd::ps {

namespace {

// The state of a single-learner run and its steps.
class Single {
 public:
  Single(RunSession& s, RunSetup& run)
      : s_(s), cfg_(s.cfg()), data_(run.data), eng_(*run.engine),
        sampler_(data_.train.n, cfg_.seed, 0, 1, cfg_.batch), bpe_(sampler_.batches_per_epoch()),
        res_(s.outcome().result) {
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
    want.n_params = eng_.n_params();
    want.learners = 1;
    want.max_clock = total_;
    want.max_epochs = static_cast<double>(total_) / static_cast<double>(bpe_) + 1e-9;
    if (const auto ck = s_.resume(s_.paths().checkpoint, want)) {
      restore(*ck);
    } else {
      s_.start_weights(eng_);
      if (cfg_.warm_steps > 0) {
        const double t = warm_up(cfg_, eng_, data_.train);
        train_s_ = t;  // warm-up steps are training: on the clock
        res_.summary.warm_up_s = t;
        if (!s_.opt().quiet)
          spdlog::info("warm start: {} single-learner steps in {:.1f}s", cfg_.warm_steps, t);
      }
    }
    s_.evals().done(epoch());
    // the learner's device, named in the results where it is not the CPU
    const std::string device = eng_.device() == "cpu" ? "" : eng_.describe();
    res_.machine_json = machine_json(info, {1, cfg_.threads, {info.host}, res_.mpi_version, device});
    if (!s_.opt().quiet) {
      spdlog::info("run {} -> {}", res_.run_id, s_.paths().results);
      spdlog::info("{}", eng_.summary());
      if (!device.empty()) spdlog::info("device {}", device);
      spdlog::info("data {}: {} train, {} test, {}x{}x{}; batch {}, {} updates ({} per epoch); BLAS {}",
                   data_.train.name, data_.train.n, data_.test.n, data_.train.h, data_.train.w,
                   data_.train.c, cfg_.batch, total_, bpe_, info.blas);
    }
  }

  // Trains to the end (or divergence); returns the status.
  RunStatus train() {
    win_clock_ = clock_;
    win_train_ = train_s_;
    res_.train_started = unix_now();
    const UpdateHooks hooks{[&] { evaluate_now(); }, [&] { checkpoint(); }, [&] { progress(); }};
    while (clock_ < total_) {
      const double loss = step();
      if (s_.after_update(clock_, epoch(), loss, clock_ == total_, hooks) == RunStatus::diverged)
        return RunStatus::diverged;
    }
    if (!s_.opt().quiet && clock_ > win_clock_) progress();
    if (res_.evals.empty() || res_.evals.back().clock != clock_) evaluate_now();
    return RunStatus::completed;
  }

  void finish(RunStatus status) {
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
    std::copy(ck.weights.begin(), ck.weights.end(), eng_.params());
    eng_.params_changed();
    eng_.set_momentum(ck.momentum.data());
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
    data::gather_batch(data_.train, idx_, eng_.batch_x(), eng_.batch_labels());
    eng_.zero_grads();
    const engine::Loss s =
        eng_.forward_backward(cfg_.batch, true, mix(cfg_.seed, static_cast<std::uint64_t>(clock_)), true);
    eng_.sgd_update(static_cast<real_t>(lr), static_cast<real_t>(cfg_.momentum),
                    static_cast<real_t>(cfg_.weight_decay));
    eng_.synchronize();  // the update may be queued (a GPU stream): count it in this step
    train_s_ += seconds_since(t0);
    ++clock_;
    const double loss = s.loss / static_cast<double>(cfg_.batch);
    const double err = static_cast<double>(s.wrong) / static_cast<double>(cfg_.batch);
    res_.updates.push_back({clock_, train_s_, 1, 0.0, lr, loss, err, cfg_.batch, 0});
    win_loss_ += loss;
    win_err_ += err;
    ++win_n_;
    return loss;
  }

  void evaluate_now() {
    const auto t0 = Clock::now();
    const Eval e = evaluate(eng_, data_.test, cfg_.eval_batch, cfg_.eval_samples);
    s_.evaluated(res_.evals, epoch(), clock_, train_s_, e, seconds_since(t0));
  }

  void checkpoint() {
    io::Checkpoint ck = s_.checkpoint(clock_, epoch(), train_s_, eng_);
    const auto st = sampler_.state();
    ck.cursors = {{st.epoch, st.batch}};
    ck.progress = res_;
    io::write_checkpoint(s_.paths().checkpoint, ck);
  }

  void progress() {
    const auto n = static_cast<double>(win_n_);
    ProgressLine p;
    p.epoch = epoch();
    p.epochs = std::min(cfg_.epochs, static_cast<double>(total_) / static_cast<double>(bpe_));
    p.clock = clock_;
    p.total = total_;
    p.loss = win_loss_ / n;
    p.error = win_err_ / n;
    p.samples_per_s = static_cast<double>((clock_ - win_clock_) * cfg_.batch) / std::max(1e-9, train_s_ - win_train_);
    p.gflops = p.samples_per_s * eng_.flops_per_sample_train() / 1e9;
    p.eta_s = static_cast<double>((total_ - clock_) * cfg_.batch) / p.samples_per_s;
    s_.progress(p);
    win_loss_ = win_err_ = 0;
    win_n_ = 0;
    win_clock_ = clock_;
    win_train_ = train_s_;
  }

  RunSession& s_;
  const TrainConfig& cfg_;
  const data::DataPair& data_;
  engine::Engine& eng_;
  data::Sampler sampler_;
  index_t bpe_;
  std::int64_t total_ = 0, clock_ = 0;
  double train_s_ = 0;
  std::vector<index_t> idx_;
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
