// validate(): each field's own checks from the field table (fields.hpp), in
// its order, then the checks that involve several fields.
#include <fmt/format.h>

#include <cmath>

#include "common/error.hpp"
#include "config/config.hpp"
#include "config/fields.hpp"
#include "perf/profile.hpp"
#include "protocol/registry.hpp"

namespace asgd {

namespace {

// Largest synthetic image side and channel count: their product stays far
// from overflowing the models' parameter counts.
// --help states these (fields.cpp); tests/unit/test_config.cpp holds both to the same bounds
constexpr index_t kMaxSyntheticSide = index_t{1} << 20;
constexpr index_t kMaxSyntheticChannels = 4096;
constexpr std::int32_t kMaxClasses = 1 << 20;
constexpr index_t kMaxSamples = index_t{1} << 40;

void check_synthetic(const data::DatasetSpec& d, std::vector<std::string>& p) {
  auto need = [&](bool ok, std::string msg) {
    if (!ok) p.push_back(std::move(msg));
  };
  need(d.h >= 1 && d.w >= 1 && d.c >= 1,
       fmt::format("synthetic shape {}x{}x{} must be positive (--synthetic-size, --synthetic-channels)", d.h, d.w,
                   d.c));
  need(d.h <= kMaxSyntheticSide && d.w <= kMaxSyntheticSide && d.c <= kMaxSyntheticChannels,
       fmt::format("synthetic shape {}x{}x{} is too large (--synthetic-size at most {}, "
                   "--synthetic-channels at most {})",
                   d.h, d.w, d.c, kMaxSyntheticSide, kMaxSyntheticChannels));
  need(d.classes >= 2 && d.classes <= kMaxClasses,
       fmt::format("synthetic classes {} must be in 2..{} (--synthetic-classes)", d.classes, kMaxClasses));
  need(d.n_train >= 1 && d.n_test >= 1,
       fmt::format("synthetic sample counts must be >= 1 (--synthetic-train {}, --synthetic-test {})", d.n_train,
                   d.n_test));
  need(d.n_train <= kMaxSamples && d.n_test <= kMaxSamples,
       fmt::format("synthetic sample counts must be at most {} (--synthetic-train {}, --synthetic-test {})",
                   kMaxSamples, d.n_train, d.n_test));
}

// A profile is read and checked before any work; it must have a compute
// time for the run's model, batch and threads (or a device throughput).
void check_profile(const TrainConfig& c, std::vector<std::string>& p) {
  if (c.profile.empty()) return;
  if (!c.virtual_learners) {
    p.push_back("--profile is for virtual learners (--virtual): real runs are measured, not modelled");
    return;
  }
  // the profile is the calibration: --timing calibrate (the default) draws
  // like normal, from the profile's mean and coefficient of variation
  if (c.compute_s != 0 || c.comm_s != 0) {
    p.push_back("with --profile the profile gives the compute and communication times: no --compute-s or --comm-s");
    return;
  }
  try {  // the model is of parameter servers: a protocol without them is not modelled
    if (!protocol::make_protocol(protocol_options(c))->uses_servers()) {
      p.push_back(fmt::format("--profile models parameter-server shards; protocol {} has none (not modelled)",
                              c.protocol));
      return;
    }
  } catch (const Error&) {
    // a bad protocol or option: its own check says so
  }
  try {
    const perf::Profile prof = perf::read_profile(perf::find_profile(c.profile));
    if (!perf::compute_time(prof, c.model, static_cast<int>(c.batch), c.threads, 0))
      p.push_back(perf::no_compute_time(prof, c.model, static_cast<int>(c.batch), c.threads));
  } catch (const Error& e) {
    p.push_back(e.what());
  }
}

// The checks that involve more than one field.
void check_across(const TrainConfig& c, std::vector<std::string>& p) {
  auto need = [&](bool ok, std::string msg) {
    if (!ok) p.push_back(std::move(msg));
  };
  need(c.device == "cpu" || !c.virtual_learners,
       "virtual learners run on the CPU (device cuda is for real learners)");
  need(c.warm_start.empty() || c.warm_steps == 0, "warm start: give a checkpoint or warm steps, not both");
  need(c.compute_s >= 0 && c.comm_s >= 0 && std::isfinite(c.compute_s) && std::isfinite(c.comm_s),
       "compute_s and comm_s must be >= 0 and finite");
  // a virtual clock summed over a run stays far from overflow (1e6 s: 11.6 days a minibatch)
  for (const auto& [name, v] : {std::pair{"compute_s", c.compute_s}, std::pair{"comm_s", c.comm_s}})
    need(!(v > perf::kMaxSeconds), fmt::format("{} {:g} is beyond {:g} s (a typo?)", name, v, perf::kMaxSeconds));
  if (c.data.kind == "synthetic") check_synthetic(c.data, p);
  check_profile(c, p);
}

}  // namespace

std::vector<std::string> validate(const TrainConfig& c) {
  std::vector<std::string> p;
  for (const auto& f : config::fields()) {
    config::check_range(c, f, p);
    if (f.check) f.check(c, p);
  }
  check_across(c, p);
  return p;
}

std::vector<std::string> validate_run(const TrainConfig& c) {
  std::vector<std::string> p = validate(c);
  if (!c.virtual_learners) {  // the timing model's options change a real run's id and nothing else
    const TrainConfig d;
    const char* set = c.timing != d.timing                     ? "--timing"
                      : c.compute_s != d.compute_s               ? "--compute-s"
                      : c.compute_cv != d.compute_cv             ? "--compute-cv"
                      : c.comm_s != d.comm_s                     ? "--comm-s"
                      : c.straggler.has_value()                  ? "--straggler"
                      : c.straggler_factor != d.straggler_factor ? "--straggler-factor"
                                                                 : nullptr;
    if (set != nullptr)
      p.push_back(fmt::format("{} is for virtual learners (--virtual): real runs are measured, not modelled", set));
  }
  return p;
}

void check(const TrainConfig& c) {
  const auto problems = validate_run(c);
  if (problems.empty()) return;
  std::string msg = fmt::format("invalid configuration ({} problem{}): ", problems.size(),
                                problems.size() == 1 ? "" : "s");
  for (std::size_t i = 0; i < problems.size(); ++i) msg += (i ? "; " : "") + problems[i];
  throw Error(msg);
}

protocol::Options protocol_options(const TrainConfig& c) {
  protocol::Options o;
  o.protocol = c.protocol;
  o.lr_policy = c.lr_policy;
  o.merge = c.merge;
  o.lr = c.lr;
  o.momentum = c.momentum;
  o.learners = c.learners;
  o.servers = c.servers;
  o.softsync_n = c.softsync_n;
  o.n_sync = c.n_sync;
  o.staleness = c.staleness;
  o.tau = c.tau;
  o.alpha = c.alpha;
  o.lambda_dc = c.lambda_dc;
  o.server_lr = c.server_lr;
  o.server_momentum = c.server_momentum;
  return o;
}

}  // namespace asgd
