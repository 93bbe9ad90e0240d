#include "common/config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace asgd {

namespace {
bool known(const std::string& v, std::initializer_list<const char*> list) {
  return std::any_of(list.begin(), list.end(), [&](const char* s) { return v == s; });
}
}  // namespace

std::vector<std::string> validate(const TrainConfig& c) {
  std::vector<std::string> p;
  auto need = [&](bool ok, std::string msg) {
    if (!ok) p.push_back(std::move(msg));
  };
  need(known(c.model, {"mlp", "lenet", "cifar10-18pct", "alexnet"}),
       fmt::format("model '{}' unknown (mlp, lenet, cifar10-18pct, alexnet)", c.model));
  need(known(c.data.kind, {"fashion-mnist", "mnist", "cifar10", "synthetic"}),
       fmt::format("dataset '{}' unknown (fashion-mnist, mnist, cifar10, synthetic)", c.data.kind));
  need(c.batch >= 1, fmt::format("batch {} must be >= 1", c.batch));
  need(c.lr > 0 && std::isfinite(c.lr), fmt::format("lr {} must be > 0", c.lr));
  need(c.momentum >= 0 && c.momentum < 1, fmt::format("momentum {} not in [0, 1)", c.momentum));
  need(c.weight_decay >= 0, fmt::format("weight decay {} must be >= 0", c.weight_decay));
  need(c.lr_gamma > 0, fmt::format("lr gamma {} must be > 0", c.lr_gamma));
  need(std::is_sorted(c.lr_steps.begin(), c.lr_steps.end()), "lr steps must be increasing");
  need(c.epochs > 0, fmt::format("epochs {} must be > 0", c.epochs));
  need(c.max_steps >= 0, fmt::format("max steps {} must be >= 0", c.max_steps));
  need(c.eval_every > 0, fmt::format("eval every {} epochs must be > 0", c.eval_every));
  need(c.eval_batch >= 1, fmt::format("eval batch {} must be >= 1", c.eval_batch));
  need(c.eval_samples >= 0, fmt::format("eval samples {} must be >= 0", c.eval_samples));
  need(c.checkpoint_every >= 0, fmt::format("checkpoint every {} must be >= 0", c.checkpoint_every));
  need(c.target_error >= 0 && c.target_error <= 1,
       fmt::format("target error {} not in [0, 1]", c.target_error));
  need(c.diverge_loss > 0, fmt::format("diverge loss {} must be > 0", c.diverge_loss));
  need(c.threads >= 1, fmt::format("threads {} must be >= 1", c.threads));
  need(known(c.device, {"cpu", "cuda"}), fmt::format("device '{}' unknown (cpu, cuda)", c.device));
  need(c.device == "cpu" || !c.virtual_learners,
       "virtual learners run on the CPU (device cuda is for real learners)");
  need(!c.results_dir.empty(), "results folder must not be empty");
  need(c.learners >= 1, fmt::format("learners {} must be >= 1", c.learners));
  need(c.servers >= 1, fmt::format("servers {} must be >= 1", c.servers));
  need(known(c.protocol, {"hardsync", "softsync", "nsync"}),
       fmt::format("protocol '{}' unknown (hardsync, softsync, nsync)", c.protocol));
  need(c.softsync_n >= 1 && c.softsync_n <= c.learners,
       fmt::format("softsync n {} must be in 1..learners ({})", c.softsync_n, c.learners));
  need(c.n_sync >= 1, fmt::format("n_sync {} must be >= 1", c.n_sync));
  need(known(c.lr_policy, {"constant", "staleness", "mean-staleness"}),
       fmt::format("lr policy '{}' unknown (constant, staleness, mean-staleness)", c.lr_policy));
  need(c.warm_steps >= 0, fmt::format("warm steps {} must be >= 0", c.warm_steps));
  need(c.warm_start.empty() || c.warm_steps == 0, "warm start: give a checkpoint or warm steps, not both");
  need(known(c.timing, {"calibrate", "fixed", "normal", "lognormal"}),
       fmt::format("timing '{}' unknown (calibrate, fixed, normal, lognormal)", c.timing));
  need(c.compute_s >= 0 && c.comm_s >= 0, "compute_s and comm_s must be >= 0");
  need(c.compute_cv >= 0, fmt::format("compute_cv {} must be >= 0", c.compute_cv));
  need(c.straggler >= -1 && c.straggler < c.learners,
       fmt::format("straggler {} must be -1 (none) or a learner index below {}", c.straggler, c.learners));
  need(c.straggler_factor >= 1, fmt::format("straggler factor {} must be >= 1", c.straggler_factor));
  if (c.data.kind == "synthetic") {
    need(c.data.h >= 1 && c.data.w >= 1 && c.data.c >= 1, "synthetic shape must be positive");
    need(c.data.classes >= 2, "synthetic classes must be >= 2");
    need(c.data.n_train >= 1 && c.data.n_test >= 1, "synthetic sample counts must be >= 1");
  }
  for (char ch : c.run_id + c.suite)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.')) {
      p.push_back(fmt::format("run id and suite may hold only letters, digits, '-', '_', '.'"));
      break;
    }
  return p;
}

void check(const TrainConfig& c) {
  const auto problems = validate(c);
  if (problems.empty()) return;
  std::string msg = fmt::format("invalid configuration ({} problem{}): ", problems.size(),
                                problems.size() == 1 ? "" : "s");
  for (std::size_t i = 0; i < problems.size(); ++i) msg += (i ? "; " : "") + problems[i];
  throw Error(msg);
}

void to_json(nlohmann::json& j, const TrainConfig& c) {
  j = nlohmann::json{
      {"model", c.model},
      {"dataset",
       {{"kind", c.data.kind},
        {"dir", c.data.dir},
        {"shape", {c.data.h, c.data.w, c.data.c}},
        {"classes", c.data.classes},
        {"n_train", c.data.n_train},
        {"n_test", c.data.n_test},
        {"seed", c.data.seed},
        {"subtract_mean", c.data.subtract_mean}}},
      {"batch", c.batch},
      {"lr", c.lr},
      {"momentum", c.momentum},
      {"weight_decay", c.weight_decay},
      {"lr_steps", c.lr_steps},
      {"lr_gamma", c.lr_gamma},
      {"epochs", c.epochs},
      {"max_steps", c.max_steps},
      {"eval_every", c.eval_every},
      {"eval_batch", c.eval_batch},
      {"eval_samples", c.eval_samples},
      {"checkpoint_every", c.checkpoint_every},
      {"seed", c.seed},
      {"target_error", c.target_error},
      {"diverge_loss", c.diverge_loss},
      {"threads", c.threads},
      {"results_dir", c.results_dir},
      {"suite", c.suite},
      {"run_id", c.run_id},
      {"learners", c.learners},
      {"servers", c.servers},
      {"protocol", c.protocol},
      {"softsync_n", c.softsync_n},
      {"n_sync", c.n_sync},
      {"lr_policy", c.lr_policy},
      {"warm_start", c.warm_start},
      {"warm_steps", c.warm_steps},
      {"virtual", c.virtual_learners},
      {"timing", c.timing},
      {"compute_s", c.compute_s},
      {"compute_cv", c.compute_cv},
      {"comm_s", c.comm_s},
      {"straggler", c.straggler},
      {"straggler_factor", c.straggler_factor},
  };
  // Only when not the default, so CPU configurations keep their hashes and run ids.
  if (c.device != "cpu") j["device"] = c.device;
}

void from_json(const nlohmann::json& j, TrainConfig& c) {
  TrainConfig d;
  c = d;
  auto get = [&](const char* key, auto& field) {
    if (j.contains(key)) j.at(key).get_to(field);
  };
  get("model", c.model);
  if (j.contains("dataset")) {
    const auto& ds = j.at("dataset");
    if (ds.contains("kind")) ds.at("kind").get_to(c.data.kind);
    if (ds.contains("dir")) ds.at("dir").get_to(c.data.dir);
    if (ds.contains("shape")) {
      const auto& s = ds.at("shape");
      c.data.h = s.at(0).get<index_t>();
      c.data.w = s.at(1).get<index_t>();
      c.data.c = s.at(2).get<index_t>();
    }
    if (ds.contains("classes")) ds.at("classes").get_to(c.data.classes);
    if (ds.contains("n_train")) ds.at("n_train").get_to(c.data.n_train);
    if (ds.contains("n_test")) ds.at("n_test").get_to(c.data.n_test);
    if (ds.contains("seed")) ds.at("seed").get_to(c.data.seed);
    if (ds.contains("subtract_mean")) ds.at("subtract_mean").get_to(c.data.subtract_mean);
  }
  get("batch", c.batch);
  get("lr", c.lr);
  get("momentum", c.momentum);
  get("weight_decay", c.weight_decay);
  get("lr_steps", c.lr_steps);
  get("lr_gamma", c.lr_gamma);
  get("epochs", c.epochs);
  get("max_steps", c.max_steps);
  get("eval_every", c.eval_every);
  get("eval_batch", c.eval_batch);
  get("eval_samples", c.eval_samples);
  get("checkpoint_every", c.checkpoint_every);
  get("seed", c.seed);
  get("target_error", c.target_error);
  get("diverge_loss", c.diverge_loss);
  get("threads", c.threads);
  get("results_dir", c.results_dir);
  get("suite", c.suite);
  get("run_id", c.run_id);
  get("learners", c.learners);
  get("servers", c.servers);
  get("protocol", c.protocol);
  get("softsync_n", c.softsync_n);
  get("n_sync", c.n_sync);
  get("lr_policy", c.lr_policy);
  get("warm_start", c.warm_start);
  get("warm_steps", c.warm_steps);
  get("virtual", c.virtual_learners);
  get("timing", c.timing);
  get("compute_s", c.compute_s);
  get("compute_cv", c.compute_cv);
  get("comm_s", c.comm_s);
  get("straggler", c.straggler);
  get("straggler_factor", c.straggler_factor);
  get("device", c.device);
}

std::string config_hash(const TrainConfig& c) {
  nlohmann::json j = c;
  for (const char* k : {"results_dir", "run_id", "threads", "suite", "checkpoint_every"})
    j.erase(k);
  const std::string s = j.dump();
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 0x100000001b3ull;
  }
  return fmt::format("{:016x}", h);
}

std::string resolved_run_id(const TrainConfig& c) {
  if (!c.run_id.empty()) return c.run_id;
  return fmt::format("{}-{}-{}-L{}-{}", c.model, c.data.kind, c.protocol, c.learners,
                     config_hash(c).substr(0, 8));
}

}  // namespace asgd
