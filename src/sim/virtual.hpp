#pragma once
// Virtual learners (asgd train --virtual): lambda learners in one process,
// each with its own weight copy, sample stream and (for nsync) momentum,
// ordered by an event queue on a virtual clock. Gradients are computed for
// real on the stale weights each learner holds; only the timeline is a model
// (minibatch compute time and push/pull time drawn per learner from the
// timing model). The server applies ps::UpdateRule with the same kernels as
// the MPI server. Deterministic for a seed: bit-identical result datasets.
#include "config/config.hpp"
#include "ps/trainer.hpp"

namespace asgd::sim {

ps::TrainOutcome train_virtual(const TrainConfig& cfg, const ps::TrainOptions& opt = {});

}  // namespace asgd::sim
