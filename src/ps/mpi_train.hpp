#pragma once
// The MPI async-SGD core. Ranks 0..S-1 of the communicator are parameter
// servers, each owning a contiguous shard of the flat parameter buffer; ranks
// S..S+L-1 are learners. Protocols (hardsync, n-softsync, GPU A-SGD's n_sync)
// and learning-rate policies follow DESIGN.md; the server rule is
// ps::UpdateRule, the transport is MPI point-to-point.
//
// Server rank 0 evaluates, decides when to stop, and writes the results file;
// every server checkpoints its shard. Killing all ranks and re-running the
// same command resumes from the last checkpoints.
#include <mpi.h>

#include "config/config.hpp"
#include "ps/mpi_util.hpp"
#include "ps/trainer.hpp"

namespace asgd::ps {

// Runs one distributed training run over comm (which must have exactly
// cfg.servers + cfg.learners ranks). The returned outcome is meaningful on
// rank 0 (the writer); other ranks return with an empty result.
TrainOutcome train_mpi(const TrainConfig& cfg, MPI_Comm comm, const TrainOptions& opt = {});

}  // namespace asgd::ps
