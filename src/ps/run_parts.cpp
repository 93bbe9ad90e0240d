#include "ps/trainer.hpp"

#include "ps/run_parts.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/blas_env.hpp"
#include "common/error.hpp"
#include "common/runinfo.hpp"
#include "data/dataset.hpp"
#include "common/hash.hpp"
#include "nn/model.hpp"
#include "nn/zoo.hpp"

namespace asgd::ps {

namespace fs = std::filesystem;

namespace {

void ensure_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("cannot create results folder {}: {}", dir.string(), ec.message()));
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error(fmt::format("results folder {} is not writable: {}", dir.string(),
                            std::strerror(errno)));
}

}  // namespace

Eval evaluate(engine::Engine& eng, const data::Dataset& test, index_t eval_batch,
              std::int64_t eval_samples) {
  const index_t total = eval_samples > 0 ? std::min<index_t>(eval_samples, test.n) : test.n;
  const index_t bs = std::min(eval_batch, eng.max_batch());
  std::vector<index_t> idx;
  double loss = 0;
  index_t wrong = 0;
  for (index_t start = 0; start < total; start += bs) {
    const index_t n = std::min(bs, total - start);
    idx.resize(n);
    for (index_t i = 0; i < n; ++i) idx[i] = start + i;
    data::gather_batch(test, idx, eng.batch_x(), eng.batch_labels());
    const engine::Loss s = eng.forward_backward(n, false, 0, false);
    loss += s.loss;
    wrong += s.wrong;
  }
  if (total == 0)  // no test samples: no error rate (never "0% error")
    return {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN()};
  return {loss / static_cast<double>(total),
          static_cast<double>(wrong) / static_cast<double>(total)};
}

std::vector<float> to_host(const nn::View& v) {
  std::vector<float> out(v.extent(0));
  Kokkos::deep_copy(Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(out.data(),
                                                                                      out.size()),
                    v);
  return out;
}

void from_host(const std::vector<float>& src, const nn::View& v) {
  Kokkos::deep_copy(v, Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                           src.data(), src.size()));
}

void fill_header(io::RunResult& res, const TrainConfig& cfg, const RunInfo& info,
                 const std::string& protocol, const std::string& mpi_version) {
  res.run_id = resolved_run_id(cfg);
  res.suite = cfg.suite;
  res.config_json = nlohmann::json(cfg).dump();
  res.git_commit = info.git_commit;
  res.host = info.host;
  res.mpi_version = mpi_version;
  res.kokkos_version = info.kokkos_version;
  res.slurm_job_id = info.slurm_job_id;
  res.slurm_array_job_id = info.slurm_array_job_id;
  res.slurm_array_task_id = info.slurm_array_task_id;
  res.mode = RunMode::real;
  res.model = cfg.model;
  res.protocol = protocol;
  res.timing_model_json = "{}";
  res.transport = "none";  // single and virtual runs: one process; the MPI core sets its own
  // one process; the MPI core replaces it with its ranks and nodes
  res.machine_json = machine_json(info, {1, cfg.threads, {info.host}, mpi_version, ""});
}

void load_warm_start(const TrainConfig& cfg, engine::Engine& model) {
  const io::Checkpoint ck = io::read_checkpoint(cfg.warm_start);
  if (ck.model != cfg.model || ck.n_params != model.n_params() || ck.shard_count != 1 ||
      static_cast<index_t>(ck.weights.size()) != model.n_params())
    throw Error(fmt::format("{}: warm start needs a 1-shard checkpoint of {} ({} parameters); it "
                            "holds {} ({} parameters, {} shards)",
                            cfg.warm_start, cfg.model, model.n_params(), ck.model, ck.n_params,
                            ck.shard_count));
  io::CheckpointExpect want;
  want.model = cfg.model;
  want.n_params = model.n_params();
  want.finite_weights = true;
  want.what = "warm start checkpoint";
  io::check_checkpoint(ck, cfg.warm_start, want);
  std::copy(ck.weights.begin(), ck.weights.end(), model.params());
  model.params_changed();
}

double warm_up(const TrainConfig& cfg, engine::Engine& eng, const data::Dataset& train) {
  const auto t0 = Clock::now();
  // a sample stream of its own: seed mixed so it differs from every learner's
  data::Sampler sampler(train.n, mix(cfg.seed, 0x3a3a), 0, 1, cfg.batch);
  const std::vector<real_t> zero(static_cast<std::size_t>(eng.n_params()), 0);
  eng.set_momentum(zero.data());  // its own momentum, from zero, and left zero
  std::vector<index_t> idx;
  for (std::int64_t step = 0; step < cfg.warm_steps; ++step) {
    sampler.next(idx);
    data::gather_batch(train, idx, eng.batch_x(), eng.batch_labels());
    eng.zero_grads();
    eng.forward_backward(cfg.batch, true, mix(cfg.seed + 17, static_cast<std::uint64_t>(step)), true);
    eng.sgd_update(static_cast<real_t>(cfg.lr), static_cast<real_t>(cfg.momentum),
                   static_cast<real_t>(cfg.weight_decay));
  }
  eng.synchronize();
  eng.set_momentum(zero.data());
  return seconds_since(t0);
}

RunSetup load_run(const TrainConfig& cfg, index_t max_batch, const std::string& device) {
  check_resources(cfg);  // before anything is loaded or allocated
  set_blas_threads(cfg.threads);
  auto data = data::load_dataset(cfg.data);
  std::optional<nn::ModelSpec> spec;
  try {
    spec = nn::model_spec(cfg.model, {data.train.h, data.train.w, data.train.c}, data.train.classes);
  } catch (const Error& e) {
    throw Error(fmt::format("model {} cannot take the {}x{}x{} images of {}: {}", cfg.model,
                            data.train.h, data.train.w, data.train.c, data.train.name, e.what()));
  }
  auto eng = engine::make_engine(device, *spec, max_batch, 0);
  return {std::move(data), std::move(eng)};
}

double scheduled_lr(const TrainConfig& cfg, double epoch) {
  double lr = cfg.lr;
  for (double s : cfg.lr_steps)
    if (epoch >= s) lr *= cfg.lr_gamma;
  return lr;
}

bool run_done(const TrainConfig& cfg, std::int64_t samples, std::int64_t updates, index_t n_train) {
  return samples >= static_cast<std::int64_t>(cfg.epochs * static_cast<double>(n_train)) ||
         (cfg.max_steps > 0 && updates >= cfg.max_steps);
}

void summarise(io::RunResult& r, double target_error) {
  auto& s = r.summary;
  s.target_error = target_error;
  s.time_to_target_s = std::numeric_limits<double>::quiet_NaN();
  s.best_test_error = std::numeric_limits<double>::quiet_NaN();
  s.final_test_error = std::numeric_limits<double>::quiet_NaN();
  for (const auto& e : r.evals) {
    if (std::isnan(s.best_test_error) || e.test_error < s.best_test_error)
      s.best_test_error = e.test_error;
    if (std::isnan(s.time_to_target_s) && e.test_error <= target_error)
      s.time_to_target_s = e.wall_s;
  }
  if (!r.evals.empty()) s.final_test_error = r.evals.back().test_error;
  s.updates = r.updates.empty() ? 0 : r.updates.back().clock;
  std::int64_t samples = 0;
  for (const auto& u : r.updates) samples += u.samples;
  s.samples_per_s = s.train_time_s > 0 ? static_cast<double>(samples) / s.train_time_s : 0;
}

RunPaths prepare_paths(const TrainConfig& cfg) {
  const fs::path base = fs::path(cfg.results_dir) / cfg.suite;
  ensure_dir(base / "runs");
  ensure_dir(base / "checkpoints");
  const std::string id = resolved_run_id(cfg);
  return {(base / "runs" / (id + ".h5")).string(), (base / "checkpoints" / (id + ".h5")).string()};
}

}  // namespace asgd::ps
