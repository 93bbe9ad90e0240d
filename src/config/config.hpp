#pragma once
// The resolved configuration of one run: what `asgd train` options and suite
// files fill in, what the results file stores (as JSON) and what a checkpoint
// is matched against (config_hash).
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/text.hpp"
#include "common/dataset_spec.hpp"
#include "protocol/options.hpp"

namespace asgd {

struct TrainConfig {
  std::string model = "lenet";
  data::DatasetSpec data;
  index_t batch = 64;                // mu: samples per learner minibatch
  double lr = 0.01;                  // alpha0
  double momentum = 0.9;
  double weight_decay = 0.0005;
  std::vector<double> lr_steps;      // epochs at which alpha0 is multiplied by lr_gamma
  double lr_gamma = 0.1;
  double epochs = 10;
  std::int64_t max_steps = 0;        // stop after this many updates (0: no limit)
  double eval_every = 1;             // epochs between test evaluations
  index_t eval_batch = 256;
  std::int64_t eval_samples = 0;     // test samples per evaluation (0: all)
  std::int64_t checkpoint_every = 500;  // updates between checkpoints (0: never)
  std::uint64_t seed = 1;
  double target_error = 0.1;         // test error fraction for time-to-target
  double diverge_loss = 1e3;         // training loss above this (or NaN/Inf) = diverged
  int threads = 1;                   // BLAS threads per rank
  // Where learners compute: "cpu" (the Kokkos layers) or "cuda" (the native
  // CUDA path, one GPU per learner by node-local rank; needs the cuda preset).
  std::string device = "cpu";
  std::string results_dir = "results";
  std::string suite = "adhoc";
  std::string run_id;                // empty: derived from the config
  // Distributed training (MPI core, virtual learners).
  int learners = 1;
  int servers = 1;
  std::string protocol = "hardsync";  // a registered protocol (src/protocol/registry.cpp)
  int softsync_n = 1;
  int n_sync = 1;
  // Options of one protocol each; absent: not given, the protocol's default
  // (src/protocol: ssp 3, easgd tau 10 and alpha 0.9/L, dcasgd lambda 0.04).
  // Given, they are checked as given (in range, and only under their protocol).
  std::optional<int> staleness;      // ssp: clocks a learner may run ahead of the slowest
  std::optional<int> tau;            // easgd: local steps between elastic exchanges
  std::optional<double> alpha;       // easgd: elastic moving rate, in (0, 1)
  std::optional<double> lambda_dc;   // dcasgd: delay-compensation strength, >= 0
  std::string lr_policy = "constant";  // constant | staleness | mean-staleness
  // nsync: how the server merges a pushed change of weights
  // (src/protocol/merge_rules.cpp; absent: sum, merge_rule()); server_lr
  // absent: the run's lr; server_momentum absent: the run's momentum. Given,
  // each is refused under another protocol or merge rule, whatever its value.
  std::optional<std::string> merge;  // sum | mean | server-sgd | adagrad
  std::optional<double> server_lr;
  std::optional<double> server_momentum;
  // Warm start: initial weights from this checkpoint file (a 1-shard
  // checkpoint of the same model), or from warm_steps single-learner steps.
  std::string warm_start;
  std::int64_t warm_steps = 0;
  // Virtual learners (asgd train --virtual): L learners in one process on a
  // virtual clock; per-learner minibatch time from the timing model.
  bool virtual_learners = false;
  std::string timing = "calibrate";  // calibrate | fixed | normal | lognormal
  double compute_s = 0;              // mean compute time per minibatch (0: calibrate)
  double compute_cv = 0.1;           // coefficient of variation (normal, lognormal)
  double comm_s = 0;                 // push + pull time per exchange (0: calibrate)
  std::optional<int> straggler;      // learner that is straggler_factor times slower (absent: none)
  double straggler_factor = 1;
  // A machine profile (YAML, perf/profile.hpp): the virtual clock models
  // server shards, links and cores with its figures (perf/cluster.hpp).
  std::string profile;
};

// The merge rule a run uses: the one given, else sum.
inline std::string merge_rule(const TrainConfig& c) { return c.merge.value_or(protocol::kDefaultMerge); }

// What the protocols, rate policies and merge rules read of a configuration.
protocol::Options protocol_options(const TrainConfig& c);

// Longest name of a suite, and of a run id (a run id plus ".shardNN.h5" and
// ".tmp.<pid>" must stay one file name of at most 255 bytes).
inline constexpr std::size_t kMaxSuiteName = 128;
inline constexpr std::size_t kMaxRunId = 200;
// Largest training length: more epochs than this is a typo, not a plan.
inline constexpr double kMaxEpochs = 1e6;

// Every problem in cfg, one message each; empty when the config is valid.
std::vector<std::string> validate(const TrainConfig& cfg);
// validate(), and what only a whole run's configuration shows (a suite
// checks each value alone with validate()): the virtual learners' timing
// options on a real run.
std::vector<std::string> validate_run(const TrainConfig& cfg);
// Throws asgd::Error listing every problem of validate_run() at once.
void check(const TrainConfig& cfg);

void to_json(nlohmann::json& j, const TrainConfig& c);
// Strict: every key must be known (an unknown one is refused with a "did you
// mean" suggestion), of its type (integers must be whole numbers in range),
// and j must be an object. Throws asgd::Error naming every bad key at once.
void from_json(const nlohmann::json& j, TrainConfig& c);
// --config FILE: a JSON object of config keys (as `asgd sweep` writes them).
// Refuses a missing, unreadable or non-regular file, bad JSON, a top level
// that is not an object, and whatever from_json refuses; messages name path.
TrainConfig load_config_file(const std::string& path);

// Hex digest of the fields that change the numerics (not paths, threads, ids).
std::string config_hash(const TrainConfig& c);
// run_id if set, else "<model>-<dataset>-<protocol>-L<learners>-<hash8>".
std::string resolved_run_id(const TrainConfig& c);

// A results file at `path` exists for this run id: throws asgd::Error (bad
// input) unless its stored configuration (JSON text) is this one by
// config_hash. Every trainer calls it before reporting "already finished".
void check_same_config(const TrainConfig& c, const std::string& stored_config_json,
                       const std::string& path);

// Memory a run of cfg needs in one process, from the model (parameter count x
// buffers), the data (samples x sample size x 4 bytes) and the batch
// (activations of max(batch, eval_batch) samples), before anything is
// allocated. Bytes; doubles so absurd sizes do not overflow.
struct MemoryEstimate {
  double model = 0, data = 0, activations = 0;
  double total() const { return model + data + activations; }
};
MemoryEstimate estimate_memory(const TrainConfig& cfg);
// Memory this process may still use: MemAvailable of /proc/meminfo (or
// sysconf), lowered to the cgroup's memory.max headroom when there is one.
double available_memory();
// What the data allows, known from the configuration alone (no file read):
// one round of learners x batch within the training samples, and warm steps
// within the run's updates. One line per problem, naming the flag.
std::vector<std::string> data_fit_problems(const TrainConfig& cfg);
// The warm-start checkpoint is a regular file ("" when there is none or it
// is one); its contents are checked against the model when the run loads it.
std::string warm_start_problem(const TrainConfig& cfg);
// The checks a run needs before it loads data or allocates:
// data_fit_problems(), warm_start_problem(), and estimate_memory() fits in
// available_memory().
// Throws asgd::Error naming the flag to change.
void check_resources(const TrainConfig& cfg);

}  // namespace asgd
