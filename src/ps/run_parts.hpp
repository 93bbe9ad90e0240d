#pragma once
// The pieces of a run every driver (single learner, MPI, virtual learners)
// shares besides the lifecycle (ps/session.hpp): evaluation, warm starts, the
// data and engine of a run, results headers, host copies of views.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "common/clock.hpp"
#include "common/runinfo.hpp"
#include "ps/trainer.hpp"
#include "data/dataset.hpp"
#include "engine/engine.hpp"
#include "io/results.hpp"
#include "io/run_lock.hpp"
#include "nn/model.hpp"

namespace asgd::ps {


struct Eval {
  double loss = 0, error = 0;
};
// Forward passes over the test set (or its first eval_samples) in batches of
// the engine's weights.
Eval evaluate(engine::Engine& eng, const data::Dataset& test, index_t eval_batch,
              std::int64_t eval_samples);

std::vector<float> to_host(const nn::View& v);
void from_host(const std::vector<float>& src, const nn::View& v);

// Root attributes of a results file from the config and the run facts.
void fill_header(io::RunResult& res, const TrainConfig& cfg, const RunInfo& info,
                 const std::string& protocol, const std::string& mpi_version);

// The data set and the model for it, finalised for batches up to max_batch,
// BLAS threads set, on `device` (RunSession::load).
struct RunSetup {
  data::DataPair data;
  std::unique_ptr<engine::Engine> engine;
};
RunSetup load_run(const TrainConfig& cfg, index_t max_batch, const std::string& device);

// Warm start from cfg.warm_start: the weights of a 1-shard checkpoint of the
// same model (its momentum is not taken). Throws asgd::Error naming the file.
void load_warm_start(const TrainConfig& cfg, engine::Engine& model);
// Warm start from cfg.warm_steps single-learner SGD steps (own momentum from
// zero, its own sample stream; the engine's momentum is zero after). Returns
// the seconds it took.
double warm_up(const TrainConfig& cfg, engine::Engine& eng, const data::Dataset& train);

}  // namespace asgd::ps
