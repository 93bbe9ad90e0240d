#pragma once
// Virtual runs on a machine profile (--profile): the profile's compute time
// for the run's model, and the performance model's shape for the run
// (perf/cluster.hpp): its shards, links, server costs and cores.
#include <nlohmann/json.hpp>

#include "common/types.hpp"
#include "config/config.hpp"
#include "perf/cluster.hpp"
#include "perf/profile.hpp"

namespace asgd::sim {

struct Modelled {
  perf::Profile profile;
  perf::ComputeTime compute;
  perf::ClusterSpec spec;
};

// Reads cfg.profile and takes its figures for this run: n_params
// parameters, the model's training FLOPs per sample (for device throughput
// entries), c gradients per update. Throws asgd::Error naming the file.
// local_updates: the learner's own SGD updates per cycle (nsync's local steps).
Modelled modelled(const TrainConfig& cfg, index_t n_params, double flops_per_sample, int c, int local_updates);

// What the results' timing_model records: the model, the profile (name,
// path, every figure used) and that the times are modelled.
nlohmann::json describe(const Modelled& m);

}  // namespace asgd::sim
