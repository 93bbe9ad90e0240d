#include "ps/session.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace asgd::ps {

namespace fs = std::filesystem;
bool EvalSchedule::due(double epoch) const {
  return std::floor(epoch / every_) > std::floor(last_ / every_);
}

RunSession::RunSession(const TrainConfig& cfg, const TrainOptions& opt, bool writer)
    : cfg_(cfg), opt_(opt), evals_(cfg.eval_every, 0) {
  check(cfg);
  out_.paths = prepare_paths(cfg);
  if (!writer) return;
  lock_.emplace(out_.paths.checkpoint, out_.paths.results, resolved_run_id(cfg));
  if (!fs::exists(out_.paths.results)) return;
  io::RunResult done = io::read_results(out_.paths.results);
  // the same run id with another configuration is not "already finished"
  check_same_config(cfg, done.config_json, out_.paths.results);
  // a failed run (the MPI watchdog) is resumed from its checkpoints and its
  // results file replaced at the end
  if (done.status == RunStatus::failed) return;
  out_.skipped = true;
  out_.result = std::move(done);
}

RunSetup RunSession::load(index_t max_batch, const std::string& device) const {
  return load_run(cfg_, max_batch > 0 ? max_batch : std::max(cfg_.batch, cfg_.eval_batch),
                  device.empty() ? cfg_.device : device);
}

std::optional<io::Checkpoint> RunSession::resume(const std::string& path, io::CheckpointExpect want) {
  if (!fs::exists(path)) return std::nullopt;
  io::Checkpoint ck = io::read_checkpoint(path);
  want.config_hash = config_hash(cfg_);
  want.model = cfg_.model;
  io::check_checkpoint(ck, path, want);
  out_.resumed = true;
  evals_.done(ck.progress.evals.empty() ? ck.epochs : ck.progress.evals.back().epoch);
  return ck;
}

void RunSession::start_weights(engine::Engine& model) const {
  model.init(cfg_.seed);
  if (!cfg_.warm_start.empty()) load_warm_start(cfg_, model);
}

bool RunSession::diverged(double loss) const {
  return !std::isfinite(loss) || loss > cfg_.diverge_loss;
}

void RunSession::warn_diverged(std::int64_t clock, double loss) const {
  if (!opt_.quiet)
    spdlog::warn("diverged at update {}: training loss {} (bound {})", clock, loss, cfg_.diverge_loss);
}

bool RunSession::progress_due() const {
  return !opt_.quiet && seconds_since(last_print_) >= opt_.progress_every_s;
}

void RunSession::printed() { last_print_ = Clock::now(); }

void RunSession::evaluated(std::vector<io::EvalRecord>& evals, double epoch, std::int64_t clock, double wall_s,
                           const Eval& e, double spent) {
  const bool virtual_time = cfg_.virtual_learners;
  evals.push_back({epoch, clock, wall_s, e.loss, e.error, virtual_time ? 0.0 : spent});
  evals_.done(epoch);
  if (opt_.quiet) return;
  if (virtual_time)
    spdlog::info("eval  epoch {:.2f}  update {}  test loss {:.4f}  test error {:.2f}%  (virtual time {:.1f}s)", epoch,
                 clock, e.loss, 100 * e.error, wall_s);
  else
    spdlog::info("eval  epoch {:.2f}  update {}  test loss {:.4f}  test error {:.2f}%  ({:.1f}s, off the clock)",
                 epoch, clock, e.loss, 100 * e.error, spent);
}

io::Checkpoint RunSession::checkpoint(std::int64_t clock, double epochs, double wall_s,
                                      std::int64_t n_params) const {
  io::Checkpoint ck;
  ck.run_id = resolved_run_id(cfg_);
  ck.model = cfg_.model;
  ck.config_hash = config_hash(cfg_);
  ck.n_params = n_params;
  ck.clock = clock;
  ck.schedule_step = clock;
  ck.epochs = epochs;
  ck.wall_s = wall_s;
  ck.rng_state = {cfg_.seed};
  // the run's configuration travels with it: the reader can then refuse a
  // clock past the run's end by itself
  ck.progress.config_json = nlohmann::json(cfg_).dump();
  return ck;
}

void RunSession::header(io::RunResult& res, const RunInfo& info, const std::string& protocol,
                        const std::string& mpi_version) const {
  fill_header(res, cfg_, info, protocol, mpi_version);
}

void RunSession::finish(io::RunResult& res, RunStatus status, double train_s,
                        double epochs, const std::function<void()>& before_write) {
  res.status = status;
  res.train_finished = unix_now();
  res.summary.train_time_s = train_s;
  res.summary.epochs = epochs;
  summarise(res, cfg_.target_error);
  if (before_write) before_write();
  io::write_results(out_.paths.results, res);
}

}  // namespace asgd::ps
