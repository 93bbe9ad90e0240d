#pragma once
// HDF5 results and checkpoints. This header sees plain structs only; the
// implementation (results.cpp, checkpoint.cpp) is the only code in the project
// that includes HDF5 headers. The on-disk layout is documented in
// results/README.md and checked by read_results / read_checkpoint.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/run_status.hpp"

namespace asgd::io {

inline constexpr std::int32_t kResultsSchemaVersion = 1;
// 2: dense-layer weights stored [outputs, inputs] (1 stored [inputs, outputs]).
inline constexpr std::int32_t kCheckpointSchemaVersion = 2;

// One row per server update (per optimizer step for a single learner).
struct UpdateRecord {
  std::int64_t clock = 0;     // server clock after this update
  double wall_s = 0;          // training time since start (evaluation excluded), s
  std::int32_t gradients = 0; // gradients combined in this update (c)
  double mean_tau = 0;        // mean staleness of those gradients
  double rate = 0;            // effective learning rate applied (alpha0 * mean factor)
  double train_loss = 0;      // mean minibatch loss of those gradients
  double train_error = 0;     // minibatch error fraction of those gradients
  std::int64_t samples = 0;   // samples in this update
  // Pushes applied of the most advanced learner minus the slowest's, after
  // this update (-1: not recorded, files before the column).
  std::int64_t clock_spread = -1;
};

struct EvalRecord {
  double epoch = 0;           // training epochs done when evaluated
  std::int64_t clock = 0;
  double wall_s = 0;          // training time at evaluation (off the clock)
  double test_loss = 0;
  double test_error = 0;      // fraction in [0, 1]
  double eval_s = 0;          // time the evaluation itself took
};

struct LearnerTiming {
  std::int32_t learner = 0;
  double compute_s = 0, wait_s = 0, push_s = 0, pull_s = 0;
  std::int64_t gradients = 0;  // gradients of this learner the server applied
  std::int64_t samples = 0;
  double stage_s = 0;  // GPU learners: host<->device copies of weights and gradients
  // Pushes as the learner itself counted them (MPI: the total of its bye
  // message, plus the applied count of the checkpoint a resumed run started
  // from). A push that reaches a stopped server is answered "stop" and not
  // applied, so pushed - gradients is 0 or 1. -1: not recorded (single and
  // virtual runs, a learner that never said bye, files written before);
  // /learners/pushed is written when any learner has it.
  std::int64_t pushed = -1;
};

struct Summary {
  double target_error = std::numeric_limits<double>::quiet_NaN();
  double time_to_target_s = std::numeric_limits<double>::quiet_NaN();  // NaN: not reached
  double final_test_error = std::numeric_limits<double>::quiet_NaN();
  double best_test_error = std::numeric_limits<double>::quiet_NaN();
  double samples_per_s = 0;
  std::int64_t updates = 0;
  double epochs = 0;
  double train_time_s = 0;
  // --warm-steps: the single-learner warm-up's share of train_time_s (it is
  // on the training clock, so warm starts are not flattered); 0 without one.
  double warm_up_s = 0;
};

struct RunResult {
  // root attributes
  std::int32_t schema_version = kResultsSchemaVersion;
  std::string run_id, suite, config_json, git_commit, host;
  std::string mpi_version, kokkos_version, hdf5_version;  // hdf5_version filled by the writer
  std::string slurm_job_id, slurm_array_job_id, slurm_array_task_id;
  RunMode mode = RunMode::real;               // files: "real" | "virtual"
  RunStatus status = RunStatus::completed;    // files: "completed" | "diverged" | "failed"
  std::string model, protocol;
  std::string timing_model_json = "{}";
  // How weights and gradients moved: "shared-memory" (MPI, every rank on one
  // node), "messages" (MPI across nodes, or ASGD_SHM=0), "none" (single and
  // virtual runs, one process); "" in files written before (not written).
  std::string transport;
  // With "shared-memory": how learners took the servers' weights, "in-place"
  // (read in the servers' windows: one learner, or hardsync) or "copied" (out
  // of the windows at each reply); "" otherwise and in older files (not written).
  std::string weights;
  // The machine the run trained on (common/runinfo.hpp machine_json: CPU model
  // and flags, cores and threads used, memory, BLAS and its kernel, Kokkos
  // backend, MPI, GPU, nodes, load at start); "{}" in files written before.
  std::string machine_json = "{}";
  // Wall-clock interval of the training in this process (Unix seconds; a
  // resumed run: its last segment); NaN in files written before. asgd report
  // flags runs whose intervals overlapped on the same host.
  double train_started = std::numeric_limits<double>::quiet_NaN();
  double train_finished = std::numeric_limits<double>::quiet_NaN();
  // datasets
  std::vector<UpdateRecord> updates;
  std::vector<EvalRecord> evals;
  std::vector<std::int64_t> staleness_histogram;  // [tau] = count
  // Virtual nsync runs: the training error of every minibatch the learners
  // computed, in the order of the updates (update i is one push of n_sync
  // minibatches); empty otherwise. /minibatches/error.
  std::vector<float> minibatch_error;
  std::vector<LearnerTiming> learners;
  Summary summary;
};

// Writes path atomically: to "<path>.tmp.<pid>" in the same folder, then
// rename(2). Throws asgd::Error naming the path on any failure and leaves an
// existing file at path untouched.
void write_results(const std::string& path, const RunResult& r);
// Reads and validates (schema version first, then every required attribute
// and dataset, status completed|diverged|failed and mode real|virtual, equal column lengths, then every value against its domain:
// result_problems). Throws asgd::Error naming what is wrong.
RunResult read_results(const std::string& path);
// Every value of r outside its domain, one message each (empty: valid):
// config and
// timing_model JSON objects, run id a file name, counts >= 0, times finite
// and >= 0, error fractions in [0, 1] (NaN where "not available"), epochs
// finite and not beyond the configured epochs (+ one update's worth),
// updates not beyond a configured max_steps.
std::vector<std::string> result_problems(const RunResult& r);

struct LearnerCursor {
  std::int64_t epoch = 0, batch = 0;  // data::Sampler::State
};

// What a run of virtual learners needs beyond the server's state to continue
// exactly (written at an update, when no gradient is pending at the server):
// the virtual time, the event queue and each learner's state. Per-learner
// arrays have one entry per learner; weights and inc hold learners x
// n_params floats, learner-major (weights: what each learner holds; inc, its
// local momentum, and centre, EASGD's: only where the protocol has them).
struct VirtualState {
  double now = 0;
  std::uint64_t seq = 0;  // events scheduled so far (ties in the queue are broken by it)
  std::vector<double> event_time;
  std::vector<std::uint64_t> event_seq;
  std::vector<std::int32_t> event_learner;
  std::vector<std::int64_t> timestamp, steps;  // clock of the weights held; minibatches done
  std::vector<LearnerCursor> cursors;          // each learner's sampler
  std::vector<LearnerTiming> timing;           // virtual times so far
  std::vector<double> push_at;                 // when its pending push reached the server
  std::vector<std::uint64_t> timing_rng;       // the timing model's generator states
  std::vector<float> weights, inc;
  std::vector<float> centre;                   // EASGD: the centre each learner last received
  std::vector<std::int32_t> held;              // SSP: learners waiting for the slowest
  bool empty() const { return timestamp.empty(); }
};

struct Checkpoint {
  std::int32_t schema_version = kCheckpointSchemaVersion;
  std::string run_id, model;
  std::string config_hash;            // refuse to resume a different config
  std::int64_t n_params = 0;          // whole model
  std::int32_t shard_index = 0, shard_count = 1;
  std::int64_t shard_offset = 0;      // first parameter of this shard
  std::int64_t clock = 0;             // server updates done
  std::int64_t schedule_step = 0;     // position in the learning-rate schedule
  double epochs = 0;
  double wall_s = 0;                  // training time so far
  std::vector<float> weights, momentum;  // this shard
  std::vector<LearnerCursor> cursors;    // one per learner
  std::vector<std::uint64_t> rng_state;  // opaque RNG words (dropout etc.)
  RunResult progress;                    // series so far, to continue the results
  VirtualState virtual_state;            // virtual runs only (group /virtual); else empty
};

// Same atomic write as write_results.
void write_checkpoint(const std::string& path, const Checkpoint& c);
// Checks the magic attribute "asgd-checkpoint" and the schema version first;
// a truncated, corrupt or foreign file is an asgd::Error naming the path.
// Also refused: a 1-shard checkpoint whose weight count is not n_params,
// negative or non-finite clock / epochs / times / cursors, and (when /progress
// holds the run's config) a clock or epoch count past the run's end.
Checkpoint read_checkpoint(const std::string& path);

// What a trainer expects of a checkpoint it resumes or warm-starts from.
// Every trainer checks with check_checkpoint() before it copies anything.
struct CheckpointExpect {
  std::string config_hash;        // empty: not checked (a warm start)
  std::string model;              // empty: not checked
  std::int64_t n_params = -1;     // whole model; -1: not checked
  std::int32_t shard_count = 1, shard_index = 0;
  std::int64_t shard_offset = 0;
  std::int64_t shard_len = -1;    // weights in this shard; -1: n_params / shard_count for 1 shard
  std::int64_t learners = -1;     // cursors; -1: not checked
  std::int64_t max_clock = -1;    // updates of the whole run; -1: not checked
  double max_epochs = -1;         // epochs of the whole run (+ one update's worth); < 0: not checked
  bool finite_weights = false;    // every weight a finite number (a warm start)
  const char* what = "checkpoint";  // "checkpoint" or "warm start checkpoint", for messages
};
// Throws asgd::Error "<path>: <what> ..." naming the first mismatch.
void check_checkpoint(const Checkpoint& ck, const std::string& path, const CheckpointExpect& want);

// Version string of the HDF5 library, "1.10.8".
std::string hdf5_version();

}  // namespace asgd::io
