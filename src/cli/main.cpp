// asgd: the one executable. Subcommands: train, models, info, gpu-bench,
// sweep, report, compare, validate, history (the bodies: run_commands.cpp,
// suite_commands.cpp; train's options: options.cpp).
// Bad input is an asgd::Error (or a CLI11 parse error): one line on stderr and
// a non-zero exit, never exit 0 after refusing to run.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <mpi.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "cli/calibrate.hpp"
#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "nn/zoo.hpp"
#include "perf/profile.hpp"
#include "common/blas_env.hpp"
#include "common/error.hpp"
#include "common/fatal.hpp"
#include "protocol/registry.hpp"
#include "ps/mpi_train.hpp"
#include "report/report.hpp"

namespace {

using namespace asgd::cli;

// One line for stderr, of UTF-8 text: control characters and bytes that are
// not UTF-8 escaped, and any run of more than 200 characters without a space
// (an echoed value) cut to its first 60.
std::string one_line(const std::string& msg) {
  std::string out;
  for (std::size_t start = 0; start <= msg.size();) {
    const std::size_t end = std::min(msg.find(' ', start), msg.size());
    const std::string token = asgd::shorten(msg.substr(start, end - start), std::string::npos);  // escaped
    out += token.size() > 200 ? asgd::shorten(token, 60) : token;
    if (end < msg.size()) out += ' ';
    start = end + 1;
  }
  if (out.size() > 20000) {
    std::size_t cut = 20000;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xc0) == 0x80) --cut;  // not inside a character
    out = out.substr(0, cut) + "...";
  }
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

// MPI lives for the whole process (singleton init when not under mpiexec),
// in the subcommands that use it (train, calibrate) only: the others never
// load an MPI transport, its threads or its signal handlers. MPI_Init
// installs the transport's handlers; ours are installed again after it.
struct MpiScope {
  bool active = false;
  MpiScope(int* argc, char*** argv, bool wanted) : active(wanted) {
    if (active) {
      int provided = 0;
      MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
      asgd::install_fatal_handlers();
    }
    // For the mpiexec this process starts (sweep run, calibrate), and only after its own
    // MPI_Init: UCX reads UCX_HANDLE_ERRORS as its library loads, and one set later would be
    // reported by MPI_Init as an unused variable (a warning line on every run).
    asgd::prepare_mpi_error_handling();
  }
  ~MpiScope() {
    if (active) MPI_Finalize();
  }
  MpiScope(const MpiScope&) = delete;
  MpiScope& operator=(const MpiScope&) = delete;
};

// Every subcommand's options, filled in by parsing.
struct Args {
  asgd::TrainConfig cfg;
  bool dry_run = false, quiet = false;
  asgd::ps::TrainOptions train_opt;
  std::string which, dataset = "fashion-mnist";
  bool info_json = false;
  int info_threads = 1;
  SweepArgs sw;
  std::vector<std::pair<CLI::App*, const char*>> sweep_actions;
  std::string report_dir, report_out;
  bool no_plots = false;
  std::string base, cand;
  asgd::report::CompareOptions copt;
  GpuBenchOptions gb;
  CalibrateOptions cal;
  std::vector<std::string> files;
  asgd::report::HistoryOptions hopt;
  bool hist_no_plots = false, hist_fail = false;
  CLI::App *train = nullptr, *models = nullptr, *info = nullptr, *gpu_bench = nullptr, *report = nullptr,
           *compare = nullptr, *validate = nullptr, *history = nullptr, *calibrate = nullptr;
};

void add_run_commands(CLI::App& app, Args& a) {
  a.train = app.add_subcommand("train", "Train one run and write its HDF5 results file");
  add_train_options(*a.train, a.cfg);
  a.train->add_flag("--dry-run", a.dry_run, "Validate and print the resolved configuration, run nothing");
  a.train->add_flag("-q,--quiet", a.quiet, "No progress lines");
  a.train->add_option("--progress-every", a.train_opt.progress_every_s, "Seconds between progress lines")
      ->capture_default_str()
      ->check(finite_in(0, 1e9));
  a.train->add_option("--stall-timeout", a.train_opt.stall_timeout_s,
                      "MPI runs: a rank that waits this many seconds without progress ends the run "
                      "(status failed, exit 1), naming what it waited for; 0: off")
      ->capture_default_str()
      ->check(finite_in(0, 1e9));

  a.models = app.add_subcommand("models", "Print the model zoo: layers, shapes, parameters");
  a.models->add_option("name", a.which, "One model only")->check(kNonEmpty);
  a.models->add_option("--dataset", a.dataset, "Input shape of this dataset")->capture_default_str();

  a.info = app.add_subcommand(
      "info", "Print the machine and versions: CPU, memory, load, Kokkos, BLAS (and its kernel), MPI, HDF5");
  a.info->add_flag("--json", a.info_json, "The machine record results files hold, as JSON");
  a.info->add_option("--threads", a.info_threads, "Threads per rank the record should say")
      ->capture_default_str()
      ->check(whole_in(1, asgd::kMaxThreadsPerRank));
}

void add_sweep_commands(CLI::App& app, Args& a) {
  SweepArgs& sw = a.sw;
  auto* sweep = app.add_subcommand("sweep", "Suites: plan, run here, submit to Slurm, status");
  sweep->require_subcommand(1);
  auto add_suite = [&](CLI::App* c, const char* action) {
    c->add_option("suite", sw.suite, "Suite file (suites/*.yaml)")->required()->check(kNonEmpty);
    c->add_option("--results", sw.results, "Results folder (runs go to <results>/<suite name>/)")
        ->capture_default_str()
        ->check(kNonEmpty);
    a.sweep_actions.emplace_back(c, action);
    return c;
  };
  add_suite(sweep->add_subcommand("plan", "List the runs with their ids, by resource shape"), "plan");
  auto* run = add_suite(
      sweep->add_subcommand("run", "Run the unfinished runs here (mpiexec), then write the report"), "run");
  run->add_option("--jobs,-j", sw.jobs, "Runs side by side")->capture_default_str()->check(whole_in(1, 1 << 20));
  run->add_option("--cores", sw.cores, "Ranks that may run at once (default, 0: this machine's cores)")
      ->check(whole_in(0, 1 << 20));
  run->add_option("--mpiexec", sw.mpiexec, "MPI launcher")->capture_default_str()->check(kExecutable);
  run->add_flag("--dry-run", sw.dry_run, "Print the commands, run nothing");
  run->add_flag("--no-report", sw.no_report, "Do not write the report at the end");
  auto* submit = add_suite(sweep->add_subcommand(
      "submit", "Write one sbatch array per resource shape and a report job; submit them"), "submit");
  submit->add_option("--site", sw.site, "Site settings slurm/sites/<site>.yaml")
      ->capture_default_str()
      ->check(kNonEmpty);
  submit->add_option("--sites-dir", sw.sites_dir, "Folder of site files (default: the source tree's slurm/sites)");
  submit->add_flag("--dry-run", sw.dry_run, "Write the scripts, do not call sbatch");
  add_suite(sweep->add_subcommand("status", "What is done, running, failed"), "status");
}

void add_report_commands(CLI::App& app, Args& a) {
  a.report = app.add_subcommand("report", "Write <suite folder>/report/: tables (Markdown, CSV), PNG plots");
  a.report->add_option("suite_dir", a.report_dir, "A suite's results folder: <results>/<suite>")
      ->required()
      ->check(kNonEmpty);
  a.report->add_option("--out", a.report_out, "Report folder (default: <suite_dir>/report)")->check(kNonEmpty);
  a.report->add_flag("--no-plots", a.no_plots, "Tables only");

  a.compare = app.add_subcommand(
      "compare", "Regression check: exit 1 when CANDIDATE is slower or worse than BASELINE");
  a.compare->add_option("baseline", a.base, "Results folder or Google Benchmark JSON")->required()->check(kNonEmpty);
  a.compare->add_option("candidate", a.cand, "Results folder or Google Benchmark JSON")->required()->check(kNonEmpty);
  a.compare->add_option("--threshold", a.copt.threshold, "Relative throughput drop that is a regression")
      ->capture_default_str()
      ->check(finite_in(0, 1));
  a.compare->add_option("--alpha", a.copt.alpha, "Significance level of the rank test")
      ->capture_default_str()
      ->check(finite_in(1e-12, 0.5));  // as history's: 0 would never find a regression
  a.compare->add_option("--error-band", a.copt.error_band, "Allowed increase of test error")
      ->capture_default_str()
      ->check(finite_in(0, 1));
  a.compare->add_flag("--across-machines", a.copt.across_machines,
                      "Compare timings even when the two sides ran on different CPU models or BLAS kernels");
}

void add_gpu_bench_command(CLI::App& app, Args& a) {
  GpuBenchOptions& gb = a.gb;
  a.gpu_bench = app.add_subcommand(
      "gpu-bench", "Training-step samples/s of zoo models on one GPU (CUDA path) beside cuBLAS SGEMM");
  a.gpu_bench->add_option("--models", gb.models, "Models to time")->capture_default_str();
  a.gpu_bench->add_option("--batch", gb.batch, "Minibatch size")->capture_default_str()->check(whole_in(1, 1 << 16));
  a.gpu_bench->add_option("--steps", gb.steps, "Timed steps per model")
      ->capture_default_str()
      ->check(whole_in(1, 1 << 20));
  a.gpu_bench->add_option("--gpu", gb.device, "Device index (default: ASGD_GPU_DEVICE or 0)")
      ->check(whole_in(0, 1 << 10));
  a.gpu_bench->add_option("--sgemm-size", gb.sgemm_size, "m of the m^3 SGEMM yardstick")
      ->capture_default_str()
      ->check(whole_in(1, 1 << 15));
  a.gpu_bench->add_option("--cpu-samples-per-s", gb.cpu_lenet_samples_per_s,
                          "One CPU learner's lenet samples/s to compare with (docs/MEASUREMENTS.md)")
      ->capture_default_str()
      ->check(finite_in(1e-9, 1e12));
}

void add_calibrate_command(CLI::App& app, Args& a) {
  CalibrateOptions& c = a.cal;
  a.calibrate = app.add_subcommand(
      "calibrate", "Measure this machine with the project's own code (compute per model, server update rate, "
                   "push and pull over MPI) and write a machine profile for virtual runs (--profile)");
  a.calibrate->add_option("--out,-o", c.out, "Profile to write (YAML)")->capture_default_str()->check(kNonEmpty);
  a.calibrate->add_option("--name", c.name, "The profile's name (default: this host's)")->check(kNonEmpty);
  a.calibrate->add_option("--models", c.models, "Models to time")->capture_default_str()->delimiter(',')
      ->check(CLI::IsMember(asgd::nn::model_names()));
  a.calibrate->add_option("--batch", c.batches, "Minibatch sizes to time")->capture_default_str()->delimiter(',')
      ->check(whole_in(1, 1 << 16));
  a.calibrate->add_option("--threads", c.threads, "Threads per rank")
      ->capture_default_str()
      ->check(whole_in(1, asgd::kMaxThreadsPerRank));
  a.calibrate->add_option("--steps", c.steps, "Timed minibatches per model (at least; as many as take 0.5 s where that is more)")->capture_default_str()
      ->check(whole_in(2, 100000));
  a.calibrate->add_option("--mpiexec", c.mpiexec, "MPI launcher of the link probe")->capture_default_str()
      ->check(kExecutable);
  a.calibrate->add_option("--inject-update-s", c.inject_update_s,
                          "Record this per-update cost injected into the real server (ASGD_INJECT_SERVER)")
      ->check(finite_in(0, 10));
  a.calibrate->add_option("--inject-byte-s", c.inject_byte_s,
                          "Record this per-byte cost injected into the real server (ASGD_INJECT_SERVER)")
      ->check(finite_in(0, 1e-3));
  a.calibrate->add_option("--link-probe", c.link_probe)->group("");  // one of the probe's 2 ranks
  a.calibrate->add_option("--largest", c.largest)->group("")->check(whole_in(1024, 1L << 32));
  a.calibrate->add_option("--cores-probe", c.cores_probe)->group("");
}

void add_results_commands(CLI::App& app, Args& a) {
  a.validate = app.add_subcommand("validate", "Check result files against the schema");
  a.validate->add_option("files", a.files, "Result files (.h5)")->required()->check(kNonEmpty);

  auto& h = a.hopt;
  a.history = app.add_subcommand(
      "history", "Per-figure series over commits from stored results and benchmark files; steps by change-point "
                 "detection; tables (Markdown, CSV) and PNG plots");
  a.history
      ->add_option("inputs", h.inputs, "Results files (.h5), Google Benchmark JSON, or folders of them (searched "
                                       "recursively)")
      ->required()
      ->check(kNonEmpty);
  a.history->add_option("--out", h.out_dir, "Output folder")->capture_default_str()->check(kNonEmpty);
  a.history->add_option("--min-effect", h.min_effect, "Smallest relative change of throughput or time that is a step")
      ->capture_default_str()
      ->check(finite_in(0, 10));
  a.history->add_option("--error-band", h.error_band, "Smallest absolute change of test error that is a step")
      ->capture_default_str()
      ->check(finite_in(0, 1));
  a.history->add_option("--alpha", h.alpha, "Significance level per series (after the Bonferroni factor)")
      ->capture_default_str()
      ->check(finite_in(1e-12, 0.5));
  a.history->add_option("--min-samples", h.min_samples, "Samples on each side of a step, at least")
      ->capture_default_str()
      ->check(whole_in(1, 1 << 20));
  a.history->add_flag("--by-input", h.by_input, "One point per input argument (e.g. repeated runs of one commit)");
  a.history->add_flag("--no-plots", a.hist_no_plots, "Tables only");
  a.history->add_flag("--fail-on-regression", a.hist_fail,
                      "Exit 1 when a regression step starts at a series' newest point");
}

// Runs the subcommand that was given.
int dispatch(Args& a) {
  if (*a.train) {
    a.train_opt.quiet = a.quiet;
    return cmd_train(a.cfg, a.dry_run, a.train_opt);
  }
  if (*a.models) return cmd_models(a.which, a.dataset);
  if (*a.info) return cmd_info(a.info_json, a.info_threads);
  if (*a.gpu_bench) return cmd_gpu_bench(a.gb);
  if (*a.calibrate)
    return !a.cal.link_probe.empty()    ? cmd_calibrate_probe(a.cal.link_probe, a.cal.largest)
           : !a.cal.cores_probe.empty() ? cmd_calibrate_cores_probe(a.cal)
                                        : cmd_calibrate(a.cal);
  for (auto [c, action] : a.sweep_actions)
    if (*c) return cmd_sweep(action, a.sw);
  if (*a.report) return cmd_report(a.report_dir, a.report_out, !a.no_plots, false);
  if (*a.compare) return asgd::report::compare(a.base, a.cand, a.copt);
  if (*a.validate)
    return asgd::report::validate(a.files, {asgd::nn::model_names(), asgd::protocol::protocol_names()}) > 0 ? 1 : 0;
  if (*a.history) {
    if (!a.hist_no_plots) a.hopt.plot_script = source_dir() + "/tools/ci/plot_history.py";
    const auto h = asgd::report::history(a.hopt);
    return a.hist_fail && h.latest_regressions > 0 ? 1 : 0;
  }
  return kExitFailed;
}

// dispatch(), each failure one line on stderr with its exit code.
int run_reporting_errors(Args& a) {
  try {
    return dispatch(a);
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
}

}  // namespace

int main(int argc, char** argv) {
  asgd::install_fatal_handlers();
  asgd::ensure_blas_core(argc, argv);
  spdlog::set_pattern("[%H:%M:%S] %v");

  CLI::App app{"asgd-bench: distributed asynchronous SGD benchmarks (GPU A-SGD, n-softsync)"};
  app.require_subcommand(1);
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return fmt::format("asgd: error: {} (see asgd --help)\n", one_line(e.what()));
  });
  app.set_help_all_flag("--help-all", "Help for every subcommand");

  Args a;
  add_run_commands(app, a);
  add_sweep_commands(app, a);
  add_report_commands(app, a);
  add_gpu_bench_command(app, a);
  add_results_commands(app, a);
  add_calibrate_command(app, a);
  asgd::perf::set_profile_search_dir(source_dir());

  try {
    load_config_arg(argc, argv, a.cfg);
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

  try {
    asgd::check_signal_injection();
  } catch (const std::exception& e) {
    print_early_error("error", e.what());
    return kExitBadInput;
  }
  MpiScope mpi(&argc, &argv, *a.train || *a.calibrate);
  asgd::inject_signal("main");
  return run_reporting_errors(a);
}
