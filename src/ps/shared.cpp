#include "ps/trainer.hpp"

#include "ps/shared.hpp"

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
#include "nn/model.hpp"

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

namespace detail {

std::string fmt_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const auto t = static_cast<long>(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, t / 60 % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t z = a * 0xD1B54A32D192ED03ull + b + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::unique_ptr<gpu::Net> make_gpu_net(const TrainConfig& cfg, const nn::Model& model,
                                       int node_learner) {
  if (cfg.device != "cuda") return nullptr;
  auto net = std::make_unique<gpu::Net>(model.spec(), model.max_batch(),
                                        gpu::pick_device(node_learner));
  Kokkos::fence();
  net->set_params(model.params().data());
  return net;
}

Eval evaluate(nn::Model& model, const data::Dataset& test, index_t eval_batch,
              std::int64_t eval_samples, gpu::Net* net) {
  const index_t total = eval_samples > 0 ? std::min<index_t>(eval_samples, test.n) : test.n;
  const index_t bs = std::min(eval_batch, model.max_batch());
  nn::View x("asgd::eval::x", bs * test.sample_size());
  nn::IView y("asgd::eval::y", bs);
  auto xh = Kokkos::create_mirror_view(x);
  auto yh = Kokkos::create_mirror_view(y);
  std::vector<index_t> idx;
  double loss = 0;
  index_t wrong = 0;
  for (index_t start = 0; start < total; start += bs) {
    const index_t n = std::min(bs, total - start);
    idx.resize(n);
    for (index_t i = 0; i < n; ++i) idx[i] = start + i;
    data::gather_batch(test, idx, xh.data(), yh.data());
    if (net) {
      const gpu::Loss s = net->forward_backward(n, xh.data(), yh.data(), false, 0, false);
      loss += s.loss;
      wrong += s.wrong;
      continue;
    }
    Kokkos::deep_copy(x, xh);
    Kokkos::deep_copy(y, yh);
    const auto s = model.forward_backward(n, x, y, nn::Context{false, 0}, false);
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
  res.mode = "real";
  res.model = cfg.model;
  res.protocol = protocol;
  res.timing_model_json = "{}";
  res.transport = "none";  // single and virtual runs: one process; the MPI core sets its own
  // one process; the MPI core replaces it with its ranks and nodes
  res.machine_json = machine_json(info, {1, cfg.threads, {info.host}, mpi_version, ""});
}

void load_warm_start(const TrainConfig& cfg, nn::Model& model) {
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
  from_host(ck.weights, model.params());
}

double warm_up(const TrainConfig& cfg, nn::Model& model, const data::Dataset& train) {
  const auto t0 = Clock::now();
  // a sample stream of its own: seed mixed so it differs from every learner's
  data::Sampler sampler(train.n, mix(cfg.seed, 0x3a3a), 0, 1, cfg.batch);
  nn::View inc("asgd::warm::inc", model.n_params());
  nn::View x("asgd::warm::x", cfg.batch * train.sample_size());
  nn::IView y("asgd::warm::y", cfg.batch);
  auto xh = Kokkos::create_mirror_view(x);
  auto yh = Kokkos::create_mirror_view(y);
  std::vector<index_t> idx;
  for (std::int64_t step = 0; step < cfg.warm_steps; ++step) {
    sampler.next(idx);
    data::gather_batch(train, idx, xh.data(), yh.data());
    Kokkos::deep_copy(x, xh);
    Kokkos::deep_copy(y, yh);
    model.zero_grads();
    model.forward_backward(cfg.batch, x, y, nn::Context{true, mix(cfg.seed + 17, step)}, true);
    kernels::sgd_update<nn::Space>(model.n_params(), static_cast<real_t>(cfg.lr),
                                   static_cast<real_t>(cfg.momentum),
                                   static_cast<real_t>(cfg.weight_decay), model.grads(), inc,
                                   model.params());
  }
  Kokkos::fence();
  return seconds_since(t0);
}

io::RunLock lock_run(const TrainConfig& cfg) {
  check(cfg);
  const RunPaths p = prepare_paths(cfg);
  return io::RunLock(p.checkpoint, p.results, resolved_run_id(cfg));
}

bool finished_already(const TrainConfig& cfg, TrainOutcome& out) {
  check(cfg);
  out.paths = prepare_paths(cfg);
  if (!fs::exists(out.paths.results)) return false;
  out.skipped = true;
  out.result = io::read_results(out.paths.results);
  // the same run id with another configuration is not "already finished"
  check_same_config(cfg, out.result.config_json, out.paths.results);
  return true;
}

RunSetup load_run(const TrainConfig& cfg) {
  check_resources(cfg);  // before anything is loaded or allocated
  set_blas_threads(cfg.threads);
  auto data = data::load_dataset(cfg.data);
  std::optional<nn::Model> built;
  try {
    built.emplace(nn::make_model(cfg.model, {data.train.h, data.train.w, data.train.c},
                                 data.train.classes));
  } catch (const Error& e) {
    throw Error(fmt::format("model {} cannot take the {}x{}x{} images of {}: {}", cfg.model,
                            data.train.h, data.train.w, data.train.c, data.train.name, e.what()));
  }
  nn::Model model = std::move(*built);
  model.finalize(std::max(cfg.batch, cfg.eval_batch));
  return {std::move(data), std::move(model)};
}

}  // namespace detail

using namespace detail;

double scheduled_lr(const TrainConfig& cfg, double epoch) {
  double lr = cfg.lr;
  for (double s : cfg.lr_steps)
    if (epoch >= s) lr *= cfg.lr_gamma;
  return lr;
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

TrainOutcome train_single(const TrainConfig& cfg, const TrainOptions& opt) {
  check(cfg);
  if (cfg.learners != 1 || cfg.servers != 1)
    throw Error(fmt::format(
        "train_single runs one learner; {} learners / {} servers need the MPI core", cfg.learners,
        cfg.servers));
  TrainOutcome out;
  const io::RunLock lock = lock_run(cfg);
  if (finished_already(cfg, out)) return out;
  RunSetup run = load_run(cfg);
  const auto& data = run.data;
  nn::Model& model = run.model;
  data::Sampler sampler(data.train.n, cfg.seed, 0, 1, cfg.batch);
  const index_t bpe = sampler.batches_per_epoch();
  const double steps = std::ceil(cfg.epochs * static_cast<double>(bpe));
  if (!(steps >= 1 && steps < 0x1p62))
    throw Error(fmt::format("--epochs {} at {} updates per epoch makes {} updates: not a run",
                            cfg.epochs, bpe, steps));
  std::int64_t total_steps = static_cast<std::int64_t>(steps);
  if (cfg.max_steps > 0) total_steps = std::min(total_steps, cfg.max_steps);

  const RunInfo info = collect_run_info();
  io::RunResult& res = out.result;
  fill_header(res, cfg, info, "single", "none (single process)");

  nn::View inc("asgd::momentum", model.n_params());
  std::int64_t clock = 0;
  double train_s = 0;
  if (fs::exists(out.paths.checkpoint)) {
    const io::Checkpoint ck = io::read_checkpoint(out.paths.checkpoint);
    io::CheckpointExpect want;
    want.config_hash = config_hash(cfg);
    want.model = cfg.model;
    want.n_params = model.n_params();
    want.learners = 1;
    want.max_clock = total_steps;
    want.max_epochs = static_cast<double>(total_steps) / static_cast<double>(bpe) + 1e-9;
    io::check_checkpoint(ck, out.paths.checkpoint, want);
    try {
      sampler.restore({ck.cursors[0].epoch, ck.cursors[0].batch});
    } catch (const Error& e) {
      throw Error(fmt::format("{}: checkpoint's data cursor does not fit this run: {}",
                              out.paths.checkpoint, e.what()));
    }
    from_host(ck.weights, model.params());
    from_host(ck.momentum, inc);
    clock = ck.clock;
    train_s = ck.wall_s;
    res.updates = ck.progress.updates;
    res.evals = ck.progress.evals;
    out.resumed = true;
    if (!opt.quiet)
      spdlog::info("resuming {} from checkpoint at update {} ({:.2f} epochs)", res.run_id, clock,
                   static_cast<double>(clock) / static_cast<double>(bpe));
  } else {
    model.init(cfg.seed);
    if (!cfg.warm_start.empty()) load_warm_start(cfg, model);
    if (cfg.warm_steps > 0) {
      const double t = warm_up(cfg, model, data.train);
      train_s = t;  // warm-up steps are training: on the clock
      res.summary.warm_up_s = t;
      if (!opt.quiet) spdlog::info("warm start: {} single-learner steps in {:.1f}s", cfg.warm_steps, t);
    }
  }

  nn::View x("asgd::x", cfg.batch * data.train.sample_size());
  nn::IView y("asgd::y", cfg.batch);
  auto xh = Kokkos::create_mirror_view(x);
  auto yh = Kokkos::create_mirror_view(y);
  std::vector<index_t> idx;
  // --device cuda: weights and momentum live on the GPU from here on; the
  // model's buffers are refreshed from it for checkpoints.
  const std::unique_ptr<gpu::Net> net = make_gpu_net(cfg, model, 0);
  if (net) {
    net->set_momentum(inc.data());
    res.machine_json = machine_json(info, {1, cfg.threads, {info.host}, res.mpi_version,
                                           net->device().describe()});
  }

  auto checkpoint = [&](std::int64_t at) {
    if (net) {
      net->get_params(model.params().data());
      net->get_momentum(inc.data());
    }
    io::Checkpoint ck;
    ck.run_id = res.run_id;
    ck.model = cfg.model;
    ck.config_hash = config_hash(cfg);
    ck.n_params = model.n_params();
    ck.clock = at;
    ck.schedule_step = at;
    ck.epochs = static_cast<double>(at) / static_cast<double>(bpe);
    ck.wall_s = train_s;
    ck.weights = to_host(model.params());
    ck.momentum = to_host(inc);
    const auto st = sampler.state();
    ck.cursors = {{st.epoch, st.batch}};
    ck.rng_state = {cfg.seed};
    ck.progress = res;
    io::write_checkpoint(out.paths.checkpoint, ck);
  };
  auto run_eval = [&](std::int64_t at) {
    const auto t0 = Clock::now();
    const Eval e = evaluate(model, data.test, cfg.eval_batch, cfg.eval_samples, net.get());
    res.evals.push_back({static_cast<double>(at) / static_cast<double>(bpe), at, train_s, e.loss,
                         e.error, seconds_since(t0)});
    if (!opt.quiet)
      spdlog::info("eval  epoch {:.2f}  test loss {:.4f}  test error {:.2f}%  ({:.1f}s, off the clock)",
                   res.evals.back().epoch, e.loss, 100 * e.error, res.evals.back().eval_s);
  };

  if (!opt.quiet) {
    spdlog::info("run {} -> {}", res.run_id, out.paths.results);
    spdlog::info("{}", model.summary());
    if (net) spdlog::info("device {}", net->device().describe());
    spdlog::info("data {}: {} train, {} test, {}x{}x{}; batch {}, {} updates ({} per epoch); BLAS {}",
                 data.train.name, data.train.n, data.test.n, data.train.h, data.train.w,
                 data.train.c, cfg.batch, total_steps, bpe, info.blas);
  }

  std::string status = "completed";
  auto last_print = Clock::now();
  double win_loss = 0, win_err = 0;
  std::int64_t win_n = 0, win_start_clock = clock;
  double win_start_train = train_s;
  const double flops = model.flops_per_sample_train();
  std::int64_t steps_here = 0;
  res.train_started = unix_now();
  while (clock < total_steps) {
    const auto t0 = Clock::now();
    const double epoch_before = static_cast<double>(clock) / static_cast<double>(bpe);
    const double lr = scheduled_lr(cfg, epoch_before);
    sampler.next(idx);
    data::gather_batch(data.train, idx, xh.data(), yh.data());
    kernels::LossSum s;
    if (net) {
      net->zero_grads();
      const gpu::Loss g = net->forward_backward(cfg.batch, xh.data(), yh.data(), true,
                                                mix(cfg.seed, clock), true);
      net->sgd_update(static_cast<real_t>(lr), static_cast<real_t>(cfg.momentum),
                      static_cast<real_t>(cfg.weight_decay));
      s = {g.loss, g.wrong};
    } else {
      Kokkos::deep_copy(x, xh);
      Kokkos::deep_copy(y, yh);
      model.zero_grads();
      s = model.forward_backward(cfg.batch, x, y, nn::Context{true, mix(cfg.seed, clock)}, true);
      kernels::sgd_update<nn::Space>(model.n_params(), static_cast<real_t>(lr),
                                     static_cast<real_t>(cfg.momentum),
                                     static_cast<real_t>(cfg.weight_decay), model.grads(), inc,
                                     model.params());
    }
    if (net)
      net->synchronize();  // the update is queued on the GPU's stream: count it in this step
    else
      Kokkos::fence();
    train_s += seconds_since(t0);
    ++clock;
    const double loss = s.loss / static_cast<double>(cfg.batch);
    const double err = static_cast<double>(s.wrong) / static_cast<double>(cfg.batch);
    res.updates.push_back({clock, train_s, 1, 0.0, lr, loss, err, cfg.batch});
    win_loss += loss;
    win_err += err;
    ++win_n;
    if (!std::isfinite(loss) || loss > cfg.diverge_loss) {
      status = "diverged";
      if (!opt.quiet)
        spdlog::warn("diverged at update {}: training loss {} (bound {})", clock, loss,
                     cfg.diverge_loss);
      break;
    }
    const double epoch_after = static_cast<double>(clock) / static_cast<double>(bpe);
    if (std::floor(epoch_after / cfg.eval_every) > std::floor(epoch_before / cfg.eval_every) &&
        clock < total_steps)
      run_eval(clock);
    if (cfg.checkpoint_every > 0 && clock % cfg.checkpoint_every == 0 && clock < total_steps)
      checkpoint(clock);
    if (opt.abort_after > 0 && ++steps_here >= opt.abort_after)
      throw Aborted(fmt::format("aborted after {} updates (test hook)", steps_here));
    if (!opt.quiet && (seconds_since(last_print) >= opt.progress_every_s || clock == total_steps)) {
      const double rate = static_cast<double>((clock - win_start_clock) * cfg.batch) /
                          std::max(1e-9, train_s - win_start_train);
      const double eta = static_cast<double>((total_steps - clock) * cfg.batch) / rate;
      spdlog::info("epoch {:.2f}/{:g}  update {}/{}  loss {:.4f}  err {:.2f}%  {:.0f} samples/s "
                   "({:.1f} GFLOP/s)  ETA {}",
                   epoch_after, std::min(cfg.epochs, static_cast<double>(total_steps) /
                                                         static_cast<double>(bpe)),
                   clock, total_steps, win_loss / static_cast<double>(win_n),
                   100 * win_err / static_cast<double>(win_n), rate, rate * flops / 1e9,
                   fmt_duration(eta));
      last_print = Clock::now();
      win_loss = win_err = 0;
      win_n = 0;
      win_start_clock = clock;
      win_start_train = train_s;
    }
  }
  if (status == "completed" && (res.evals.empty() || res.evals.back().clock != clock))
    run_eval(clock);

  res.status = status;
  res.train_finished = unix_now();
  std::int64_t samples = 0;
  for (const auto& u : res.updates) samples += u.samples;
  res.learners = {{0, train_s, 0, 0, 0, clock, samples}};
  res.staleness_histogram = {clock};  // one learner: every gradient is fresh (tau = 0)
  res.summary.train_time_s = train_s;
  res.summary.epochs = static_cast<double>(clock) / static_cast<double>(bpe);
  summarise(res, cfg.target_error);
  checkpoint(clock);
  io::write_results(out.paths.results, res);
  return out;
}

}  // namespace asgd::ps
