#include "ps/session.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/text.hpp"

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

std::optional<RunStatus> RunSession::ended(std::int64_t clock, double loss, bool done) const {
  if (diverged(loss)) {
    warn_diverged(clock, loss);
    return RunStatus::diverged;
  }
  if (done) return RunStatus::completed;
  return std::nullopt;
}

bool RunSession::checkpoint_due(std::int64_t clock) const {
  return cfg_.checkpoint_every > 0 && clock % cfg_.checkpoint_every == 0;
}

void RunSession::count_update() {
  if (opt_.abort_after > 0 && ++updates_here_ >= opt_.abort_after)
    throw Aborted(fmt::format("aborted after {} updates (test hook)", updates_here_));
}

std::optional<RunStatus> RunSession::after_update(std::int64_t clock, double epoch, double loss, bool done,
                                                  const UpdateHooks& hooks) {
  if (const auto end = ended(clock, loss, done)) return end;
  if (hooks.evaluate && evals_.due(epoch)) hooks.evaluate();
  if (hooks.checkpoint && checkpoint_due(clock)) hooks.checkpoint();
  count_update();
  if (hooks.progress && progress_due()) hooks.progress();
  return std::nullopt;
}

bool RunSession::progress_due() const {
  return !opt_.quiet && seconds_since(last_print_) >= opt_.progress_every_s;
}

void RunSession::progress(const ProgressLine& p) {
  std::string line = fmt::format("epoch {:.2f}/{:g}  update {}", p.epoch, p.epochs, p.clock);
  if (p.total > 0) line += fmt::format("/{}", p.total);
  line += fmt::format("  loss {:.4f}", p.loss);
  if (p.error) line += fmt::format("  err {:.2f}%", 100 * *p.error);
  if (p.mean_tau) line += fmt::format("  mean tau {:.2f}", *p.mean_tau);
  line += fmt::format("  {:.0f} samples/s", p.samples_per_s);
  if (p.gflops > 0) line += fmt::format(" ({:.1f} GFLOP/s)", p.gflops);
  if (p.eta_s && std::isfinite(*p.eta_s)) line += fmt::format("  ETA {}", fmt_duration(*p.eta_s));
  if (!p.note.empty()) line += "  " + p.note;
  spdlog::info("{}", line);
  last_print_ = Clock::now();
}

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

io::Checkpoint RunSession::checkpoint(std::int64_t clock, double epochs, double wall_s,
                                      engine::Engine& eng) const {
  eng.params_to_host();
  io::Checkpoint ck = checkpoint(clock, epochs, wall_s, eng.n_params());
  ck.weights.assign(eng.params(), eng.params() + eng.n_params());
  ck.momentum.resize(static_cast<std::size_t>(eng.n_params()));
  eng.get_momentum(ck.momentum.data());
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
