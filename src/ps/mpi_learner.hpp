#pragma once
// A learner rank of the MPI core: fetch the weights from every server shard,
// compute (ps::LocalSteps), push, repeat until server 0 says stop; then say
// bye with its own timing totals.
#include "config/config.hpp"
#include "data/dataset.hpp"
#include "engine/engine.hpp"
#include "ps/mpi_util.hpp"
#include "ps/shm_windows.hpp"

namespace asgd::ps {

// eng: this learner's engine (CPU, or its GPU with --device cuda). On a GPU
// the weights are staged host -> device after each pull and the gradient
// device -> host before each push (timed as stage_s), unless the MPI library
// is CUDA-aware and messages are in use: then replies land in and pushes
// leave from device memory directly.
void run_learner(const TrainConfig& cfg, const Comm& comm, const data::Dataset& train,
                 engine::Engine& eng, const SharedWindows& shm, bool cuda_aware);

}  // namespace asgd::ps
