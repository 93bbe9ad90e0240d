// The field table of TrainConfig (fields.hpp): one row per field.
#include "config/fields.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "common/blas_env.hpp"  // kMaxThreadsPerRank
#include "nn/zoo.hpp"
#include "protocol/registry.hpp"

namespace asgd::config {
namespace {

using C = TrainConfig;
using D = data::DatasetSpec;
using Problems = std::vector<std::string>;

bool finite(double v) { return std::isfinite(v); }

void need(Problems& p, bool ok, std::string msg) {
  if (!ok) p.push_back(std::move(msg));
}

// "<what> '<v>' unknown (a, b, c)" unless v is one of names.
void one_of(Problems& p, const char* what, const std::string& v, const std::vector<std::string>& names) {
  need(p, std::find(names.begin(), names.end(), v) != names.end(),
       fmt::format("{} '{}' unknown ({})", what, shorten(v), fmt::join(names, ", ")));
}

// Text that JSON can hold: a configuration is stored as JSON (suite configs,
// results files, checkpoints), and nlohmann::json refuses to write a string
// that is not valid UTF-8 (a path from the command line or a YAML file can be
// any bytes).
bool json_text(const std::string& v) {
  try {
    (void)nlohmann::json(v).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

void utf8_path(Problems& p, const char* what, const std::string& v) {
  need(p, json_text(v),
       fmt::format("{} '{}' is not valid UTF-8 (configurations are stored as JSON)", what, shorten(v)));
}

constexpr std::size_t kMaxPath = 4096;
constexpr int kMaxRanks = 65536;
constexpr int kMaxThreads = kMaxThreadsPerRank;  // Kokkos 3.4 OpenMP's pool

// A registered name (or a problem listing the known ones), and the chosen
// type's own checks.
template <class T>
void registered(Problems& p, const char* what, const std::string& name,
                const std::vector<protocol::Entry<T>>& entries, const C& c) {
  std::vector<std::string> names;
  for (const auto& e : entries) names.emplace_back(e.name);
  one_of(p, what, name, names);
  for (const auto& e : entries)
    if (name == e.name) e.check(protocol_options(c), p);
}

// The checks of protocol `name` when another one is chosen: its option must
// still be in range (a hardsync config with softsync n 3 of 2 learners is
// refused, as before the registry).
void unless_chosen(const char* name, const C& c, Problems& p) {
  if (c.protocol == name) return;
  for (const auto& e : protocol::protocols())
    if (std::string(name) == e.name) e.check(protocol_options(c), p);
}

// An option that only some registered types read (their entries name its
// key) is refused under any other: a protocol's under another protocol, a
// merge rule's under another merge rule. Its domain is checked all the same,
// where the entry says how (a given value is checked whatever it is).
template <class T>
void read_by(const std::vector<protocol::Entry<T>>& entries, const C& c, const std::string& chosen,
             const char* what, const char* chosen_prefix, const char* key, const char* flag, bool set, Problems& p) {
  if (!set) return;
  const auto owners = protocol::readers_of(entries, key);
  std::vector<std::string> names;
  for (const auto* e : owners) names.emplace_back(e->name);
  if (std::find(names.begin(), names.end(), chosen) != names.end()) return;
  if (!owners.empty())
    for (const auto& r : owners.front()->reads)
      if (r.key == key && r.check) r.check(protocol_options(c), p);
  p.push_back(fmt::format("{} is an option of {} {}, not of {}{}", flag, what, fmt::join(names, " or "),
                          chosen_prefix, shorten(chosen)));
}

void owned_by(const char* key, const char* flag, bool set, const C& c, Problems& p) {
  read_by(protocol::protocols(), c, c.protocol, "protocol", "", key, flag, set, p);
}

void merge_option(const char* key, const char* flag, bool set, const C& c, Problems& p) {
  read_by(protocol::merge_rules(), c, merge_rule(c), "merge", "merge ", key, flag, set, p);
}

}  // namespace

// A row names only what differs from Field's defaults (designated members);
// GCC would warn about every member a row leaves out.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

const std::vector<Field<D>>& dataset_fields() {
  static const std::vector<Field<D>> table = {
      {.key = "kind", .member = &D::kind, .option = {"--dataset", "fashion-mnist, mnist, cifar10 or synthetic"},
       .check = [](const D& d, Problems& p) {
         one_of(p, "dataset", d.kind, {"fashion-mnist", "mnist", "cifar10", "synthetic"});
       }},
      {.key = "dir", .member = &D::dir,
       .option = {"--data-dir", "Folder of the dataset files (default: /usr/share/datasets/<dataset>, "
                                "./data/cifar-10-batches-bin for cifar10)"},
       .check = [](const D& d, Problems& p) {
         need(p, d.dir.size() <= kMaxPath, fmt::format("data folder '{}' is too long", shorten(d.dir)));
         utf8_path(p, "data folder", d.dir);
       }},
      // synthetic only: checked with the dataset (validate.cpp's check_synthetic)
      {.key = "shape", .member = Hwc{}, .option = {"--synthetic-size", "Synthetic image height = width (default 28)"},
       .option2 = {"--synthetic-channels", "Synthetic image channels"}, .range = depends("in 1..1048576")},
      {.key = "classes", .member = &D::classes, .option = {"--synthetic-classes", "Synthetic classes"},
       .range = depends("in 2..1048576")},
      {.key = "n_train", .member = &D::n_train, .option = {"--synthetic-train", "Synthetic training samples"},
       .range = depends("in 1..1099511627776")},
      {.key = "n_test", .member = &D::n_test, .option = {"--synthetic-test", "Synthetic test samples"},
       .range = depends("in 1..1099511627776")},
      {.key = "seed", .member = &D::seed},
      {.key = "subtract_mean", .member = &D::subtract_mean,
       .option = {"!--no-mean-subtraction", "Do not subtract the per-pixel training mean"}},
  };
  return table;
}

namespace {

// The model, the data and the update rule.
std::vector<Field<C>> model_fields() {
  return {
      {.key = "model", .member = &C::model,
       .option = {"--model", "Model from the zoo: mlp, lenet, cifar10-18pct, alexnet"}, .suite = {.token = ""},
       .check = [](const C& c, Problems& p) { one_of(p, "model", c.model, nn::model_names()); }},
      {.key = "dataset", .member = Nested{}, .suite = {.token = ""},
       .check = [](const C& c, Problems& p) {
         for (const auto& f : dataset_fields()) {
           check_range(c.data, f, p);
           if (f.check) f.check(c.data, p);
         }
       }},
      {.key = "batch", .member = &C::batch, .option = {"--batch,--mu", "Samples per learner minibatch (mu)"},
       .suite = {.token = "mu"}, .range = at_least(1)},
      {.key = "lr", .member = &C::lr, .option = {"--lr", "Base learning rate alpha0"}, .range = above(0)},
      {.key = "momentum", .member = &C::momentum, .option = {"--momentum", "Momentum"}, .range = half_open(0, 1)},
      {.key = "weight_decay", .member = &C::weight_decay, .option = {"--weight-decay", "Weight decay (L2)"},
       .range = at_least(0)},
      {.key = "lr_steps", .member = &C::lr_steps,
       .option = {"--lr-steps", "Epochs at which the rate is multiplied by --lr-gamma"},
       .check = [](const C& c, Problems& p) {
         need(p, std::is_sorted(c.lr_steps.begin(), c.lr_steps.end()), "lr steps must be increasing");
         for (double s : c.lr_steps)
           if (!(s >= 0 && finite(s))) {
             p.push_back(fmt::format("lr step {} must be a finite epoch >= 0", s));
             break;
           }
       },
       .range = depends(">= 0, increasing")},
      {.key = "lr_gamma", .member = &C::lr_gamma, .option = {"--lr-gamma", "Step-schedule factor"}, .range = above(0)},
  };
}

// How long it trains, when it evaluates and checkpoints, what counts as done.
std::vector<Field<C>> schedule_fields() {
  return {
      {.key = "epochs", .member = &C::epochs, .option = {"--epochs", "Training epochs (fractions allowed)"},
       .check = [](const C& c, Problems& p) {
         if (!finite(c.epochs))
           p.push_back(fmt::format("epochs {} must be a finite number", c.epochs));
         else if (!(c.epochs > 0))
           p.push_back(fmt::format("epochs {} must be > 0", c.epochs));
         else if (c.epochs > kMaxEpochs)
           p.push_back(fmt::format("epochs {} is beyond {} (a typo?)", c.epochs, kMaxEpochs));
       },
       .range = depends("in (0, 1e6]")},
      {.key = "max_steps", .member = &C::max_steps,
       .option = {"--max-steps", "Stop after this many updates (0: no limit)"},
       .range = at_least(0)},
      {.key = "eval_every", .member = &C::eval_every, .option = {"--eval-every", "Epochs between test evaluations"},
       .range = above(0)},
      {.key = "eval_batch", .member = &C::eval_batch, .option = {"--eval-batch", "Batch size for evaluation"},
       .range = at_least(1)},
      {.key = "eval_samples", .member = &C::eval_samples,
       .option = {"--eval-samples", "Test samples per evaluation (0: all)"},
       .range = at_least(0)},
      {.key = "checkpoint_every", .member = &C::checkpoint_every,
       .option = {"--checkpoint-every", "Updates between checkpoints (0: never)"},
       .hashed = false, .range = at_least(0)},
      {.key = "seed", .member = &C::seed, .option = {"--seed", "Seed of initialisation, sampling and dropout"},
       .suite = {.token = "s"}, .range = depends("in 0..18446744073709551615")},
      {.key = "target_error", .member = &C::target_error,
       .option = {"--target-error", "Test error (fraction) for time-to-target"},
       .range = closed(0, 1)},
      {.key = "diverge_loss", .member = &C::diverge_loss,
       .option = {"--diverge-loss", "Training loss above which the run ends as diverged"},
       .range = above(0)},
  };
}

// Where it computes and where its files go.
std::vector<Field<C>> placement_fields() {
  return {
      {.key = "threads",
       .member = &C::threads,
       .option = {"--threads", "Threads per rank for Kokkos and the BLAS (1: OMP_NUM_THREADS when set)"},
       .hashed = false, .range = closed(1, kMaxThreads)},
      {.key = "device", .member = &C::device,
       .option = {"--device", "Where learners compute: cpu, or cuda (one GPU per learner by node-local rank; "
                              "ASGD_GPU_DEVICE=k forces one; needs a build with the cuda preset)"},
       .check = [](const C& c, Problems& p) { one_of(p, "device", c.device, {"cpu", "cuda"}); },
       // only when not the default, so CPU configurations keep their hashes and run ids
       .only_if_changed = true},
      {.key = "results_dir", .member = &C::results_dir, .option = {"--results", "Results folder"},
       .suite = {.reserved = "the results folder is given when the suite is run"},
       .check = [](const C& c, Problems& p) {
         need(p, !c.results_dir.empty(), "results folder must not be empty");
         need(p, c.results_dir.size() <= kMaxPath,
              fmt::format("results folder '{}' is too long ({} characters)", shorten(c.results_dir),
                          c.results_dir.size()));
         utf8_path(p, "results folder", c.results_dir);
       },
       .hashed = false},
      {.key = "suite", .member = &C::suite, .option = {"--suite", "Suite name (results go to <results>/<suite>/)"},
       .suite = {.reserved = "it is the suite's 'name'"},
       .check = [](const C& c, Problems& p) {
         if (auto why = name_problem("suite", c.suite, kMaxSuiteName); !why.empty()) p.push_back(why);
       },
       .hashed = false},
      {.key = "run_id", .member = &C::run_id, .option = {"--run-id", "Run id (default: derived from the configuration)"},
       .suite = {.reserved = "run ids are derived from the suite"},
       .check = [](const C& c, Problems& p) {
         if (!c.run_id.empty())
           if (auto why = name_problem("run id", c.run_id, kMaxRunId); !why.empty()) p.push_back(why);
       },
       .hashed = false},
  };
}

// Learners, servers, the protocol and its learner counts.
std::vector<Field<C>> parallel_fields() {
  return {
      {.key = "learners", .member = &C::learners, .option = {"--learners", "Learner ranks (lambda)"},
       .suite = {.check_alone = false, .has_min = true, .min = 1, .token = "L"},
       .range = closed(1, kMaxRanks)},
      {.key = "servers", .member = &C::servers, .option = {"--servers", "Parameter-server shards"},
       .range = closed(1, kMaxRanks)},
      {.key = "protocol", .member = &C::protocol, .option = {"--protocol", "hardsync, softsync, nsync, allreduce, ssp, easgd or dcasgd"},
       .suite = {.token = ""},
       .check = [](const C& c, Problems& p) { registered(p, "protocol", c.protocol, protocol::protocols(), c); }},
      {.key = "softsync_n", .member = &C::softsync_n, .option = {"--n", "n of n-softsync (1..learners)"},
       .suite = {.check_alone = false, .has_min = true, .min = 1, .token = "n"},
       .check = [](const C& c, Problems& p) { unless_chosen("softsync", c, p); }, .range = depends("in 1..learners")},
      {.key = "n_sync", .member = &C::n_sync, .option = {"--n-sync", "Local steps between pushes for nsync"},
       .suite = {.token = "nsync"},
       .check = [](const C& c, Problems& p) { unless_chosen("nsync", c, p); }, .range = depends(">= 1")},
  };
}

// The options of registered protocols, rate policies and merge rules, and the warm start.
std::vector<Field<C>> protocol_option_fields() {
  return {
      {.key = "staleness", .member = &C::staleness,
       .option = {"--staleness", "ssp: clocks a learner may run ahead of the slowest (default 3)"},
       .suite = {.check_alone = false, .token = "st"}, .check = [](const C& c, Problems& p) { owned_by("staleness", "--staleness", c.staleness.has_value(), c, p); },
       .only_if_changed = true, .range = depends("in 0..1000000")},
      {.key = "tau", .member = &C::tau,
       .option = {"--tau", "easgd: local steps between elastic exchanges (default 10)"},
       .suite = {.check_alone = false, .token = "tau"}, .check = [](const C& c, Problems& p) { owned_by("tau", "--tau", c.tau.has_value(), c, p); },
       .only_if_changed = true, .range = depends("in 1..1000000")},
      {.key = "alpha", .member = &C::alpha,
       .option = {"--alpha", "easgd: elastic moving rate in (0, 1) (default 0.9 / learners)"},
       .suite = {.check_alone = false, .token = "alpha"}, .check = [](const C& c, Problems& p) { owned_by("alpha", "--alpha", c.alpha.has_value(), c, p); },
       .only_if_changed = true, .range = depends("in (0, 1)")},
      {.key = "lambda_dc", .member = &C::lambda_dc,
       .option = {"--lambda-dc", "dcasgd: delay-compensation strength >= 0 (default 0.04)"},
       .suite = {.check_alone = false, .token = "ldc"}, .check = [](const C& c, Problems& p) { owned_by("lambda_dc", "--lambda-dc", c.lambda_dc.has_value(), c, p); },
       .only_if_changed = true, .range = depends("in [0, 1e6]")},
      {.key = "lr_policy", .member = &C::lr_policy, .option = {"--lr-policy", "constant, staleness or mean-staleness"},
       .suite = {.token = ""},
       .check = [](const C& c, Problems& p) {
         registered(p, "lr policy", c.lr_policy, protocol::rate_policies(), c);
       }},
      {.key = "merge", .member = &C::merge,
       .option = {"--merge", "nsync: how the server merges a change: sum, mean, server-sgd or adagrad (default sum)"},
       .suite = {.check_alone = false, .token = "merge"},
       .check = [](const C& c, Problems& p) {
         registered(p, "merge rule", merge_rule(c), protocol::merge_rules(), c);
         owned_by("merge", "--merge", c.merge.has_value(), c, p);
       },
       .only_if_changed = true},
      {.key = "server_lr", .member = &C::server_lr,
       .option = {"--server-lr", "nsync with merge server-sgd or adagrad: the server's rate (default lr)"},
       .suite = {.check_alone = false, .token = "slr"},
       .check = [](const C& c, Problems& p) { merge_option("server_lr", "--server-lr", c.server_lr.has_value(), c, p); },
       .only_if_changed = true, .range = depends("in (0, 1e6)")},
      {.key = "server_momentum", .member = &C::server_momentum,
       .option = {"--server-momentum", "nsync with merge server-sgd: the server's momentum (default --momentum)"},
       .suite = {.check_alone = false, .token = "smom"},
       .check = [](const C& c, Problems& p) { merge_option("server_momentum", "--server-momentum", c.server_momentum.has_value(), c, p); },
       .only_if_changed = true, .range = depends("in [0, 1)")},
      {.key = "warm_start", .member = &C::warm_start,
       .option = {"--warm-start", "Initial weights from this checkpoint (1 shard, same model)"},
       .suite = {.check_alone = false},
       .check = [](const C& c, Problems& p) {
         utf8_path(p, "warm start file", c.warm_start);
         need(p, c.warm_start.size() <= kMaxPath,
              fmt::format("warm start file '{}' is too long", shorten(c.warm_start)));
       }},
      {.key = "warm_steps", .member = &C::warm_steps,
       .option = {"--warm-steps", "Warm start: this many single-learner steps first"},
       .suite = {.check_alone = false, .has_min = true, .min = 0},
       .range = at_least(0)},
  };
}

// Virtual learners and their timing model.
std::vector<Field<C>> virtual_fields() {
  return {
      {.key = "virtual", .member = &C::virtual_learners,
       .option = {"--virtual", "Virtual learners: all learners in this process on a virtual clock"},
       .suite = {.reserved = "use 'mode: virtual'"}},
      {.key = "timing", .member = &C::timing,
       .option = {"--timing", "Virtual timing model: calibrate, fixed, normal, lognormal"}, .suite = {.token = ""},
       .check = [](const C& c, Problems& p) {
         one_of(p, "timing", c.timing, {"calibrate", "fixed", "normal", "lognormal"});
       }},
      {.key = "compute_s", .member = &C::compute_s,
       .option = {"--compute-s", "Virtual: mean compute time per minibatch (0: measure)"},
       .range = depends("in [0, 1e6]")},
      {.key = "compute_cv", .member = &C::compute_cv,
       .option = {"--compute-cv", "Virtual: coefficient of variation of compute time"},
       .range = at_least(0)},
      {.key = "comm_s", .member = &C::comm_s,
       .option = {"--comm-s", "Virtual: push + pull time per exchange (0: measure)"},
       .range = depends("in [0, 1e6]")},
      {.key = "straggler", .member = &C::straggler,
       .option = {"--straggler", "Virtual: index of a slow learner (default: none)"},
       .suite = {.check_alone = false, .has_min = true, .min = 0},
       .check = [](const C& c, Problems& p) {
         if (c.straggler)
           need(p, *c.straggler >= 0 && *c.straggler < c.learners,
                fmt::format("straggler {} must be a learner index in 0..{}", *c.straggler, c.learners - 1));
       },
       .range = depends("in 0..learners-1")},
      {.key = "profile", .member = &C::profile,
       .option = {"--profile", "Virtual: machine profile (YAML; asgd calibrate writes one): model server shards, "
                               "links and cores with its figures"},
       .suite = {.check_alone = false, .token = "prof"},
       .only_if_changed = true},  // checked with the model and batch: validate.cpp
      {.key = "straggler_factor", .member = &C::straggler_factor,
       .option = {"--straggler-factor", "Virtual: how many times slower"},
       .range = at_least(1)},
  };
}

}  // namespace

const std::vector<Field<C>>& fields() {
  static const std::vector<Field<C>> table = [] {
    std::vector<Field<C>> all;
    for (auto part : {model_fields, schedule_fields, placement_fields, parallel_fields, protocol_option_fields,
                      virtual_fields})
      for (auto& f : part()) all.push_back(std::move(f));
    return all;
  }();
  return table;
}

#pragma GCC diagnostic pop

}  // namespace asgd::config
