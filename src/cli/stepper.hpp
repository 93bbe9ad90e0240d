#pragma once
// Minibatch gradients of one model (forward, loss, backward: a learner's
// local step) on the engine of a run, timed: what asgd calibrate measures a
// model's compute with, and what its cores probe keeps the cores busy with.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.hpp"
#include "config/config.hpp"
#include "data/dataset.hpp"
#include "ps/local_steps.hpp"
#include "ps/protocol.hpp"
#include "ps/run_parts.hpp"

namespace asgd::cli {

// Mean and coefficient of variation of a series of times.
struct Stats {
  double mean = 0, cv = 0;
};
inline Stats stats(const std::vector<double>& x) {
  double m = 0, v = 0;
  for (double t : x) m += t;
  m /= static_cast<double>(x.size());
  for (double t : x) v += (t - m) * (t - m);
  v /= static_cast<double>(std::max<std::size_t>(1, x.size() - 1));
  return {m, m > 0 ? std::sqrt(v) / m : 0};
}

// Minibatch gradients of one model (forward, loss, backward: a learner's
// local step) on the engine of a run.
class Stepper {
 public:
  Stepper(const std::string& model, int batch, int threads) : cfg_(config(model, batch, threads)),
        run_(ps::load_run(cfg_, batch, "cpu")), rule_(cfg_), local_(cfg_, rule_, run_.data.train),
        sampler_(run_.data.train.n, cfg_.seed, 0, 1, cfg_.batch) {}
  index_t n_params() const { return run_.engine->n_params(); }
  // n untimed, then the seconds of each of `timed`
  std::vector<double> times(int untimed, int timed) {
    for (int i = 0; i < untimed; ++i) local_.gradient(*run_.engine, sampler_, 0, step_);
    run_.engine->synchronize();
    std::vector<double> t;
    for (int i = 0; i < timed; ++i) {
      const auto t0 = Clock::now();
      local_.gradient(*run_.engine, sampler_, 0, step_);
      run_.engine->synchronize();
      t.push_back(seconds_since(t0));
    }
    return t;
  }
  // As times(), and then more until the timed ones last at least
  // kTimedAtLeast_s: ten minibatches of 2-3 ms are less than the machine's
  // speed moves by (two calibrations the same day 24% apart).
  std::vector<double> times_lasting(int untimed, int timed) {
    std::vector<double> t = times(untimed, timed);
    double sum = 0;
    for (double x : t) sum += x;
    while (sum < kTimedAtLeast_s && t.size() < kMaxTimed) {
      t.push_back(times(0, 1).front());
      sum += t.back();
    }
    return t;
  }
  static constexpr double kTimedAtLeast_s = 0.5;
  static constexpr std::size_t kMaxTimed = 100000;

 private:
  static TrainConfig config(const std::string& model, int batch, int threads) {
    TrainConfig cfg;
    cfg.model = model;
    cfg.batch = batch;
    cfg.threads = threads;
    check(cfg);
    return cfg;
  }
  TrainConfig cfg_;
  ps::RunSetup run_;
  ps::UpdateRule rule_;
  ps::LocalSteps local_;
  data::Sampler sampler_;
  std::int64_t step_ = 0;
};

}  // namespace asgd::cli
