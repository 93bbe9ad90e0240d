#pragma once
// Protocol allreduce on MPI: every rank a learner, no servers (ps/allreduce.cpp).
#include "config/config.hpp"
#include "ps/mpi_util.hpp"
#include "ps/trainer.hpp"

namespace asgd::ps {

// comm has exactly cfg.learners ranks; rank 0's outcome holds the result.
TrainOutcome train_allreduce(const TrainConfig& cfg, const Comm& comm, const TrainOptions& opt);

}  // namespace asgd::ps
