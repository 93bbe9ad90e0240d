// Results files: root attributes plus /updates, /evals, /staleness, /learners
// and /summary, as documented in results/README.md.
#include "io/results.hpp"

#include "io/h5_util.hpp"

namespace asgd::io {

namespace h5 {

namespace {

// Messages for the file root carry only the path; nested layouts (a
// checkpoint's /progress) also name the group.
std::string where(const Loc& loc) { return loc.name == "/" ? "" : loc.name + ": "; }

void write_updates(const Loc& parent, const std::vector<UpdateRecord>& rows) {
  Group g = create_group(parent, "updates");
  const Loc loc{g.get(), join(parent.name, "updates")};
  write_column(loc, "clock", rows, &UpdateRecord::clock);
  write_column(loc, "wall_s", rows, &UpdateRecord::wall_s);
  write_column(loc, "gradients", rows, &UpdateRecord::gradients);
  write_column(loc, "mean_tau", rows, &UpdateRecord::mean_tau);
  write_column(loc, "rate", rows, &UpdateRecord::rate);
  write_column(loc, "train_loss", rows, &UpdateRecord::train_loss);
  write_column(loc, "train_error", rows, &UpdateRecord::train_error);
  write_column(loc, "samples", rows, &UpdateRecord::samples);
}

std::vector<UpdateRecord> read_updates(const Loc& parent) {
  Group g = open_group(parent, "updates");
  const Loc loc{g.get(), join(parent.name, "updates")};
  std::vector<UpdateRecord> rows;
  read_column(loc, "clock", rows, &UpdateRecord::clock, true);
  read_column(loc, "wall_s", rows, &UpdateRecord::wall_s, false);
  read_column(loc, "gradients", rows, &UpdateRecord::gradients, false);
  read_column(loc, "mean_tau", rows, &UpdateRecord::mean_tau, false);
  read_column(loc, "rate", rows, &UpdateRecord::rate, false);
  read_column(loc, "train_loss", rows, &UpdateRecord::train_loss, false);
  read_column(loc, "train_error", rows, &UpdateRecord::train_error, false);
  read_column(loc, "samples", rows, &UpdateRecord::samples, false);
  return rows;
}

void write_evals(const Loc& parent, const std::vector<EvalRecord>& rows) {
  Group g = create_group(parent, "evals");
  const Loc loc{g.get(), join(parent.name, "evals")};
  write_column(loc, "epoch", rows, &EvalRecord::epoch);
  write_column(loc, "clock", rows, &EvalRecord::clock);
  write_column(loc, "wall_s", rows, &EvalRecord::wall_s);
  write_column(loc, "test_loss", rows, &EvalRecord::test_loss);
  write_column(loc, "test_error", rows, &EvalRecord::test_error);
  write_column(loc, "eval_s", rows, &EvalRecord::eval_s);
}

std::vector<EvalRecord> read_evals(const Loc& parent) {
  Group g = open_group(parent, "evals");
  const Loc loc{g.get(), join(parent.name, "evals")};
  std::vector<EvalRecord> rows;
  read_column(loc, "epoch", rows, &EvalRecord::epoch, true);
  read_column(loc, "clock", rows, &EvalRecord::clock, false);
  read_column(loc, "wall_s", rows, &EvalRecord::wall_s, false);
  read_column(loc, "test_loss", rows, &EvalRecord::test_loss, false);
  read_column(loc, "test_error", rows, &EvalRecord::test_error, false);
  read_column(loc, "eval_s", rows, &EvalRecord::eval_s, false);
  return rows;
}

void write_learners(const Loc& parent, const std::vector<LearnerTiming>& rows) {
  Group g = create_group(parent, "learners");
  const Loc loc{g.get(), join(parent.name, "learners")};
  write_column(loc, "learner", rows, &LearnerTiming::learner);
  write_column(loc, "compute_s", rows, &LearnerTiming::compute_s);
  write_column(loc, "wait_s", rows, &LearnerTiming::wait_s);
  write_column(loc, "push_s", rows, &LearnerTiming::push_s);
  write_column(loc, "pull_s", rows, &LearnerTiming::pull_s);
  write_column(loc, "gradients", rows, &LearnerTiming::gradients);
  write_column(loc, "samples", rows, &LearnerTiming::samples);
  write_column(loc, "stage_s", rows, &LearnerTiming::stage_s);
}

std::vector<LearnerTiming> read_learners(const Loc& parent) {
  Group g = open_group(parent, "learners");
  const Loc loc{g.get(), join(parent.name, "learners")};
  std::vector<LearnerTiming> rows;
  read_column(loc, "learner", rows, &LearnerTiming::learner, true);
  read_column(loc, "compute_s", rows, &LearnerTiming::compute_s, false);
  read_column(loc, "wait_s", rows, &LearnerTiming::wait_s, false);
  read_column(loc, "push_s", rows, &LearnerTiming::push_s, false);
  read_column(loc, "pull_s", rows, &LearnerTiming::pull_s, false);
  read_column(loc, "gradients", rows, &LearnerTiming::gradients, false);
  read_column(loc, "samples", rows, &LearnerTiming::samples, false);
  if (has_link(loc, "stage_s")) read_column(loc, "stage_s", rows, &LearnerTiming::stage_s, false);
  return rows;
}

void write_summary(const Loc& parent, const Summary& s) {
  Group g = create_group(parent, "summary");
  const Loc loc{g.get(), join(parent.name, "summary")};
  write_attr(loc, "target_error", s.target_error);
  write_attr(loc, "time_to_target_s", s.time_to_target_s);
  write_attr(loc, "final_test_error", s.final_test_error);
  write_attr(loc, "best_test_error", s.best_test_error);
  write_attr(loc, "samples_per_s", s.samples_per_s);
  write_attr(loc, "updates", s.updates);
  write_attr(loc, "epochs", s.epochs);
  write_attr(loc, "train_time_s", s.train_time_s);
}

Summary read_summary(const Loc& parent) {
  Group g = open_group(parent, "summary");
  const Loc loc{g.get(), join(parent.name, "summary")};
  Summary s;
  s.target_error = read_attr_f64(loc, "target_error");
  s.time_to_target_s = read_attr_f64(loc, "time_to_target_s");
  s.final_test_error = read_attr_f64(loc, "final_test_error");
  s.best_test_error = read_attr_f64(loc, "best_test_error");
  s.samples_per_s = read_attr_f64(loc, "samples_per_s");
  s.updates = read_attr_i64(loc, "updates");
  s.epochs = read_attr_f64(loc, "epochs");
  s.train_time_s = read_attr_f64(loc, "train_time_s");
  return s;
}

}  // namespace

void write_run_result(const Loc& loc, const RunResult& r) {
  write_attr(loc, "schema_version", r.schema_version);
  write_attr(loc, "run_id", r.run_id);
  write_attr(loc, "suite", r.suite);
  write_attr(loc, "config", r.config_json);
  write_attr(loc, "git_commit", r.git_commit);
  write_attr(loc, "host", r.host);
  write_attr(loc, "mpi_version", r.mpi_version);
  write_attr(loc, "kokkos_version", r.kokkos_version);
  write_attr(loc, "hdf5_version", hdf5_version());
  write_attr(loc, "slurm_job_id", r.slurm_job_id);
  write_attr(loc, "slurm_array_job_id", r.slurm_array_job_id);
  write_attr(loc, "slurm_array_task_id", r.slurm_array_task_id);
  write_attr(loc, "mode", r.mode);
  write_attr(loc, "status", r.status);
  write_attr(loc, "model", r.model);
  write_attr(loc, "protocol", r.protocol);
  write_attr(loc, "timing_model", r.timing_model_json);
  write_attr(loc, "created", utc_now_iso8601());

  write_updates(loc, r.updates);
  write_evals(loc, r.evals);
  {
    Group g = create_group(loc, "staleness");
    write_vector(Loc{g.get(), join(loc.name, "staleness")}, "histogram", r.staleness_histogram);
  }
  write_learners(loc, r.learners);
  write_summary(loc, r.summary);
}

RunResult read_run_result(const Loc& loc) {
  if (!has_attribute(loc, "schema_version")) {
    throw Error(where(loc) + "not an asgd results file (no schema_version attribute)");
  }
  RunResult r;
  r.schema_version = read_attr_i32(loc, "schema_version");
  if (r.schema_version > kResultsSchemaVersion) {
    throw Error(where(loc) + "schema version " + std::to_string(r.schema_version) +
                " is newer than this build (" + std::to_string(kResultsSchemaVersion) + ")");
  }
  if (r.schema_version < 1) {
    throw Error(where(loc) + "invalid schema version " + std::to_string(r.schema_version));
  }
  r.run_id = read_attr_str(loc, "run_id");
  r.suite = read_attr_str(loc, "suite");
  r.config_json = read_attr_str(loc, "config");
  r.git_commit = read_attr_str(loc, "git_commit");
  r.host = read_attr_str(loc, "host");
  r.mpi_version = read_attr_str(loc, "mpi_version");
  r.kokkos_version = read_attr_str(loc, "kokkos_version");
  r.hdf5_version = read_attr_str(loc, "hdf5_version");
  r.slurm_job_id = read_attr_str(loc, "slurm_job_id");
  r.slurm_array_job_id = read_attr_str(loc, "slurm_array_job_id");
  r.slurm_array_task_id = read_attr_str(loc, "slurm_array_task_id");
  r.mode = read_attr_str(loc, "mode");
  r.status = read_attr_str(loc, "status");
  r.model = read_attr_str(loc, "model");
  r.protocol = read_attr_str(loc, "protocol");
  r.timing_model_json = read_attr_str(loc, "timing_model");
  // Required for a well-formed file; RunResult has no field for it.
  read_attr_str(loc, "created");

  r.updates = read_updates(loc);
  r.evals = read_evals(loc);
  {
    Group g = open_group(loc, "staleness");
    r.staleness_histogram = read_vector<std::int64_t>(Loc{g.get(), join(loc.name, "staleness")}, "histogram");
  }
  r.learners = read_learners(loc);
  r.summary = read_summary(loc);
  return r;
}

}  // namespace h5

void write_results(const std::string& path, const RunResult& r) {
  h5::atomic_write(path, [&](const h5::Loc& root) { h5::write_run_result(root, r); });
}

RunResult read_results(const std::string& path) {
  RunResult r;
  h5::read_file(path, [&](const h5::Loc& root) {
    // A checkpoint also has schema_version; say what it is instead of
    // complaining about the first missing results attribute.
    if (h5::has_attribute(root, "magic") && h5::read_attr_str(root, "magic") == h5::kCheckpointMagic) {
      throw Error("is an asgd checkpoint, not a results file");
    }
    r = h5::read_run_result(root);
  });
  return r;
}

std::string hdf5_version() {
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
}

}  // namespace asgd::io
