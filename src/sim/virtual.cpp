#include "sim/virtual.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <queue>

#include "common/error.hpp"
#include "ps/local_steps.hpp"
#include "ps/session.hpp"
#include "ps/shard_core.hpp"
#include "ps/run_parts.hpp"
#include "sim/modelled.hpp"
#include "sim/timing.hpp"

namespace asgd::sim {

namespace {

struct Learner {
  nn::View weights;           // the (stale) copy this learner computes on
  nn::View inc;               // local SGD (nsync, EASGD): its local momentum
  nn::View centre;            // EASGD: the centre received at its last exchange
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


class VirtualRun {
 public:
  VirtualRun(ps::RunSession& s, ps::RunSetup& run)
      : s_(s), cfg_(s.cfg()), data_(run.data), eng_(*run.engine), L_(cfg_.learners),
        P_(eng_.n_params()), rule_(cfg_), local_(cfg_, rule_, data_.train),
        core_(cfg_, P_, L_, data_.train.n), learners_(static_cast<std::size_t>(L_)),
        res_(s.outcome().result) {
    for (int l = 0; l < L_; ++l) {
      Learner& ln = learners_[static_cast<std::size_t>(l)];
      ln.weights = nn::View(fmt::format("asgd::learner{}::w", l), P_);
      if (rule_.local_sgd()) ln.inc = nn::View(fmt::format("asgd::learner{}::inc", l), P_);
      if (elastic()) ln.centre = nn::View(fmt::format("asgd::learner{}::centre", l), P_);
      ln.sampler = std::make_unique<data::Sampler>(data_.train.n, cfg_.seed, l, L_, cfg_.batch);
      ln.timing.learner = l;
    }
    if (!cfg_.profile.empty())
      model_ = modelled(cfg_, P_, eng_.flops_per_sample_train(), rule_.gradients_per_update(),
                        rule_.local_sgd() ? rule_.local_steps() : 0);
  }

  void start(const RunInfo& info) {
    s_.header(res_, info, cfg_.protocol, "none (virtual learners)");
    res_.mode = RunMode::virtual_learners;
    io::CheckpointExpect want;
    want.n_params = P_;
    want.learners = L_;
    const auto ck = s_.resume(s_.paths().checkpoint, want);
    if (ck && ck->virtual_state.empty())
      throw Error(fmt::format("{}: the checkpoint holds no virtual learners' state (written at the "
                              "end of a run, or by another mode); remove it to start again",
                              s_.paths().checkpoint));
    const TimingFigures fig = ck ? figures_of(*ck) : fresh_start();
    timing_ = std::make_unique<Timing>(cfg_, fig.compute_s, fig.comm_s, model_ ? model_->compute.cv : -1);
    auto described = timing_->describe(fig.calibrated);
    if (model_) {
      described.update(describe(*model_));
      cluster_ = std::make_unique<perf::Cluster>(model_->spec, [this](int l) { return cycle_compute(l); });
    }
    res_.timing_model_json = described.dump();
    if (ck) {
      restore(*ck);
    } else {
      eng_.params_to_host();
      Kokkos::deep_copy(core_.weights(), host_view(eng_.params()));
      now_ = warm_s_;
      for (int l = 0; l < L_; ++l) {
        // EASGD: a learner's own weights start as the centre
        if (elastic()) Kokkos::deep_copy(learners_[static_cast<std::size_t>(l)].weights, core_.weights());
        start_cycle(l, warm_s_);
      }
      if (cluster_) {
        released_.clear();
        cluster_->start(warm_s_);
      }
    }
    res_.summary.warm_up_s = warm_s_;
    if (!s_.opt().quiet) {
      spdlog::info("run {} -> {} (virtual: {} learners, protocol {}, compute {:.4f}s, {})", res_.run_id,
                   s_.paths().results, L_, cfg_.protocol, fig.compute_s,
                   model_ ? fmt::format("modelled with profile {} ({})", model_->profile.name, model_->profile.path)
                          : fmt::format("comm {:.5f}s", fig.comm_s));
      if (ck) spdlog::info("resuming {} from checkpoint at update {} (virtual time {:.1f}s)",
                           res_.run_id, core_.clock(), now_);
    }
  }

  RunStatus train() {
    const auto wall0 = Clock::now();
    // the real interval this process computed in (the figures are modelled, so
    // an overlap with other runs does not touch them; the report says so)
    res_.train_started = unix_now();
    while (auto next = next_push()) {
      const int l = *next;
      const bool update = push(l);
      if (update) {
        // the session's after_update, in parts: the checkpoint waits for the learners' restart
        if (const auto end = s_.ended(core_.clock(), core_.series().updates.back().train_loss, core_.done())) {
          if (end == RunStatus::completed) core_.answer(l, update);  // the clock spread of the last update
          return *end;
        }
        if (s_.evals().due(core_.epoch())) evaluate_now();
      }
      for (int p : core_.answer(l, update)) {  // the learners this push lets go start again
        Learner& q = learners_[static_cast<std::size_t>(p)];
        q.timing.wait_s += now_ - q.push_at;
        start_cycle(p, now_);
      }
      if (cluster_) {
        cluster_->release(released_);
        released_.clear();
      }
      // at an update nothing is pending at the server: the state is complete
      // (the performance model's transfers in flight are not kept: a run on
      // a profile checkpoints at its end only, and starts again when killed)
      if (update && !cluster_ && s_.checkpoint_due(core_.clock())) checkpoint(true);
      if (update) s_.count_update();
      if (core_.clock() > 0 && s_.progress_due()) progress(wall0);
    }
    return RunStatus::completed;
  }

  void finish(RunStatus status) {
    if (status == RunStatus::completed) evaluate_now();
    res_.updates = core_.series().updates;
    res_.staleness_histogram = core_.series().staleness_histogram;
    res_.minibatch_error = minibatch_error_;
    std::vector<io::LearnerTiming> timing;
    for (int l = 0; l < L_; ++l) {
      io::LearnerTiming t = learners_[static_cast<std::size_t>(l)].timing;
      if (cluster_) {  // the performance model's own account
        const perf::LearnerTimes& m = cluster_->times(l);
        t.compute_s = m.compute_s;
        t.wait_s = m.wait_s;
        t.push_s = m.push_s;
        t.pull_s = m.pull_s;
        t.stage_s = m.stage_s;
      }
      timing.push_back(t);
    }
    res_.learners = core_.learner_rows(timing);
    if (cluster_) {  // what bounded the modelled run: the busiest resource, and the cores
      auto j = nlohmann::json::parse(res_.timing_model_json);
      const perf::Usage b = cluster_->busiest();
      j["busiest"] = {{"resource", b.what}, {"share", b.share}};
      if (const auto cores = cluster_->cores_share()) j["cores_share"] = *cores;
      res_.timing_model_json = j.dump();
    }
    // the final weights, as a checkpoint (for warm starts and comparisons)
    s_.finish(res_, status, now_, core_.epoch(), [&] { checkpoint(false); });
  }

 private:
  nn::View host_view(real_t* p) const { return nn::View(p, P_); }
  bool elastic() const { return rule_.elastic_alpha() > 0; }

  TimingFigures fresh_start() {
    s_.start_weights(eng_);
    TimingFigures fig{cfg_.compute_s, cfg_.comm_s, false};
    if (model_) {  // the profile is the calibration
      fig.compute_s = model_->compute.mean_s;
    } else if (cfg_.timing == "calibrate" || fig.compute_s == 0 || fig.comm_s == 0) {
      fig.calibrated = true;
      calibrate(fig);
    }
    if (cfg_.warm_steps > 0) {
      ps::warm_up(cfg_, eng_, data_.train);
      // warm-up steps are training: one learner's steps on the clock, at the
      // model's compute time each, before the learners start
      warm_s_ = static_cast<double>(cfg_.warm_steps) * fig.compute_s;
    }
    return fig;
  }

  // The model's measured compute time (mean of 3 after one) and a memory copy
  // of the parameters each way as push + pull. Leaves the weights as they were.
  void calibrate(TimingFigures& fig) {
    std::vector<real_t> probe(static_cast<std::size_t>(P_));
    data::Sampler sampler(data_.train.n, cfg_.seed ^ 0xca11, 0, 1, cfg_.batch);
    std::int64_t steps = 0;
    local_.gradient(eng_, sampler, 0, steps);
    auto t0 = Clock::now();
    for (int i = 0; i < 3; ++i) local_.gradient(eng_, sampler, 0, steps);
    eng_.synchronize();
    if (fig.compute_s == 0 || cfg_.timing == "calibrate") fig.compute_s = seconds_since(t0) / 3;
    t0 = Clock::now();
    for (int i = 0; i < 4; ++i) std::copy(eng_.params(), eng_.params() + P_, probe.begin());
    if (fig.comm_s == 0 || cfg_.timing == "calibrate") fig.comm_s = seconds_since(t0) / 2;
  }

  TimingFigures figures_of(const io::Checkpoint& ck) {
    warm_s_ = ck.progress.summary.warm_up_s;
    return figures_from_json(ck.progress.timing_model_json, s_.paths().checkpoint);
  }

  // The learner receives the current weights at `now` and starts its next
  // cycle: its push reaches the server after pull + compute + push.
  void start_cycle(int l, double now) {
    Learner& ln = learners_[static_cast<std::size_t>(l)];
    // EASGD keeps its own weights and receives the centre
    Kokkos::deep_copy(elastic() ? ln.centre : ln.weights, core_.weights());
    core_.sent(l);  // DC-ASGD: what its next gradient is compensated against
    ln.timestamp = core_.clock();
    if (cluster_) {  // the performance model times the cycle
      released_.push_back(l);
      return;
    }
    // one draw per minibatch, as a real learner spends
    double c = 0;
    for (int i = 0; i < rule_.local_steps(); ++i) c += timing_->compute(l);
    ln.timing.pull_s += timing_->comm() / 2;
    ln.timing.compute_s += c;
    ln.timing.push_s += timing_->comm() / 2;
    queue_.push({now + timing_->comm() + c, seq_++, l});
  }

  // Learner l's cycle, computed for real on the weights it held, reaches the
  // server. Returns whether it completed an update.
  bool push(int l) {
    Learner& ln = learners_[static_cast<std::size_t>(l)];
    Kokkos::deep_copy(host_view(eng_.params()), ln.weights);
    eng_.params_changed();
    if (rule_.weights_delta()) eng_.keep_fetched();  // the weights it fetched
    if (rule_.local_sgd()) eng_.set_momentum(ln.inc.data());  // and its own momentum
    const ps::LocalResult r = local_.run(eng_, *ln.sampler, l, ln.steps);
    if (rule_.weights_delta())  // in update order: nsync applies each push alone
      minibatch_error_.insert(minibatch_error_.end(), r.errors.begin(), r.errors.end());
    if (rule_.local_sgd()) eng_.get_momentum(ln.inc.data());
    if (elastic()) {  // the exchange with the centre it holds; it keeps its weights
      local_.elastic(eng_, ln.centre.data());
      Kokkos::deep_copy(ln.weights, host_view(eng_.params()));
    } else {
      eng_.grads_ready();
    }
    const auto cur = ln.sampler->state();
    ln.push_at = now_;
    ln.timing.gradients += 1;
    const nn::View payload = host_view(eng_.grads());
    return core_.accept({l, ln.timestamp, r.samples, r.loss_sum, r.wrong, {cur.epoch, cur.batch}},
                        now_, &payload);
  }

  // The next push to reach the server: from the event queue, or when the
  // performance model has it received and applied by every shard.
  std::optional<int> next_push() {
    if (cluster_) {
      auto l = cluster_->next();
      now_ = cluster_->now();
      return l;
    }
    if (queue_.empty()) return std::nullopt;
    const Event ev = queue_.top();
    queue_.pop();
    now_ = ev.time;
    return ev.learner;
  }

  // The performance model's draw: one per local step of learner l's cycle.
  double cycle_compute(int l) {
    double c = 0;
    for (int i = 0; i < rule_.local_steps(); ++i) c += timing_->compute(l);
    return c;
  }

  void evaluate_now() {
    Kokkos::deep_copy(host_view(eng_.params()), core_.weights());
    eng_.params_changed();
    const ps::Eval e = ps::evaluate(eng_, data_.test, cfg_.eval_batch, cfg_.eval_samples);
    s_.evaluated(res_.evals, core_.epoch(), core_.clock(), now_, e, 0.0);
  }

  void progress(Clock::time_point wall0) {
    const auto& u = core_.series().updates;
    ps::ProgressLine p;
    p.epoch = core_.epoch();
    p.epochs = cfg_.epochs;
    p.clock = core_.clock();
    p.loss = u.empty() ? 0.0 : u.back().train_loss;
    p.mean_tau = u.empty() ? 0.0 : u.back().mean_tau;
    p.samples_per_s = static_cast<double>(core_.samples()) / std::max(1e-9, now_);
    p.note = fmt::format("(virtual time {:.1f}s; {:.0f} gradients/s real)", now_,
                         static_cast<double>(seq_) / seconds_since(wall0));
    s_.progress(p);
  }

  void checkpoint(bool with_learners) {
    io::Checkpoint ck = s_.checkpoint(core_.clock(), core_.epoch(), now_, P_);
    ck.progress = res_;
    core_.fill_checkpoint(ck);
    ck.progress.minibatch_error = minibatch_error_;
    ck.progress.learners = core_.learner_counts();
    if (with_learners) ck.virtual_state = save_learners();
    io::write_checkpoint(s_.paths().checkpoint, ck);
  }

  io::VirtualState save_learners() const {
    io::VirtualState v;
    v.now = now_;
    v.seq = seq_;
    for (auto q = queue_; !q.empty(); q.pop()) {
      v.event_time.push_back(q.top().time);
      v.event_seq.push_back(q.top().seq);
      v.event_learner.push_back(q.top().learner);
    }
    auto append = [](std::vector<float>& to, const nn::View& from) {
      const auto h = ps::to_host(from);
      to.insert(to.end(), h.begin(), h.end());
    };
    for (const Learner& ln : learners_) {
      v.timestamp.push_back(ln.timestamp);
      v.steps.push_back(ln.steps);
      const auto st = ln.sampler->state();
      v.cursors.push_back({st.epoch, st.batch});
      v.timing.push_back(ln.timing);
      v.push_at.push_back(ln.push_at);
      append(v.weights, ln.weights);
      if (rule_.local_sgd()) append(v.inc, ln.inc);
      if (elastic()) append(v.centre, ln.centre);
    }
    v.timing_rng = timing_->save();
    v.held.assign(core_.held().begin(), core_.held().end());
    return v;
  }

  void restore(const io::Checkpoint& ck) {
    const io::VirtualState& v = ck.virtual_state;
    if (static_cast<int>(v.timestamp.size()) != L_ || (rule_.local_sgd() && v.inc.empty()) ||
        (elastic() && v.centre.empty()))
      throw Error(fmt::format("{}: the checkpoint's virtual state does not fit this run ({} learners)",
                              s_.paths().checkpoint, L_));
    core_.restore(ck);
    now_ = v.now;
    seq_ = v.seq;
    for (std::size_t i = 0; i < v.event_time.size(); ++i)
      queue_.push({v.event_time[i], v.event_seq[i], v.event_learner[i]});
    auto slice = [&](const std::vector<float>& all, std::size_t l) {
      return std::vector<float>(all.begin() + static_cast<std::ptrdiff_t>(l * static_cast<std::size_t>(P_)),
                                all.begin() + static_cast<std::ptrdiff_t>((l + 1) * static_cast<std::size_t>(P_)));
    };
    for (std::size_t l = 0; l < learners_.size(); ++l) {
      Learner& ln = learners_[l];
      ln.timestamp = v.timestamp[l];
      ln.steps = v.steps[l];
      ln.sampler->restore({v.cursors[l].epoch, v.cursors[l].batch});
      ln.timing = v.timing[l];
      ln.timing.learner = static_cast<std::int32_t>(l);
      ln.push_at = v.push_at[l];
      ps::from_host(slice(v.weights, l), ln.weights);
      if (rule_.local_sgd()) ps::from_host(slice(v.inc, l), ln.inc);
      if (elastic()) ps::from_host(slice(v.centre, l), ln.centre);
    }
    timing_->restore(v.timing_rng);
    for (auto q : v.held) {
      if (q < 0 || q >= L_) throw Error(fmt::format("{}: the checkpoint's held learners do not fit this run",
                                                    s_.paths().checkpoint));
      core_.hold(q);
    }
    res_.evals = ck.progress.evals;
    minibatch_error_ = ck.progress.minibatch_error;
  }

  ps::RunSession& s_;
  const TrainConfig& cfg_;
  const data::DataPair& data_;
  engine::Engine& eng_;  // one engine, each learner's weights (and momentum) in turn
  int L_;
  index_t P_;
  ps::UpdateRule rule_;
  ps::LocalSteps local_;
  std::vector<float> minibatch_error_;  // nsync: every minibatch's error, in update order
  ps::ShardCore core_;
  std::vector<Learner> learners_;
  std::unique_ptr<Timing> timing_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue_;
  std::uint64_t seq_ = 0;
  double now_ = 0, warm_s_ = 0;
  io::RunResult& res_;
  std::optional<Modelled> model_;              // --profile: the performance model's figures
  std::unique_ptr<perf::Cluster> cluster_;     // and the model itself
  std::vector<int> released_;                  // learners the current push releases (model)
};

}  // namespace

ps::TrainOutcome train_virtual(const TrainConfig& cfg, const ps::TrainOptions& opt) {
  ps::RunSession session(cfg, opt);
  if (session.finished()) return session.outcome();
  ps::RunSetup run = session.load();
  VirtualRun vr(session, run);
  vr.start(collect_run_info());
  vr.finish(vr.train());
  return session.outcome();
}

}  // namespace asgd::sim
