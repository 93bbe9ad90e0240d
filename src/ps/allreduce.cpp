// Synchronous SGD without servers (protocol allreduce): every rank is a
// learner; each computes a gradient on its own minibatch, the ranks sum the
// gradients (and their loss and error counts) with a non-blocking
// MPI_Iallreduce, and each applies the same update, the server rule of
// hardsync (UpdateRule::scales of L gradients of staleness 0: their mean, the
// rate for the epoch before the update), so every rank holds the same weights. Rank 0 evaluates, checkpoints
// and writes the results; every rank resumes from its checkpoint.
#include "ps/allreduce.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <functional>
#include <optional>

#include "common/runinfo.hpp"
#include "common/text.hpp"
#include "ps/local_steps.hpp"
#include "ps/mpi_util.hpp"
#include "ps/protocol.hpp"
#include "ps/run_parts.hpp"
#include "ps/session.hpp"
#include "ps/shard_core.hpp"

namespace asgd::ps {

namespace {

class AllreduceRun {
 public:
  AllreduceRun(RunSession& s, RunSetup& run, const Comm& comm)
      : s_(s), cfg_(s.cfg()), comm_(comm), data_(run.data), eng_(*run.engine), L_(cfg_.learners),
        l_(comm.rank()), rule_(cfg_), local_(cfg_, rule_, data_.train),
        sampler_(data_.train.n, cfg_.seed, l_, L_, cfg_.batch), res_(s.outcome().result) {}

  // Every rank: the checkpoint of rank 0 if there is one, else the seed's
  // weights (and a warm start). Returns whether it resumed.
  bool start() {
    io::CheckpointExpect want;
    want.n_params = eng_.n_params();
    want.learners = L_;
    if (const auto ck = s_.resume(s_.paths().checkpoint, want)) {
      std::copy(ck->weights.begin(), ck->weights.end(), eng_.params());
      eng_.params_changed();
      eng_.set_momentum(ck->momentum.data());
      sampler_.restore({ck->cursors[static_cast<std::size_t>(l_)].epoch,
                        ck->cursors[static_cast<std::size_t>(l_)].batch});
      clock_ = ck->clock;
      samples_ = static_cast<std::int64_t>(ck->epochs * static_cast<double>(data_.train.n) + 0.5);
      train_s_ = ck->wall_s;
      res_.updates = ck->progress.updates;
      res_.evals = ck->progress.evals;
      counts_ = ck->progress.learners;
      return true;
    }
    s_.start_weights(eng_);
    if (cfg_.warm_steps > 0) {  // rank 0's steps, everyone's weights
      double t = l_ == 0 ? warm_up(cfg_, eng_, data_.train) : 0.0;
      eng_.params_to_host();
      mpi_check(MPI_Bcast(eng_.params(), static_cast<int>(eng_.n_params()), MPI_FLOAT, 0, comm_.get()),
                "Bcast");
      mpi_check(MPI_Bcast(&t, 1, MPI_DOUBLE, 0, comm_.get()), "Bcast");
      eng_.params_changed();
      train_s_ = res_.summary.warm_up_s = t;
    }
    return false;
  }

  RunStatus train() {
    res_.train_started = unix_now();
    s_.evals().done(epoch());
    UpdateHooks hooks{[&] { evaluate_now(); }, [&] { checkpoint(); }, [&] { progress(); }};  // checkpoint: collective
    if (l_ != 0) hooks.evaluate = hooks.progress = nullptr;
    while (!done()) {
      const double loss = step();
      if (const auto end = s_.after_update(clock_, epoch(), loss, done(), hooks)) return *end;
    }
    return RunStatus::completed;
  }

  // Rank 0 returns the result (without header); the final checkpoint is collective.
  void finish(RunStatus status, const std::function<void(io::RunResult&)>& write) {
    if (l_ == 0 && status == RunStatus::completed && (res_.evals.empty() || res_.evals.back().clock != clock_))
      evaluate_now();
    const auto rows = learner_rows();
    checkpoint();
    if (l_ != 0) return;
    res_.learners = rows;
    res_.staleness_histogram = {clock_ * L_};  // every gradient is fresh (tau = 0)
    res_.status = status;
    res_.summary.train_time_s = train_s_;
    res_.summary.epochs = epoch();
    write(res_);
  }

 private:
  double epoch() const { return static_cast<double>(samples_) / static_cast<double>(data_.train.n); }
  bool done() const { return run_done(cfg_, samples_, clock_, data_.train.n); }

  // One gradient per rank, summed everywhere, one update everywhere.
  // Returns the update's mean training loss (the same on every rank).
  double step() {
    const auto t0 = Clock::now();
    const double lr = scheduled_lr(cfg_, epoch());  // the epoch before the update, as a server's
    const LocalResult r = local_.run(eng_, sampler_, l_, step_);
    eng_.grads_ready();
    const double computed = seconds_since(t0);
    compute_s_ += computed;
    const auto t1 = Clock::now();
    std::array<double, 2> sums{r.loss_sum, static_cast<double>(r.wrong)};
    MPI_Request req[2];
    mpi_check(MPI_Iallreduce(MPI_IN_PLACE, eng_.grads(), static_cast<int>(eng_.n_params()), MPI_FLOAT,
                             MPI_SUM, comm_.get(), &req[0]),
              "Iallreduce");
    mpi_check(MPI_Iallreduce(MPI_IN_PLACE, sums.data(), 2, MPI_DOUBLE, MPI_SUM, comm_.get(), &req[1]),
              "Iallreduce");
    polite_wait_all(2, req, Wait::transfer, "the gradients of every learner (allreduce)");
    reduce_s_ += seconds_since(t1);
    // the hardsync server's update through the same rule: L gradients of
    // staleness 0, their scale (the mean) and the step's rate factor
    const UpdateRule::Scales sc = rule_.scales(zero_taus_);
    eng_.sgd_update(static_cast<real_t>(lr), static_cast<real_t>(cfg_.momentum),
                    static_cast<real_t>(cfg_.weight_decay * sc.rate), static_cast<real_t>(sc.gradient));
    eng_.synchronize();
    const std::int64_t samples = r.samples * L_;
    samples_ += samples;
    ++clock_;
    train_s_ += seconds_since(t0);
    // hardsync's row: L fresh gradients, every learner at the same clock (spread 0)
    res_.updates.push_back(update_row(clock_, train_s_, zero_taus_, lr * sc.rate, sums[0], sums[1], samples, 0));
    return res_.updates.back().train_loss;
  }

  void evaluate_now() {
    const auto t0 = Clock::now();
    const Eval e = evaluate(eng_, data_.test, cfg_.eval_batch, cfg_.eval_samples);
    s_.evaluated(res_.evals, epoch(), clock_, train_s_, e, seconds_since(t0));
  }

  void progress() {
    const auto& u = res_.updates;
    ProgressLine p;
    p.epoch = epoch();
    p.epochs = cfg_.epochs;
    p.clock = clock_;
    p.loss = u.empty() ? 0.0 : u.back().train_loss;
    p.samples_per_s = static_cast<double>(samples_) / std::max(1e-9, train_s_);
    p.eta_s = (cfg_.epochs - epoch()) * static_cast<double>(data_.train.n) / p.samples_per_s;
    p.note = fmt::format("(allreduce {:.0f}% of the time)", 100 * reduce_s_ / std::max(1e-9, compute_s_ + reduce_s_));
    s_.progress(p);
  }

  // Every rank's data cursor, at rank 0 (collective).
  std::vector<io::LearnerCursor> cursors() const {
    const auto st = sampler_.state();
    const std::array<std::int64_t, 2> mine{st.epoch, st.batch};
    std::vector<std::int64_t> all(static_cast<std::size_t>(2 * L_));
    mpi_check(MPI_Gather(mine.data(), 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, 0, comm_.get()),
              "Gather");
    std::vector<io::LearnerCursor> out;
    for (int l = 0; l < L_; ++l) out.push_back({all[2 * static_cast<std::size_t>(l)], all[2 * static_cast<std::size_t>(l) + 1]});
    return out;
  }

  // Per-learner counts and times at rank 0 (collective): compute, allreduce
  // (as push), gradients and samples, earlier ones of a resumed run included.
  std::vector<io::LearnerTiming> learner_rows() const {
    const std::array<double, 2> mine{compute_s_, reduce_s_};
    std::vector<double> all(static_cast<std::size_t>(2 * L_));
    mpi_check(MPI_Gather(mine.data(), 2, MPI_DOUBLE, all.data(), 2, MPI_DOUBLE, 0, comm_.get()), "Gather");
    std::vector<io::LearnerTiming> rows(static_cast<std::size_t>(L_));
    for (int l = 0; l < L_; ++l) {
      auto& row = rows[static_cast<std::size_t>(l)];
      const auto* before = l < static_cast<int>(counts_.size()) ? &counts_[static_cast<std::size_t>(l)] : nullptr;
      row.learner = l;
      row.compute_s = all[2 * static_cast<std::size_t>(l)] + (before ? before->compute_s : 0);
      row.push_s = all[2 * static_cast<std::size_t>(l) + 1] + (before ? before->push_s : 0);
      row.gradients = clock_;
      row.pushed = clock_;
      row.samples = clock_ * cfg_.batch;
    }
    return rows;
  }

  void checkpoint() {
    const auto where = cursors();
    const auto rows = learner_rows();
    if (l_ != 0) return;
    io::Checkpoint ck = s_.checkpoint(clock_, epoch(), train_s_, eng_);
    ck.cursors = where;
    ck.progress.updates = res_.updates;
    ck.progress.evals = res_.evals;
    ck.progress.learners = rows;
    ck.progress.staleness_histogram = {clock_ * L_};
    io::write_checkpoint(s_.paths().checkpoint, ck);
  }

  RunSession& s_;
  const TrainConfig& cfg_;
  const Comm& comm_;
  const data::DataPair& data_;
  engine::Engine& eng_;
  int L_, l_;
  UpdateRule rule_;
  std::vector<std::int64_t> zero_taus_ = std::vector<std::int64_t>(static_cast<std::size_t>(L_), 0);
  LocalSteps local_;
  data::Sampler sampler_;
  io::RunResult& res_;
  std::vector<io::LearnerTiming> counts_;  // a resumed run's rows so far
  std::int64_t clock_ = 0, samples_ = 0, step_ = 0;
  double train_s_ = 0, compute_s_ = 0, reduce_s_ = 0;
};

}  // namespace

TrainOutcome train_allreduce(const TrainConfig& cfg, const Comm& comm, const TrainOptions& opt) {
  const bool writer = comm.rank() == 0;
  std::optional<RunSession> session;
  std::optional<RunSetup> run;
  std::string error;
  int skip = 0;
  try {
    if (cfg.device != "cpu")
      throw Error("--device cuda: allreduce runs on the CPU in this build (its gradients are summed "
                  "in host memory)");
    session.emplace(cfg, opt, writer);
    skip = session->finished() ? 1 : 0;
    run.emplace(session->load(writer ? 0 : cfg.batch));
  } catch (const std::exception& e) {
    error = e.what();
  }
  stop_if_any_failed(comm, error, "set-up failed on another rank");
  mpi_check(MPI_Bcast(&skip, 1, MPI_INT, 0, comm.get()), "Bcast");
  TrainOutcome& out = session->outcome();
  out.skipped = skip != 0;
  if (skip) return out;
  AllreduceRun ar(*session, *run, comm);
  out.resumed = ar.start();
  const RunInfo info = collect_run_info();
  const std::vector<std::string> nodes = rank_hosts(comm);  // collective
  if (writer && !opt.quiet) {
    spdlog::info("run {} -> {}", resolved_run_id(cfg), out.paths.results);
    spdlog::info("{} learners, allreduce (no servers), batch {} per learner; data {} ({} train)",
                 cfg.learners, cfg.batch, run->data.train.name, run->data.train.n);
    if (out.resumed) spdlog::info("resuming {} from its checkpoint", resolved_run_id(cfg));
  }
  ar.finish(ar.train(), [&](io::RunResult& res) {
    const std::string mpi = mpi_library_version();
    session->header(res, info, cfg.protocol, mpi);
    res.machine_json = machine_json(info, {cfg.learners, cfg.threads, nodes, mpi, ""});
    res.transport = "allreduce";
    session->finish(res, res.status, res.summary.train_time_s, res.summary.epochs);
  });
  return out;
}

}  // namespace asgd::ps
