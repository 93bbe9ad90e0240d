#pragma once
// One run's lifecycle, shared by every driver (single learner, MPI, virtual
// learners), so that each step is written once:
//
//   RunSession s(cfg, opt, writer);        validate, folders, the run's lock (writer)
//   if (s.finished()) return s.outcome();  a results file exists (and did not fail)
//   s.load()                               resources checked, data + model loaded
//   s.resume(path, want)                   a checkpoint, checked, or nothing
//   s.start_weights(model)                 init from the seed, or the warm-start file
//   s.evals().due(epoch), s.evaluated(...) the evaluation schedule; a row, its log line
//   s.after_update(clock, epoch, loss, done, hooks)
//                                          after each update: divergence, the end,
//                                          evaluation, checkpoint, progress (in that order)
//   s.progress_due(), s.progress(line)     rate-limited progress lines, one format
//   s.checkpoint(clock, epochs, wall_s)    the fields every checkpoint carries
//   s.header(res, ...), s.finish(res)      results header, summary, atomic write
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "common/runinfo.hpp"
#include "config/config.hpp"
#include "io/results.hpp"
#include "io/run_lock.hpp"
#include "ps/run_parts.hpp"
#include "ps/trainer.hpp"

namespace asgd::ps {

// Evaluations every `every` epochs: one is due when the epoch count crosses a
// multiple of `every` since the last one (or since the start / resume point).
class EvalSchedule {
 public:
  EvalSchedule(double every, double start_epoch) : every_(every), last_(start_epoch) {}
  bool due(double epoch) const;
  void done(double epoch) { last_ = epoch; }
  double last() const { return last_; }

 private:
  double every_, last_;
};

// What a driver does after an update. An empty hook: not on this process
// (allreduce's other ranks, a shard other than server 0).
struct UpdateHooks {
  std::function<void()> evaluate;
  std::function<void()> checkpoint;  // called on every process that has one (allreduce: collective)
  std::function<void()> progress;
};

// One progress line; what a driver does not know stays empty.
struct ProgressLine {
  double epoch = 0, epochs = 0;
  std::int64_t clock = 0, total = 0;  // total: the run's updates, 0 when not known ahead
  double loss = 0;
  std::optional<double> error, mean_tau;
  double samples_per_s = 0;
  double gflops = 0;  // 0: not printed
  std::optional<double> eta_s;
  std::string note;  // driver-specific, last
};

class RunSession {
 public:
  // writer: the process that owns the run's files (rank 0 of an MPI run, the
  // only process otherwise): it takes the lock and reads an existing results
  // file. Throws asgd::Error on a bad config or a run another process holds.
  RunSession(const TrainConfig& cfg, const TrainOptions& opt, bool writer = true);

  const TrainConfig& cfg() const { return cfg_; }
  const TrainOptions& opt() const { return opt_; }
  const RunPaths& paths() const { return out_.paths; }
  TrainOutcome& outcome() { return out_; }
  // The writer found a results file of this configuration that did not fail:
  // outcome() holds it, marked skipped.
  bool finished() const { return out_.skipped; }

  // Resources checked (before anything is allocated), BLAS threads set, the
  // data loaded and the model's engine made on `device` (empty: the run's)
  // for batches up to max_batch (0: the larger of batch and eval_batch).
  RunSetup load(index_t max_batch = 0, const std::string& device = "") const;
  // The checkpoint at path, checked against want (config hash and model
  // filled in here), or nothing when there is none.
  std::optional<io::Checkpoint> resume(const std::string& path, io::CheckpointExpect want);
  // A fresh start: weights from the seed, then the warm-start file if any.
  void start_weights(engine::Engine& model) const;

  EvalSchedule& evals() { return evals_; }
  // An evaluation done: its row appended to `evals` (training time wall_s;
  // spent, the seconds it took, is recorded as 0 for virtual learners, whose
  // evaluations take no virtual time, so that repeat runs are equal), the
  // schedule marked done, and the log line printed (unless quiet).
  void evaluated(std::vector<io::EvalRecord>& evals, double epoch, std::int64_t clock, double wall_s,
                 const Eval& e, double spent);
  bool diverged(double loss) const;
  void warn_diverged(std::int64_t clock, double loss) const;
  // The run's end at this update: diverged (warned), or completed when done;
  // nothing while it goes on.
  std::optional<RunStatus> ended(std::int64_t clock, double loss, bool done) const;
  // A periodic checkpoint is due at this clock.
  bool checkpoint_due(std::int64_t clock) const;
  // Counts an update of this process; throws Aborted at TrainOptions::abort_after (a test hook).
  void count_update();
  // After an update, in this order: ended(), then the evaluation when due,
  // the checkpoint when due, count_update() and the progress line when due.
  std::optional<RunStatus> after_update(std::int64_t clock, double epoch, double loss, bool done,
                                        const UpdateHooks& hooks);
  // A progress line is due (never when quiet); progress() prints one and
  // restarts the interval.
  bool progress_due() const;
  void progress(const ProgressLine& line);

  // A checkpoint with the fields every driver fills the same way.
  io::Checkpoint checkpoint(std::int64_t clock, double epochs, double wall_s,
                            std::int64_t n_params) const;
  // The same with the weights and momentum of a learner's engine (one learner, allreduce).
  io::Checkpoint checkpoint(std::int64_t clock, double epochs, double wall_s, engine::Engine& eng) const;
  // Root attributes (config, versions, machine) of the results.
  void header(io::RunResult& res, const RunInfo& info, const std::string& protocol,
              const std::string& mpi_version) const;
  // Ends the run: status, finish time, training time, epochs, summary, and
  // the results file written (temporary name, then rename). The writer only.
  // before_write runs after the summary, before the results file is written
  // (the final checkpoint).
  void finish(io::RunResult& res, RunStatus status, double train_s, double epochs,
              const std::function<void()>& before_write = {});

 private:
  const TrainConfig& cfg_;
  const TrainOptions& opt_;
  TrainOutcome out_;
  std::optional<io::RunLock> lock_;
  EvalSchedule evals_;
  Clock::time_point last_print_ = Clock::now();
  std::int64_t updates_here_ = 0;
};

}  // namespace asgd::ps
