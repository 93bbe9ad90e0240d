// asgd: the one executable. Subcommands: train, models, info.
// Bad input is an asgd::Error (or a CLI11 parse error): one line on stderr and
// a non-zero exit, never exit 0 after refusing to run.
#include <CLI/CLI.hpp>
#include <mpi.h>
#include <Kokkos_Core.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "common/blas_env.hpp"
#include "config/config.hpp"
#include "common/error.hpp"
#include "common/runinfo.hpp"
#include "ps/mpi_util.hpp"
#include "cli/gpu_bench.hpp"
#include "gpu/gpu.hpp"
#include "ps/mpi_train.hpp"
#include "ps/trainer.hpp"
#include "report/report.hpp"
#include "sim/virtual.hpp"
#include "sweep/runner.hpp"
#include "sweep/suite.hpp"
#include "io/results.hpp"
#include "nn/model.hpp"

namespace {

constexpr int kExitBadInput = 2;
constexpr int kExitFailed = 1;

// Kokkos lives exactly as long as this object (views must die before finalize).
struct KokkosScope {
  KokkosScope() {
    Kokkos::InitArguments args;
    args.disable_warnings = true;
    Kokkos::initialize(args);
  }
  ~KokkosScope() { Kokkos::finalize(); }
  KokkosScope(const KokkosScope&) = delete;
  KokkosScope& operator=(const KokkosScope&) = delete;
};

// Validators for option values CLI11 would take too readily.
// A whole number from 0 to 2^64-1 written in digits (no sign, no fraction,
// no wrap-around of -1).
const CLI::Validator kUnsigned64(
    [](std::string& v) -> std::string {
      std::uint64_t x = 0;
      std::string_view t = v;
      if (!t.empty() && t.front() == '+') t.remove_prefix(1);
      const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), x);
      if (t.empty() || ec != std::errc() || p != t.data() + t.size())
        return fmt::format("'{}' is not a whole number from 0 to 18446744073709551615",
                           asgd::shorten(v));
      return "";
    },
    "UINT64");
// Given on the command line, a text option must say something.
const CLI::Validator kNonEmpty(
    [](std::string& v) -> std::string { return v.empty() ? "must not be empty" : ""; }, "TEXT");
// A finite number in [lo, hi] (CLI::Range lets NaN through).
CLI::Validator finite_in(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& v) -> std::string {
        double x = 0;
        try {
          std::size_t used = 0;
          x = std::stod(v, &used);
          if (used != v.size()) throw std::invalid_argument(v);
        } catch (const std::exception&) {
          return fmt::format("'{}' is not a number", asgd::shorten(v));
        }
        if (!(std::isfinite(x) && x >= lo && x <= hi))
          return fmt::format("{} is not a finite number in [{}, {}]", asgd::shorten(v), lo, hi);
        return "";
      },
      fmt::format("NUMBER in [{}, {}]", lo, hi));
}
// A whole number in [lo, hi].
CLI::Validator whole_in(long long lo, long long hi) {
  return CLI::Validator(
      [lo, hi](std::string& v) -> std::string {
        long long x = 0;
        std::string_view t = v;
        if (!t.empty() && t.front() == '+') t.remove_prefix(1);
        const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), x);
        if (t.empty() || ec != std::errc() || p != t.data() + t.size() || x < lo || x > hi)
          return fmt::format("'{}' is not a whole number in [{}, {}]", asgd::shorten(v), lo, hi);
        return "";
      },
      fmt::format("INT in [{}, {}]", lo, hi));
}

// One line for stderr: control characters escaped, and any run of more than
// 200 characters without a space (an echoed value) cut to its first 60.
std::string one_line(const std::string& msg) {
  std::string out, token;
  auto flush = [&] {
    out += token.size() > 200 ? asgd::shorten(token, 60) : token;
    token.clear();
  };
  for (char ch : msg) {
    if (ch == ' ') {
      flush();
      out += ' ';
    } else if (ch == '\n' || ch == '\r' || ch == '\t') {
      token += ch == '\n' ? "\\n" : ch == '\r' ? "\\r" : "\\t";
    } else if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) {
      token += fmt::format("\\x{:02x}", static_cast<unsigned char>(ch));
    } else {
      token += ch;
    }
  }
  flush();
  if (out.size() > 20000) out = out.substr(0, 20000) + "...";
  return out;
}

// This process's rank as the MPI launcher set it, read before MPI_Init (a
// bad flag is found before MPI starts): Hydra/MPICH, PMIx, Open MPI, Slurm.
// 0 outside a launcher.
int launcher_rank() {
  for (const char* name : {"PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"})
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') return std::atoi(v);
  return 0;
}

// One line on stderr: "asgd: error: ..." (bad input) or "asgd: failed: ...".
void print_error(const char* kind, const std::string& msg) {
  std::fprintf(stderr, "asgd: %s: %s\n", kind, one_line(msg).c_str());
}

// Bad input found before MPI starts (command line, --config): every rank of
// `mpiexec -n N asgd ...` finds it; only the launcher's rank 0 says so.
void print_early_error(const char* kind, const std::string& msg) {
  if (launcher_rank() == 0) print_error(kind, msg);
}

void add_train_options(CLI::App& app, asgd::TrainConfig& c) {
  // A repeated option takes its last value (scripts append overrides).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  // CLI11 alone would saturate 99999999999999999999 to 2^63-1 and read 0x10 as 16.
  const CLI::Validator int64 = whole_in(std::numeric_limits<long long>::min(),
                                        std::numeric_limits<long long>::max());
  const CLI::Validator int32 = whole_in(std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
  app.add_option("--model", c.model, "Model from the zoo: mlp, lenet, cifar10-18pct, alexnet")
      ->capture_default_str()
      ->check(kNonEmpty);
  app.add_option("--dataset", c.data.kind, "fashion-mnist, mnist, cifar10 or synthetic")
      ->capture_default_str()
      ->check(kNonEmpty);
  app.add_option("--data-dir", c.data.dir,
                 "Folder of the dataset files (default: /usr/share/datasets/<dataset>, "
                 "./data/cifar-10-batches-bin for cifar10)")
      ->check(kNonEmpty);
  app.add_option_function<asgd::index_t>(
      "--synthetic-size", [&c](asgd::index_t v) { c.data.h = c.data.w = v; },
      "Synthetic image height = width (default 28)")
      ->check(int64);
  app.add_option("--synthetic-channels", c.data.c, "Synthetic image channels")->capture_default_str()
      ->check(int64);
  app.add_option("--synthetic-classes", c.data.classes, "Synthetic classes")->capture_default_str()
      ->check(int32);
  app.add_option("--synthetic-train", c.data.n_train, "Synthetic training samples")
      ->capture_default_str()
      ->check(int64);
  app.add_option("--synthetic-test", c.data.n_test, "Synthetic test samples")->capture_default_str()
      ->check(int64);
  app.add_flag("!--no-mean-subtraction", c.data.subtract_mean,
               "Do not subtract the per-pixel training mean");
  app.add_option("--batch,--mu", c.batch, "Samples per learner minibatch (mu)")
      ->capture_default_str()
      ->check(int64);
  app.add_option("--lr", c.lr, "Base learning rate alpha0")->capture_default_str();
  app.add_option("--momentum", c.momentum, "Momentum")->capture_default_str();
  app.add_option("--weight-decay", c.weight_decay, "Weight decay (L2)")->capture_default_str();
  app.add_option("--lr-steps", c.lr_steps, "Epochs at which the rate is multiplied by --lr-gamma")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--lr-gamma", c.lr_gamma, "Step-schedule factor")->capture_default_str();
  app.add_option("--epochs", c.epochs, "Training epochs (fractions allowed)")->capture_default_str();
  app.add_option("--max-steps", c.max_steps, "Stop after this many updates (0: no limit)")
      ->capture_default_str()
      ->check(int64);
  app.add_option("--eval-every", c.eval_every, "Epochs between test evaluations")
      ->capture_default_str();
  app.add_option("--eval-batch", c.eval_batch, "Batch size for evaluation")->capture_default_str()
      ->check(int64);
  app.add_option("--eval-samples", c.eval_samples, "Test samples per evaluation (0: all)")
      ->capture_default_str()
      ->check(int64);
  app.add_option("--checkpoint-every", c.checkpoint_every, "Updates between checkpoints (0: never)")
      ->capture_default_str()
      ->check(int64);
  app.add_option("--seed", c.seed, "Seed of initialisation, sampling and dropout")
      ->capture_default_str()
      ->check(kUnsigned64);
  app.add_option("--target-error", c.target_error, "Test error (fraction) for time-to-target")
      ->capture_default_str();
  app.add_option("--diverge-loss", c.diverge_loss,
                 "Training loss above which the run ends as diverged")
      ->capture_default_str();
  app.add_option("--threads", c.threads, "BLAS threads per rank")->capture_default_str()
      ->check(int32);
  app.add_option("--device", c.device,
                 "Where learners compute: cpu, or cuda (one GPU per learner by node-local rank; "
                 "ASGD_GPU_DEVICE=k forces one; needs a build with the cuda preset)")
      ->capture_default_str()
      ->check(kNonEmpty);
  app.add_option("--results", c.results_dir, "Results folder")->capture_default_str()->check(kNonEmpty);
  app.add_option("--suite", c.suite, "Suite name (results go to <results>/<suite>/)")
      ->capture_default_str()
      ->check(kNonEmpty);
  app.add_option("--run-id", c.run_id, "Run id (default: derived from the configuration)")
      ->check(kNonEmpty);
  app.add_option("--learners", c.learners, "Learner ranks (lambda)")->capture_default_str()
      ->check(int32);
  app.add_option("--servers", c.servers, "Parameter-server shards")->capture_default_str()
      ->check(int32);
  app.add_option("--protocol", c.protocol, "hardsync, softsync or nsync")
      ->capture_default_str()
      ->check(kNonEmpty);
  app.add_option("--n", c.softsync_n, "n of n-softsync (1..learners)")->capture_default_str()
      ->check(int32);
  app.add_option("--n-sync", c.n_sync, "Local steps between pushes for nsync")
      ->capture_default_str()
      ->check(int32);
  app.add_option("--lr-policy", c.lr_policy, "constant, staleness or mean-staleness")
      ->capture_default_str()
      ->check(kNonEmpty);
  app.add_option("--warm-start", c.warm_start,
                 "Initial weights from this checkpoint (1 shard, same model)")
      ->check(kNonEmpty);
  app.add_option("--warm-steps", c.warm_steps, "Warm start: this many single-learner steps first")
      ->capture_default_str()
      ->check(int64);
  app.add_flag("--virtual", c.virtual_learners,
               "Virtual learners: all learners in this process on a virtual clock");
  app.add_option("--timing", c.timing, "Virtual timing model: calibrate, fixed, normal, lognormal")
      ->capture_default_str()
      ->check(kNonEmpty);
  app.add_option("--compute-s", c.compute_s, "Virtual: mean compute time per minibatch (0: measure)")
      ->capture_default_str();
  app.add_option("--compute-cv", c.compute_cv, "Virtual: coefficient of variation of compute time")
      ->capture_default_str();
  app.add_option("--comm-s", c.comm_s, "Virtual: push + pull time per exchange (0: measure)")
      ->capture_default_str();
  app.add_option("--straggler", c.straggler, "Virtual: index of a slow learner (-1: none)")
      ->capture_default_str()
      ->check(int32);
  app.add_option("--straggler-factor", c.straggler_factor, "Virtual: how many times slower")
      ->capture_default_str();
  // Read before parsing (see load_config_arg); declared so --help lists it.
  app.add_option("--config", "Start from this resolved configuration (JSON, as written by "
                             "asgd sweep); options given too override it");
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

int cmd_train(const asgd::TrainConfig& cfg, bool dry_run, const asgd::ps::TrainOptions& opt) {
  const bool distributed =
      !cfg.virtual_learners && (world_size() > 1 || cfg.learners > 1 || cfg.servers > 1);
  if (cfg.virtual_learners && world_size() > 1)
    throw asgd::ps::CollectiveError("--virtual runs in one process: start it without mpiexec");
  if (!distributed) asgd::check(cfg);
  if (dry_run) {
    asgd::check(cfg);
    if (world_rank() == 0)
      fmt::print("{}\nrun id: {}\n", nlohmann::json(cfg).dump(2), asgd::resolved_run_id(cfg));
    return 0;
  }
  KokkosScope kokkos;
  const auto out = cfg.virtual_learners ? asgd::sim::train_virtual(cfg, opt)
                   : distributed         ? asgd::ps::train_mpi(cfg, MPI_COMM_WORLD, opt)
                                         : asgd::ps::train_single(cfg, opt);
  if (world_rank() != 0) return 0;
  const auto& r = out.result;
  if (out.skipped) {
    fmt::print("run {} already finished ({}): {}\n", r.run_id, r.status, out.paths.results);
    return 0;
  }
  const auto& s = r.summary;
  fmt::print(
      "\nrun {}  status {}\n  updates {}  epochs {:.2f}  train time {:.1f}s  {:.0f} samples/s\n"
      "  final test error {:.2f}%  best {:.2f}%  time to {:.1f}% error: {}\n  results {}\n",
      r.run_id, r.status, s.updates, s.epochs, s.train_time_s, s.samples_per_s,
      100 * s.final_test_error, 100 * s.best_test_error, 100 * s.target_error,
      std::isnan(s.time_to_target_s) ? std::string("not reached")
                                     : fmt::format("{:.1f}s", s.time_to_target_s),
      out.paths.results);
  return 0;
}

int cmd_models(const std::string& which, const std::string& dataset) {
  const auto names = asgd::nn::model_names();
  if (!which.empty() && std::find(names.begin(), names.end(), which) == names.end())
    throw asgd::Error(fmt::format("model '{}' unknown ({}){}", asgd::shorten(which),
                                  fmt::join(names, ", "), asgd::did_you_mean(which, names)));
  const std::vector<std::string> kinds = {"fashion-mnist", "mnist", "cifar10", "synthetic"};
  if (std::find(kinds.begin(), kinds.end(), dataset) == kinds.end())
    throw asgd::Error(fmt::format("dataset '{}' unknown ({}){}", asgd::shorten(dataset),
                                  fmt::join(kinds, ", "), asgd::did_you_mean(dataset, kinds)));
  KokkosScope kokkos;
  const bool cifar = dataset == "cifar10";
  for (const auto& name : asgd::nn::model_names()) {
    if (!which.empty() && which != name) continue;
    asgd::nn::Shape in = name == "alexnet" ? asgd::nn::Shape{227, 227, 3}
                         : cifar || name == "cifar10-18pct" ? asgd::nn::Shape{32, 32, 3}
                                                            : asgd::nn::Shape{28, 28, 1};
    auto m = asgd::nn::make_model(name, in, name == "alexnet" ? 1000 : 10);
    m.finalize(1);
    fmt::print("{}\n\n", m.summary());
  }
  return 0;
}

std::string self_exe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("asgd") : p.string();
}

// Where the project's data files are: ASGD_SOURCE_DIR (env), else the source
// tree this binary was built from.
std::string source_dir() {
  if (const char* env = std::getenv("ASGD_SOURCE_DIR")) return env;
  return ASGD_SOURCE_DIR;
}

struct SweepArgs {
  std::string suite, results = "results", site = "local", sites_dir, mpiexec = "mpiexec";
  int jobs = 1, cores = 0;
  bool dry_run = false, no_report = false;
};

int cmd_report(const std::string& dir, const std::string& out, bool plots, bool quiet) {
  asgd::report::ReportOptions o;
  o.suite_dir = dir;
  o.out_dir = out;
  o.reference_dir = source_dir() + "/results/reference";
  if (plots) o.plot_script = source_dir() + "/tools/plot_report.py";
  o.quiet = quiet;
  const int n = asgd::report::write_report(o);
  const std::string where = out.empty() ? dir + "/report" : out;
  fmt::print("report of {} runs: {}/report.md\n", n, where);
  return 0;
}

int cmd_sweep(const std::string& action, const SweepArgs& a) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto suite = asgd::sweep::load_suite(a.suite, a.results);
  if (action == "plan") {
    const auto groups = asgd::sweep::group_by_shape(suite);
    fmt::print("suite {} ({}): {} runs in {} resource shape{}, mode {}\n", suite.name, a.suite,
               suite.runs.size(), groups.size(), groups.size() == 1 ? "" : "s", suite.mode);
    for (const auto& g : groups) {
      fmt::print("shape {} ({} runs):\n", g.front()->shape, g.size());
      for (const auto* r : g) fmt::print("  {}\n", r->run_id);
    }
    fmt::print("planned in {:.3f}s\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return 0;
  }
  if (action == "status") return asgd::sweep::status(suite, a.results) > 0 ? 1 : 0;
  if (action == "submit") {
    asgd::sweep::SubmitOptions o;
    o.site = a.site;
    o.sites_dir = a.sites_dir.empty() ? source_dir() + "/slurm/sites" : a.sites_dir;
    o.self = self_exe();
    o.dry_run = a.dry_run;
    asgd::sweep::submit(suite, a.results, o);
    fmt::print("submit took {:.3f}s\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return 0;
  }
  asgd::sweep::LocalOptions o;
  o.jobs = a.jobs;
  o.cores = a.cores;
  o.self = self_exe();
  o.mpiexec = a.mpiexec;
  o.dry_run = a.dry_run;
  const int failed = asgd::sweep::run_local(suite, a.results, o);
  if (suite.mode == "micro") {
    fmt::print("benchmark results (Google Benchmark JSON, for asgd compare): {}\n",
               asgd::sweep::micro_output(suite.runs.front(), asgd::sweep::suite_paths(suite, a.results)));
  } else if (!a.dry_run && !a.no_report) {
    fmt::print("\n");
    cmd_report(asgd::sweep::suite_paths(suite, a.results).root, "", true, false);
    const std::string md = asgd::sweep::suite_paths(suite, a.results).root + "/report/report.md";
    if (std::ifstream in(md); in) fmt::print("\n{}", std::string(std::istreambuf_iterator<char>(in), {}));
  }
  return failed > 0 ? 1 : 0;
}

int cmd_info(bool as_json, int threads) {
  KokkosScope kokkos;
  asgd::set_blas_threads(threads);
  const auto info = asgd::collect_run_info();
  std::string gpus;
  if (asgd::gpu::built_with_cuda())
    for (int d = 0; d < asgd::gpu::device_count(); ++d)
      gpus += (gpus.empty() ? "" : "; ") + asgd::gpu::device_info(d).describe();
  if (as_json) {  // the machine record every results file holds, for a site to file
    auto j = nlohmann::json::parse(asgd::machine_json(info, {1, threads, {info.host}, asgd::ps::mpi_library_version(), gpus}));
    j["asgd_commit"] = info.git_commit;
    j["hdf5"] = asgd::io::hdf5_version();
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("asgd-bench {}\n  host    {}\n  CPU     {} ({} online, {} allowed; {})\n  memory  {:.1f} GiB "
             "({:.1f} GiB available), load {:.2f} {:.2f} {:.2f}\n  Kokkos  {} ({} threads)\n  BLAS    {}"
             "\n  MPI     {}\n  HDF5    {}\n  OS      {}, {}\n",
             info.git_commit, info.host, info.cpu_model, info.cpus_online, info.cpus_allowed,
             fmt::join(info.cpu_flags, " "), info.mem_total_bytes / 1073741824.0,
             info.mem_available_bytes / 1073741824.0, info.load1, info.load5, info.load15,
             info.kokkos_version, info.kokkos_concurrency, info.blas, asgd::ps::mpi_library_version(),
             asgd::io::hdf5_version(), info.os, info.kernel);
  if (!asgd::gpu::built_with_cuda()) {
    fmt::print("  CUDA    not built (cmake --preset cuda for --device cuda)\n");
  } else if (asgd::gpu::device_count() == 0) {
    fmt::print("  CUDA    built; no device visible\n");
  } else {
    for (int d = 0; d < asgd::gpu::device_count(); ++d)
      fmt::print("  CUDA    {}\n", asgd::gpu::device_info(d).describe());
  }
  return 0;
}

}  // namespace

// MPI lives for the whole process (singleton init when not under mpiexec).
struct MpiScope {
  MpiScope(int* argc, char*** argv) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  }
  ~MpiScope() { MPI_Finalize(); }
  MpiScope(const MpiScope&) = delete;
  MpiScope& operator=(const MpiScope&) = delete;
};

// `--config FILE` (or --config=FILE) of `asgd train` is applied before CLI11
// parses, so options given on the same command line (which CLI11 writes only
// when present) override it. A missing value is left to CLI11 to refuse.
void load_config_arg(int argc, char** argv, asgd::TrainConfig& cfg) {
  int i = 1;
  while (i < argc && std::string(argv[i]) != "train") {
    if (argv[i][0] != '-') return;  // another subcommand
    ++i;
  }
  for (++i; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") return;
    if (a == "--config" && i + 1 < argc) cfg = asgd::load_config_file(argv[++i]);
    else if (a.starts_with("--config=")) cfg = asgd::load_config_file(a.substr(9));
  }
}

int main(int argc, char** argv) {
  asgd::ensure_blas_core(argc, argv);
  spdlog::set_pattern("[%H:%M:%S] %v");

  CLI::App app{"asgd-bench: distributed asynchronous SGD benchmarks (GPU A-SGD, n-softsync)"};
  app.require_subcommand(1);
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return fmt::format("asgd: error: {} (see asgd --help)\n", one_line(e.what()));
  });
  app.set_help_all_flag("--help-all", "Help for every subcommand");

  asgd::TrainConfig cfg;
  bool dry_run = false, quiet = false;
  auto* train = app.add_subcommand("train", "Train one run and write its HDF5 results file");
  add_train_options(*train, cfg);
  train->add_flag("--dry-run", dry_run, "Validate and print the resolved configuration, run nothing");
  train->add_flag("-q,--quiet", quiet, "No progress lines");
  asgd::ps::TrainOptions train_opt;
  train->add_option("--progress-every", train_opt.progress_every_s, "Seconds between progress lines")
      ->capture_default_str()
      ->check(finite_in(0, 1e9));
  train->add_option("--stall-timeout", train_opt.stall_timeout_s,
                    "MPI runs: a rank that waits this many seconds without progress ends the run "
                    "(status failed, exit 1), naming what it waited for; 0: off")
      ->capture_default_str()
      ->check(finite_in(0, 1e9));

  std::string which, dataset = "fashion-mnist";
  auto* models = app.add_subcommand("models", "Print the model zoo: layers, shapes, parameters");
  models->add_option("name", which, "One model only");
  models->add_option("--dataset", dataset, "Input shape of this dataset")->capture_default_str();

  auto* info = app.add_subcommand(
      "info", "Print the machine and versions: CPU, memory, load, Kokkos, BLAS (and its kernel), MPI, HDF5");
  bool info_json = false;
  int info_threads = 1;
  info->add_flag("--json", info_json, "The machine record results files hold, as JSON");
  info->add_option("--threads", info_threads, "Threads per rank the record should say")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));

  SweepArgs sw;
  auto* sweep = app.add_subcommand("sweep", "Suites: plan, run here, submit to Slurm, status");
  sweep->require_subcommand(1);
  auto add_suite = [&sw](CLI::App* c) {
    c->add_option("suite", sw.suite, "Suite file (suites/*.yaml)")->required()->check(kNonEmpty);
    c->add_option("--results", sw.results, "Results folder (runs go to <results>/<suite name>/)")
        ->capture_default_str()
        ->check(kNonEmpty);
    return c;
  };
  auto* plan = add_suite(sweep->add_subcommand("plan", "List the runs with their ids, by resource shape"));
  auto* run = add_suite(sweep->add_subcommand(
      "run", "Run the unfinished runs here (mpiexec), then write the report"));
  run->add_option("--jobs,-j", sw.jobs, "Runs side by side")
      ->capture_default_str()
      ->check(whole_in(1, 1 << 20));
  run->add_option("--cores", sw.cores, "Ranks that may run at once (default, 0: this machine's cores)")
      ->check(whole_in(0, 1 << 20));
  run->add_option("--mpiexec", sw.mpiexec, "MPI launcher")->capture_default_str()->check(kNonEmpty);
  run->add_flag("--dry-run", sw.dry_run, "Print the commands, run nothing");
  run->add_flag("--no-report", sw.no_report, "Do not write the report at the end");
  auto* submit = add_suite(sweep->add_subcommand(
      "submit", "Write one sbatch array per resource shape and a report job; submit them"));
  submit->add_option("--site", sw.site, "Site settings slurm/sites/<site>.yaml")
      ->capture_default_str()
      ->check(kNonEmpty);
  submit->add_option("--sites-dir", sw.sites_dir, "Folder of site files (default: the source tree's slurm/sites)");
  submit->add_flag("--dry-run", sw.dry_run, "Write the scripts, do not call sbatch");
  auto* st = add_suite(sweep->add_subcommand("status", "What is done, running, failed"));

  std::string report_dir, report_out;
  bool no_plots = false;
  auto* report = app.add_subcommand("report", "Write <suite folder>/report/: tables (Markdown, CSV), PNG plots");
  report->add_option("suite_dir", report_dir, "A suite's results folder: <results>/<suite>")
      ->required()
      ->check(kNonEmpty);
  report->add_option("--out", report_out, "Report folder (default: <suite_dir>/report)")->check(kNonEmpty);
  report->add_flag("--no-plots", no_plots, "Tables only");

  std::string base, cand;
  asgd::report::CompareOptions copt;
  auto* compare = app.add_subcommand(
      "compare", "Regression check: exit 1 when CANDIDATE is slower or worse than BASELINE");
  compare->add_option("baseline", base, "Results folder or Google Benchmark JSON")
      ->required()
      ->check(kNonEmpty);
  compare->add_option("candidate", cand, "Results folder or Google Benchmark JSON")
      ->required()
      ->check(kNonEmpty);
  compare->add_option("--threshold", copt.threshold, "Relative throughput drop that is a regression")
      ->capture_default_str()
      ->check(finite_in(0, 1));
  compare->add_option("--alpha", copt.alpha, "Significance level of the rank test")
      ->capture_default_str()
      ->check(finite_in(0, 1));
  compare->add_option("--error-band", copt.error_band, "Allowed increase of test error")
      ->capture_default_str()
      ->check(finite_in(0, 1));
  compare->add_flag("--across-machines", copt.across_machines,
                    "Compare timings even when the two sides ran on different CPU models or BLAS kernels");

  asgd::cli::GpuBenchOptions gb;
  auto* gpu_bench = app.add_subcommand(
      "gpu-bench", "Training-step samples/s of zoo models on one GPU (CUDA path) beside cuBLAS SGEMM");
  gpu_bench->add_option("--models", gb.models, "Models to time")->capture_default_str();
  gpu_bench->add_option("--batch", gb.batch, "Minibatch size")
      ->capture_default_str()
      ->check(whole_in(1, 1 << 16));
  gpu_bench->add_option("--steps", gb.steps, "Timed steps per model")
      ->capture_default_str()
      ->check(whole_in(1, 1 << 20));
  gpu_bench->add_option("--gpu", gb.device, "Device index (default: ASGD_GPU_DEVICE or 0)")
      ->check(whole_in(0, 1 << 10));
  gpu_bench->add_option("--sgemm-size", gb.sgemm_size, "m of the m^3 SGEMM yardstick")
      ->capture_default_str()
      ->check(whole_in(1, 1 << 15));
  gpu_bench->add_option("--cpu-samples-per-s", gb.cpu_lenet_samples_per_s,
                        "One CPU learner's lenet samples/s to compare with (README figure)")
      ->capture_default_str()
      ->check(finite_in(1e-9, 1e12));

  std::vector<std::string> files;
  auto* validate = app.add_subcommand("validate", "Check result files against the schema");
  validate->add_option("files", files, "Result files (.h5)")->required()->check(kNonEmpty);

  asgd::report::HistoryOptions hopt;
  bool hist_no_plots = false, hist_fail = false;
  auto* hist = app.add_subcommand(
      "history", "Per-figure series over commits from stored results and benchmark files; steps by change-point "
                 "detection; tables (Markdown, CSV) and PNG plots");
  hist->add_option("inputs", hopt.inputs, "Results files (.h5), Google Benchmark JSON, or folders of them (searched "
                                          "recursively)")
      ->required()
      ->check(kNonEmpty);
  hist->add_option("--out", hopt.out_dir, "Output folder")->capture_default_str()->check(kNonEmpty);
  hist->add_option("--min-effect", hopt.min_effect, "Smallest relative change of throughput or time that is a step")
      ->capture_default_str()
      ->check(finite_in(0, 10));
  hist->add_option("--error-band", hopt.error_band, "Smallest absolute change of test error that is a step")
      ->capture_default_str()
      ->check(finite_in(0, 1));
  hist->add_option("--alpha", hopt.alpha, "Significance level per series (after the Bonferroni factor)")
      ->capture_default_str()
      ->check(finite_in(1e-12, 0.5));
  hist->add_option("--min-samples", hopt.min_samples, "Samples on each side of a step, at least")
      ->capture_default_str()
      ->check(whole_in(1, 1 << 20));
  hist->add_flag("--by-input", hopt.by_input, "One point per input argument (e.g. repeated runs of one commit)");
  hist->add_flag("--no-plots", hist_no_plots, "Tables only");
  hist->add_flag("--fail-on-regression", hist_fail, "Exit 1 when a regression step starts at a series' newest point");

  try {
    load_config_arg(argc, argv, cfg);
  } catch (const std::exception& e) {
    print_early_error("error", e.what());
    return kExitBadInput;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and friends exit 0; every parse error is bad input (2), as
    // documented, said once under mpiexec (by the launcher's rank 0)
    if (launcher_rank() != 0) return e.get_exit_code() == 0 ? 0 : kExitBadInput;
    return app.exit(e) == 0 ? 0 : kExitBadInput;
  }

  MpiScope mpi(&argc, &argv);
  try {
    if (*train) {
      train_opt.quiet = quiet;
      return cmd_train(cfg, dry_run, train_opt);
    }
    if (*models) return cmd_models(which, dataset);
    if (*info) return cmd_info(info_json, info_threads);
    if (*gpu_bench) {
      KokkosScope kokkos;
      return asgd::cli::gpu_bench(gb);
    }
    if (*sweep) {
      for (auto [c, name] : {std::pair{plan, "plan"}, {run, "run"}, {submit, "submit"}, {st, "status"}})
        if (*c) return cmd_sweep(name, sw);
    }
    if (*report) return cmd_report(report_dir, report_out, !no_plots, false);
    if (*compare) return asgd::report::compare(base, cand, copt);
    if (*validate) return asgd::report::validate(files) > 0 ? 1 : 0;
    if (*hist) {
      if (!hist_no_plots) hopt.plot_script = source_dir() + "/tools/ci/plot_history.py";
      const auto h = asgd::report::history(hopt);
      return hist_fail && h.latest_regressions > 0 ? 1 : 0;
    }
  } catch (const asgd::ps::CollectiveError& e) {
    // every rank found the same problem: one line, from rank 0
    if (world_rank() == 0) print_error("error", e.what());
    return kExitBadInput;
  } catch (const asgd::ps::ReportedElsewhere&) {
    return kExitBadInput;
  } catch (const asgd::ps::SetupFailed& e) {
    print_error("error", e.what());
    return kExitBadInput;
  } catch (const asgd::Error& e) {
    print_error("error", e.what());
    if (world_size() > 1) MPI_Abort(MPI_COMM_WORLD, kExitBadInput);
    return kExitBadInput;
  } catch (const std::exception& e) {
    print_error("failed", e.what());
    if (world_size() > 1) MPI_Abort(MPI_COMM_WORLD, kExitFailed);
    return kExitFailed;
  }
  return kExitFailed;
}
