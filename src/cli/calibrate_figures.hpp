#pragma once
// The figures asgd calibrate measures within its own process: a shard's
// costs (per parameter and per push), how a waiting rank polls and each
// model's minibatch gradient.
#include <functional>
#include <string>

#include "common/types.hpp"
#include "perf/profile.hpp"

namespace asgd::cli {

std::string today();  // "2026-12-03 15:30 UTC", for the figures' notes
perf::Figure measured(double v, std::string how);

// ShardCore::accept of P parameters: accumulate and update per parameter,
// each accept after `between` (a learner's minibatch, as in a run: the
// shard's arrays then come from memory, not from the caches), which `what`
// names.
void server_figures(perf::Profile& p, index_t P, const std::function<void()>& between, const std::string& what);
// ShardCore::accept of a 16-parameter gradient: the cost per push apart from its parameters.
void per_push_figure(perf::Profile& p);
// One model's minibatch gradient at `batch` on `threads` threads (calibrate's
// compute entry); its parameter count through n_params.
perf::ComputeEntry compute_entry(const std::string& model, int batch, int threads, int steps, index_t& n_params);
// The MPI core's wait schedule under ASGD_WAIT, and the sleeps' overshoot here.
void wake_figures(perf::Profile& p);

}  // namespace asgd::cli
