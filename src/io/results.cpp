// Results files: root attributes plus /updates, /evals, /staleness, /learners
// and /summary, as documented in results/README.md.
#include "io/results.hpp"

#include "common/nesting.hpp"
#include "common/text.hpp"
#include "io/h5_util.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace asgd::io {

namespace h5 {

namespace {

// A value as a message shows it: the first 60 characters, control characters
// and bytes that are not UTF-8 text escaped.
std::string shown(const std::string& v) { return shorten(v, 60); }

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
  write_column(loc, "clock_spread", rows, &UpdateRecord::clock_spread);
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
  if (has_link(loc, "clock_spread")) read_column(loc, "clock_spread", rows, &UpdateRecord::clock_spread, false);
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
  if (std::any_of(rows.begin(), rows.end(), [](const LearnerTiming& t) { return t.pushed >= 0; }))
    write_column(loc, "pushed", rows, &LearnerTiming::pushed);
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
  // MPI runs since the learners' own push counts are recorded
  if (has_link(loc, "pushed")) read_column(loc, "pushed", rows, &LearnerTiming::pushed, false);
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
  write_attr(loc, "warm_up_s", s.warm_up_s);
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
  // files written before the warm-up was on the clock have no such attribute
  if (has_attribute(loc, "warm_up_s")) s.warm_up_s = read_attr_f64(loc, "warm_up_s");
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
  write_attr(loc, "mode", std::string(to_text(r.mode)));
  write_attr(loc, "status", std::string(to_text(r.status)));
  write_attr(loc, "model", r.model);
  write_attr(loc, "protocol", r.protocol);
  write_attr(loc, "timing_model", r.timing_model_json);
  if (!r.transport.empty()) write_attr(loc, "transport", r.transport);
  if (!r.weights.empty()) write_attr(loc, "weights", r.weights);
  write_attr(loc, "machine", r.machine_json);
  write_attr(loc, "train_started", r.train_started);
  write_attr(loc, "train_finished", r.train_finished);
  write_attr(loc, "created", utc_now_iso8601());

  write_updates(loc, r.updates);
  write_evals(loc, r.evals);
  {
    Group g = create_group(loc, "staleness");
    write_vector(Loc{g.get(), join(loc.name, "staleness")}, "histogram", r.staleness_histogram);
  }
  if (!r.minibatch_error.empty()) {
    Group g = create_group(loc, "minibatches");
    write_vector(Loc{g.get(), join(loc.name, "minibatches")}, "error", r.minibatch_error);
  }
  write_learners(loc, r.learners);
  write_summary(loc, r.summary);
}

RunResult read_run_result(const Loc& loc) {
  if (!has_attribute(loc, "schema_version"))
    throw Error(where(loc) + "not an asgd results file (no schema_version attribute)");
  RunResult r;
  r.schema_version = read_attr_i32(loc, "schema_version");
  if (r.schema_version > kResultsSchemaVersion)
    throw Error(where(loc) + "schema version " + std::to_string(r.schema_version) +
                " is newer than this build (" + std::to_string(kResultsSchemaVersion) + ")");
  if (r.schema_version < 1) throw Error(where(loc) + "invalid schema version " + std::to_string(r.schema_version));
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
  const std::string mode = read_attr_str(loc, "mode"), status = read_attr_str(loc, "status");
  const auto parsed_mode = parse_run_mode(mode);
  const auto parsed_status = parse_run_status(status);
  if (!parsed_status) throw Error(where(loc) + "status \"" + shown(status) + "\" is not completed, diverged or failed");
  if (!parsed_mode) throw Error(where(loc) + "mode \"" + shown(mode) + "\" is not real or virtual");
  r.mode = *parsed_mode;
  r.status = *parsed_status;
  r.model = read_attr_str(loc, "model");
  r.protocol = read_attr_str(loc, "protocol");
  r.timing_model_json = read_attr_str(loc, "timing_model");
  // written since the transport is recorded; older files have none
  if (has_attribute(loc, "transport")) r.transport = read_attr_str(loc, "transport");
  if (has_attribute(loc, "weights")) r.weights = read_attr_str(loc, "weights");
  // written since the machine record; older files have neither
  if (has_attribute(loc, "machine")) r.machine_json = read_attr_str(loc, "machine");
  if (has_attribute(loc, "train_started")) r.train_started = read_attr_f64(loc, "train_started");
  if (has_attribute(loc, "train_finished")) r.train_finished = read_attr_f64(loc, "train_finished");
  // Required for a well-formed file; RunResult has no field for it.
  read_attr_str(loc, "created");

  r.updates = read_updates(loc);
  r.evals = read_evals(loc);
  {
    Group g = open_group(loc, "staleness");
    r.staleness_histogram = read_vector<std::int64_t>(Loc{g.get(), join(loc.name, "staleness")}, "histogram");
  }
  if (has_link(loc, "minibatches")) {  // virtual nsync runs only
    Group g = open_group(loc, "minibatches");
    r.minibatch_error = read_vector<float>(Loc{g.get(), join(loc.name, "minibatches")}, "error");
  }
  r.learners = read_learners(loc);
  r.summary = read_summary(loc);
  return r;
}

RunEnd run_end_of(const std::string& config_json) {
  RunEnd end;
  const auto j = parse_json_bounded<nlohmann::json>(config_json);
  if (j.is_discarded() || !j.is_object()) return end;
  end.object = true;
  double n_sync = 1;
  if (const auto it = j.find("n_sync"); it != j.end() && it->is_number() && it->get<double>() >= 1)
    n_sync = it->get<double>();
  if (const auto it = j.find("epochs"); it != j.end() && it->is_number() && std::isfinite(it->get<double>()))
    end.max_epochs = it->get<double>() + n_sync + 1e-6;
  if (const auto it = j.find("max_steps"); it != j.end() && it->is_number_integer())
    end.max_steps = std::max<std::int64_t>(0, it->get<std::int64_t>());
  return end;
}

}  // namespace h5

namespace {

using Problems = std::vector<std::string>;

bool time_ok(double v) { return std::isfinite(v) && v >= 0; }
bool fraction_ok(double v) { return std::isnan(v) || (v >= 0 && v <= 1); }
std::string fmt_d(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return std::string(buf);
}

// The first bad row of a column: "<table>/<column> row i: <value(i)>".
template <class Bad, class Text>
void first_bad_row(Problems& p, const char* table, std::size_t n, const char* column, Bad bad, Text value) {
  for (std::size_t i = 0; i < n; ++i)
    if (bad(i)) {
      p.push_back(std::string(table) + "/" + column + " row " + std::to_string(i) + ": " + value(i));
      return;
    }
}

// The config fields reports read as counts: learners (1..65536, as train
// allows) and batch (>= 1), when present (older files may lack one).
void config_problems(const std::string& config_json, Problems& p) {
  const auto j = parse_json_bounded<nlohmann::json>(config_json);
  if (!j.is_object()) return;
  for (const auto& [key, most] : {std::pair<const char*, std::int64_t>{"learners", 65536}, {"batch", 1LL << 40}})
    if (j.contains(key) &&
        (!j[key].is_number_integer() || j[key].get<std::int64_t>() < 1 || j[key].get<std::int64_t>() > most))
      p.push_back(fmt::format("config {} {} is not a whole number in 1..{}", key, h5::shown(j[key].dump()), most));
}

// Run id, the JSON attributes and the training interval.
void header_problems(const RunResult& r, Problems& p) {
  auto need = [&](bool ok, const std::string& msg) {
    if (!ok) p.push_back(msg);
  };
  need(!r.run_id.empty() && r.run_id.find('/') == std::string::npos && r.run_id != "." &&
           r.run_id != ".." && std::none_of(r.run_id.begin(), r.run_id.end(), [](char c) {
             return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
           }),
       "run_id \"" + h5::shown(r.run_id) + "\" is not a file name");
  auto json_object = [&](const char* what, const std::string& text) {  // too deep: said as such
    if (const std::string deep = json_nesting_problem(text, what); !deep.empty()) return need(false, deep);
    need(parse_json_bounded<nlohmann::json>(text).is_object(),
         std::string(what) + " is not a JSON object: \"" + h5::shown(text) + "\"");
  };
  json_object("config", r.config_json);
  config_problems(r.config_json, p);
  json_object("timing_model", r.timing_model_json);
  json_object("machine", r.machine_json);
  // the training interval: both or neither, finite, in order
  need(std::isnan(r.train_started) == std::isnan(r.train_finished) &&
           (std::isnan(r.train_started) ||
            (time_ok(r.train_started) && time_ok(r.train_finished) && r.train_started <= r.train_finished)),
       "train_started " + fmt_d(r.train_started) + " / train_finished " + fmt_d(r.train_finished) +
           " is not an interval of Unix times");
}

// Series: the first bad row of each column is enough.
void series_problems(const RunResult& r, Problems& p) {
  auto rows = [&](const char* table, std::size_t n, const char* column, auto bad, auto value) {
    first_bad_row(p, table, n, column, bad, value);
  };
  const auto& u = r.updates;
  rows("/updates", u.size(), "clock", [&](std::size_t i) { return u[i].clock < 0 || (i > 0 && u[i].clock < u[i - 1].clock); },
       [&](std::size_t i) { return std::to_string(u[i].clock) + " is negative or goes backwards"; });
  rows("/updates", u.size(), "wall_s", [&](std::size_t i) { return !time_ok(u[i].wall_s); },
       [&](std::size_t i) { return fmt_d(u[i].wall_s) + " is not a time"; });
  rows("/updates", u.size(), "gradients", [&](std::size_t i) { return u[i].gradients < 0; },
       [&](std::size_t i) { return std::to_string(u[i].gradients) + " is negative"; });
  rows("/updates", u.size(), "mean_tau", [&](std::size_t i) { return u[i].mean_tau < 0; },
       [&](std::size_t i) { return fmt_d(u[i].mean_tau) + " is negative"; });
  rows("/updates", u.size(), "samples", [&](std::size_t i) { return u[i].samples < 0; },
       [&](std::size_t i) { return std::to_string(u[i].samples) + " is negative"; });
  rows("/updates", u.size(), "train_error", [&](std::size_t i) { return !fraction_ok(u[i].train_error); },
       [&](std::size_t i) { return fmt_d(u[i].train_error) + " is not in [0, 1]"; });
  const auto& e = r.evals;
  rows("/evals", e.size(), "epoch", [&](std::size_t i) { return !time_ok(e[i].epoch); },
       [&](std::size_t i) { return fmt_d(e[i].epoch) + " is not a finite count >= 0"; });
  rows("/evals", e.size(), "clock", [&](std::size_t i) { return e[i].clock < 0 || (i > 0 && e[i].clock < e[i - 1].clock); },
       [&](std::size_t i) { return std::to_string(e[i].clock) + " is negative or goes backwards"; });
  rows("/evals", e.size(), "wall_s", [&](std::size_t i) { return !time_ok(e[i].wall_s); },
       [&](std::size_t i) { return fmt_d(e[i].wall_s) + " is not a time"; });
  rows("/evals", e.size(), "test_error", [&](std::size_t i) { return !fraction_ok(e[i].test_error); },
       [&](std::size_t i) { return fmt_d(e[i].test_error) + " is not in [0, 1]"; });
  rows("/evals", e.size(), "eval_s", [&](std::size_t i) { return !time_ok(e[i].eval_s); },
       [&](std::size_t i) { return fmt_d(e[i].eval_s) + " is not a time"; });
  const auto& h = r.staleness_histogram;
  rows("/staleness", h.size(), "histogram", [&](std::size_t i) { return h[i] < 0; },
       [&](std::size_t i) { return std::to_string(h[i]) + " is negative"; });
  const auto& m = r.minibatch_error;
  rows("/minibatches", m.size(), "error", [&](std::size_t i) { return !fraction_ok(m[i]); },
       [&](std::size_t i) { return fmt_d(m[i]) + " is not in [0, 1]"; });
  const auto& l = r.learners;
  rows("/learners", l.size(), "learner", [&](std::size_t i) { return l[i].learner < 0; },
       [&](std::size_t i) { return std::to_string(l[i].learner) + " is negative"; });
  rows("/learners", l.size(), "times", [&](std::size_t i) {
         return !time_ok(l[i].compute_s) || !time_ok(l[i].wait_s) || !time_ok(l[i].push_s) ||
                !time_ok(l[i].pull_s) || !time_ok(l[i].stage_s);
       },
       [&](std::size_t) { return std::string("a time is negative or not finite"); });
  rows("/learners", l.size(), "gradients/samples", [&](std::size_t i) { return l[i].gradients < 0 || l[i].samples < 0; },
       [&](std::size_t) { return std::string("a count is negative"); });
  rows("/learners", l.size(), "pushed", [&](std::size_t i) { return l[i].pushed < -1; },
       [&](std::size_t i) { return std::to_string(l[i].pushed) + " is neither a count nor -1 (not recorded)"; });
}

// The transport, the summary and the configured run's end.
void summary_problems(const RunResult& r, Problems& p) {
  auto need = [&](bool ok, const std::string& msg) {
    if (!ok) p.push_back(msg);
  };
  auto rows = [&](const char* table, std::size_t n, const char* column, auto bad, auto value) {
    first_bad_row(p, table, n, column, bad, value);
  };
  const auto& e = r.evals;
  need(r.transport.empty() || r.transport == "shared-memory" || r.transport == "messages" ||
           r.transport == "allreduce" || r.transport == "none",
       "transport \"" + h5::shown(r.transport) + "\" is not shared-memory, messages, allreduce or none");
  need(r.weights.empty() || (r.transport == "shared-memory" && (r.weights == "in-place" || r.weights == "copied")),
       "weights \"" + h5::shown(r.weights) + "\" is not in-place or copied with transport shared-memory");
  const Summary& s = r.summary;
  need(fraction_ok(s.target_error), "/summary target_error " + fmt_d(s.target_error) + " is not in [0, 1]");
  need(std::isnan(s.time_to_target_s) || time_ok(s.time_to_target_s),
       "/summary time_to_target_s " + fmt_d(s.time_to_target_s) + " is not a time (or NaN)");
  need(fraction_ok(s.final_test_error), "/summary final_test_error " + fmt_d(s.final_test_error) + " is not in [0, 1]");
  need(fraction_ok(s.best_test_error), "/summary best_test_error " + fmt_d(s.best_test_error) + " is not in [0, 1]");
  need(time_ok(s.warm_up_s) && s.warm_up_s <= s.train_time_s + 1e-9,
       "/summary warm_up_s " + fmt_d(s.warm_up_s) + " is not a time within train_time_s");
  need(time_ok(s.samples_per_s), "/summary samples_per_s " + fmt_d(s.samples_per_s) + " is not a finite rate >= 0");
  need(s.updates >= 0, "/summary updates " + std::to_string(s.updates) + " is negative");
  need(time_ok(s.epochs), "/summary epochs " + fmt_d(s.epochs) + " is not a finite count >= 0");
  need(time_ok(s.train_time_s), "/summary train_time_s " + fmt_d(s.train_time_s) + " is not a time");
  const h5::RunEnd end = h5::run_end_of(r.config_json);
  if (end.max_epochs >= 0) {
    need(!(s.epochs > end.max_epochs),
         "/summary epochs " + fmt_d(s.epochs) + " is beyond the configured run (" +
             fmt_d(end.max_epochs) + " at most)");
    rows("/evals", e.size(), "epoch", [&](std::size_t i) { return e[i].epoch > end.max_epochs; },
         [&](std::size_t i) { return fmt_d(e[i].epoch) + " is beyond the configured run"; });
  }
  if (end.max_steps > 0)
    need(s.updates <= end.max_steps, "/summary updates " + std::to_string(s.updates) +
                                         " is beyond the configured max_steps " +
                                         std::to_string(end.max_steps));
}

}  // namespace

std::vector<std::string> result_problems(const RunResult& r) {
  std::vector<std::string> p;
  header_problems(r, p);
  series_problems(r, p);
  summary_problems(r, p);
  return p;
}

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
    const auto problems = result_problems(r);
    if (!problems.empty()) {
      std::string msg;
      for (std::size_t i = 0; i < problems.size(); ++i) msg += (i ? "; " : "") + problems[i];
      throw Error(msg);
    }
  });
  return r;
}

std::string hdf5_version() {
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
}

}  // namespace asgd::io
