#include "sim/virtual.hpp"

#include <KokkosBlas1_axpby.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numbers>
#include <queue>
#include <random>

#include "common/blas_env.hpp"
#include "common/error.hpp"
#include "ps/shard_core.hpp"
#include "ps/shared.hpp"

namespace asgd::sim {

namespace fs = std::filesystem;
using namespace ps::detail;

namespace {

// Per-learner minibatch compute times and the push/pull time, drawn from the
// timing model. Deterministic: mt19937_64 per learner and Box-Muller.
class Timing {
 public:
  Timing(const TrainConfig& cfg, double compute_s, double comm_s)
      : cfg_(cfg), compute_s_(compute_s), comm_s_(comm_s) {
    for (int l = 0; l < cfg.learners; ++l)
      rng_.emplace_back(ps::detail::mix(cfg.seed ^ 0x7153, static_cast<std::uint64_t>(l)));
  }
  double compute(int l) {
    double t = compute_s_;
    const double cv = cfg_.compute_cv;
    if (cfg_.timing == "normal" || cfg_.timing == "calibrate") {
      t = std::max(0.05 * compute_s_, compute_s_ * (1 + cv * normal(l)));
    } else if (cfg_.timing == "lognormal") {
      const double s2 = std::log(1 + cv * cv);
      t = compute_s_ * std::exp(std::sqrt(s2) * normal(l) - s2 / 2);
    }
    return l == cfg_.straggler ? t * cfg_.straggler_factor : t;
  }
  double comm() const { return comm_s_; }
  nlohmann::json describe(bool calibrated) const {
    return {{"kind", cfg_.timing == "calibrate" ? "normal" : cfg_.timing},
            {"compute_s", compute_s_},
            {"compute_cv", cfg_.compute_cv},
            {"comm_s", comm_s_},
            {"straggler", cfg_.straggler},
            {"straggler_factor", cfg_.straggler_factor},
            {"calibrated", calibrated},
            {"note", "virtual clock: gradients are computed for real on each learner's stale "
                     "weights; times are drawn from this model"}};
  }

 private:
  double normal(int l) {
    auto& g = rng_[static_cast<std::size_t>(l)];
    const double u1 = 1.0 - static_cast<double>(g() >> 11) * 0x1.0p-53;
    const double u2 = static_cast<double>(g() >> 11) * 0x1.0p-53;
    return std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
  }
  const TrainConfig& cfg_;
  double compute_s_, comm_s_;
  std::vector<std::mt19937_64> rng_;
};

struct Learner {
  nn::View weights;           // the (stale) copy this learner computes on
  nn::View fetched, inc;      // nsync: weights as fetched, local momentum
  std::int64_t timestamp = 0;
  std::unique_ptr<data::Sampler> sampler;
  io::LearnerTiming timing;
  double push_at = 0;         // virtual time its pending gradient reached the server
  std::int64_t steps = 0;
};

struct Event {
  double time;
  std::uint64_t seq;  // ties broken by scheduling order: deterministic
  int learner;
  bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
};

}  // namespace

ps::TrainOutcome train_virtual(const TrainConfig& cfg, const ps::TrainOptions& opt) {
  ps::TrainOutcome out;
  const io::RunLock lock = lock_run(cfg);
  if (finished_already(cfg, out)) return out;
  RunSetup run = load_run(cfg);
  const auto& data = run.data;
  nn::Model& model = run.model;
  model.init(cfg.seed);
  if (!cfg.warm_start.empty()) load_warm_start(cfg, model);
  if (cfg.warm_steps > 0) warm_up(cfg, model, data.train);
  const int L = cfg.learners;
  const index_t P = model.n_params();

  nn::View x("asgd::x", cfg.batch * data.train.sample_size());
  nn::IView y("asgd::y", cfg.batch);
  auto xh = Kokkos::create_mirror_view(x);
  auto yh = Kokkos::create_mirror_view(y);
  std::vector<index_t> idx;
  // One real gradient of learner l on its own weights, into model.grads().
  auto gradient = [&](Learner& ln, int l, kernels::LossSum& sum) {
    Kokkos::deep_copy(model.params(), ln.weights);
    ln.sampler->next(idx);
    data::gather_batch(data.train, idx, xh.data(), yh.data());
    Kokkos::deep_copy(x, xh);
    Kokkos::deep_copy(y, yh);
    model.zero_grads();
    const auto s = model.forward_backward(
        cfg.batch, x, y,
        nn::Context{true, mix(mix(cfg.seed, static_cast<std::uint64_t>(l)), static_cast<std::uint64_t>(ln.steps++))},
        true);
    sum.loss += s.loss;
    sum.wrong += s.wrong;
  };

  // Calibration: the measured compute time of this model (mean of 3 after a
  // warm-up) and a memory copy of the parameters each way as push + pull.
  double compute_s = cfg.compute_s, comm_s = cfg.comm_s;
  const bool calibrate = cfg.timing == "calibrate" || compute_s == 0 || comm_s == 0;
  if (calibrate) {
    Learner probe;
    probe.weights = nn::View("asgd::probe", P);
    Kokkos::deep_copy(probe.weights, model.params());
    probe.sampler = std::make_unique<data::Sampler>(data.train.n, cfg.seed ^ 0xca11, 0, 1, cfg.batch);
    kernels::LossSum dummy;
    gradient(probe, 0, dummy);
    auto t0 = Clock::now();
    for (int i = 0; i < 3; ++i) gradient(probe, 0, dummy);
    Kokkos::fence();
    if (compute_s == 0 || cfg.timing == "calibrate") compute_s = seconds_since(t0) / 3;
    t0 = Clock::now();
    for (int i = 0; i < 4; ++i) Kokkos::deep_copy(probe.weights, model.params());
    Kokkos::fence();
    if (comm_s == 0 || cfg.timing == "calibrate") comm_s = seconds_since(t0) / 2;
    model.init(cfg.seed);
    if (!cfg.warm_start.empty()) load_warm_start(cfg, model);
    if (cfg.warm_steps > 0) warm_up(cfg, model, data.train);
  }
  Timing timing(cfg, compute_s, comm_s);
  // Warm-up steps (--warm-steps) are training: one learner's steps on the
  // clock, at the model's compute time each, before the learners start.
  const double warm_s = cfg.warm_steps > 0 ? static_cast<double>(cfg.warm_steps) * compute_s : 0.0;

  ps::ShardCore core(cfg, P, L, data.train.n);
  Kokkos::deep_copy(core.weights(), model.params());
  std::vector<Learner> learners(static_cast<std::size_t>(L));
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue;
  std::uint64_t seq = 0;
  // The learner receives the current weights at `now` and starts its next
  // minibatch: its push reaches the server after pull + compute + push.
  auto start_cycle = [&](int l, double now) {
    Learner& ln = learners[static_cast<std::size_t>(l)];
    Kokkos::deep_copy(ln.weights, core.weights());
    if (ln.fetched.data() != nullptr) Kokkos::deep_copy(ln.fetched, core.weights());
    ln.timestamp = core.clock();
    // nsync: n_sync local steps, each its own compute time (one draw per
    // minibatch, as a real learner spends); the other protocols: one.
    const int local = core.rule().delta() ? cfg.n_sync : 1;
    double c = 0;
    for (int i = 0; i < local; ++i) c += timing.compute(l);
    ln.timing.pull_s += timing.comm() / 2;
    ln.timing.compute_s += c;
    ln.timing.push_s += timing.comm() / 2;
    queue.push({now + timing.comm() + c, seq++, l});
  };
  for (int l = 0; l < L; ++l) {
    Learner& ln = learners[static_cast<std::size_t>(l)];
    ln.weights = nn::View(fmt::format("asgd::learner{}::w", l), P);
    if (core.rule().delta()) {
      ln.fetched = nn::View(fmt::format("asgd::learner{}::fetched", l), P);
      ln.inc = nn::View(fmt::format("asgd::learner{}::inc", l), P);
    }
    ln.sampler = std::make_unique<data::Sampler>(data.train.n, cfg.seed, l, L, cfg.batch);
    ln.timing.learner = l;
    start_cycle(l, warm_s);
  }

  io::RunResult res;
  const RunInfo info = collect_run_info();
  fill_header(res, cfg, info, cfg.protocol, "none (virtual learners)");
  res.mode = "virtual";
  res.timing_model_json = timing.describe(calibrate).dump();
  if (!opt.quiet) {
    spdlog::info("run {} -> {} (virtual: {} learners, protocol {}, compute {:.4f}s, comm {:.5f}s)",
                 res.run_id, out.paths.results, L, cfg.protocol, compute_s, comm_s);
  }

  res.summary.warm_up_s = warm_s;
  double last_eval_epoch = 0, now = warm_s;
  std::vector<int> waiting;  // barrier: learners whose gradient is in the open update
  std::string status = "completed";
  auto last_print = Clock::now();
  const auto wall0 = Clock::now();
  // the real interval this process computed in (the figures are modelled, so
  // an overlap with other runs does not touch them; the report says so)
  res.train_started = unix_now();
  auto eval = [&] {
    Kokkos::deep_copy(model.params(), core.weights());
    const Eval e = evaluate(model, data.test, cfg.eval_batch, cfg.eval_samples);
    // eval_s 0: evaluation takes no virtual time, and a measured time would
    // make repeat runs differ
    res.evals.push_back({core.epoch(), core.clock(), now, e.loss, e.error, 0.0});
    last_eval_epoch = core.epoch();
    if (!opt.quiet)
      spdlog::info("eval  epoch {:.2f}  update {}  test error {:.2f}%  (virtual time {:.1f}s)",
                   core.epoch(), core.clock(), 100 * e.error, now);
  };
  while (!queue.empty()) {
    const Event ev = queue.top();
    queue.pop();
    now = ev.time;
    const int l = ev.learner;
    Learner& ln = learners[static_cast<std::size_t>(l)];
    // The gradient of this cycle, computed on the weights the learner held.
    kernels::LossSum sum;
    const int local = core.rule().delta() ? cfg.n_sync : 1;
    for (int i = 0; i < local; ++i) {
      const auto st = ln.sampler->state();
      gradient(ln, l, sum);
      if (core.rule().delta()) {  // same local schedule as the MPI learner
        const double epoch = static_cast<double>(st.epoch) +
                             static_cast<double>(st.batch) /
                                 static_cast<double>(ln.sampler->batches_per_epoch());
        kernels::sgd_update<nn::Space>(P, static_cast<real_t>(ps::scheduled_lr(cfg, epoch)),
                                       static_cast<real_t>(cfg.momentum),
                                       static_cast<real_t>(cfg.weight_decay), model.grads(), ln.inc,
                                       model.params());
        Kokkos::deep_copy(ln.weights, model.params());
      }
    }
    if (core.rule().delta()) {
      Kokkos::deep_copy(core.inbox(), ln.weights);
      KokkosBlas::axpy(real_t(-1), ln.fetched, core.inbox());
    } else {
      Kokkos::deep_copy(core.inbox(), model.grads());
    }
    const auto cur = ln.sampler->state();
    ln.push_at = now;
    ln.timing.gradients += 1;
    const bool update = core.accept(
        {l, ln.timestamp, static_cast<std::int64_t>(local) * cfg.batch, sum.loss, sum.wrong,
         {cur.epoch, cur.batch}},
        now);
    bool stop = false;
    if (update) {
      if (core.diverged()) {
        status = "diverged";
        stop = true;
        if (!opt.quiet)
          spdlog::warn("diverged at update {}: training loss {}", core.clock(),
                       core.series().updates.back().train_loss);
      } else if (core.done()) {
        stop = true;
      } else if (std::floor(core.epoch() / cfg.eval_every) >
                 std::floor(last_eval_epoch / cfg.eval_every)) {
        eval();
      }
    }
    if (stop) break;
    if (!core.rule().barrier()) {
      start_cycle(l, now);
    } else if (update) {
      for (int p : core.last_update_learners()) {
        Learner& q = learners[static_cast<std::size_t>(p)];
        q.timing.wait_s += now - q.push_at;
        start_cycle(p, now);
      }
    }
    if (!opt.quiet && seconds_since(last_print) >= opt.progress_every_s) {
      const auto& u = core.series().updates;
      spdlog::info("epoch {:.2f}/{:g}  update {}  loss {:.4f}  mean tau {:.2f}  virtual {:.1f}s  "
                   "({:.0f} gradients/s real)",
                   core.epoch(), cfg.epochs, core.clock(), u.empty() ? 0.0 : u.back().train_loss,
                   u.empty() ? 0.0 : u.back().mean_tau, now,
                   static_cast<double>(seq) / seconds_since(wall0));
      last_print = Clock::now();
    }
  }
  if (status == "completed") eval();

  res.status = status;
  res.train_finished = unix_now();
  res.updates = core.series().updates;
  res.staleness_histogram = core.series().staleness_histogram;
  res.learners = core.learner_counts();
  for (int l = 0; l < L; ++l) {
    const auto& t = learners[static_cast<std::size_t>(l)].timing;
    auto& row = res.learners[static_cast<std::size_t>(l)];
    row.compute_s = t.compute_s;
    row.wait_s = t.wait_s;
    row.push_s = t.push_s;
    row.pull_s = t.pull_s;
  }
  res.summary.train_time_s = now;
  res.summary.epochs = core.epoch();
  ps::summarise(res, cfg.target_error);
  io::write_results(out.paths.results, res);
  // The final weights, as a checkpoint (for warm starts and comparisons).
  io::Checkpoint ck;
  ck.run_id = res.run_id;
  ck.model = cfg.model;
  ck.config_hash = config_hash(cfg);
  ck.n_params = P;
  ck.clock = core.clock();
  ck.schedule_step = core.clock();
  ck.epochs = core.epoch();
  ck.wall_s = now;
  ck.weights = to_host(core.weights());
  ck.momentum = to_host(core.momentum());
  ck.cursors = core.cursors();
  ck.rng_state = {cfg.seed};
  ck.progress = res;
  io::write_checkpoint(out.paths.checkpoint, ck);
  out.result = std::move(res);
  return out;
}

}  // namespace asgd::sim
