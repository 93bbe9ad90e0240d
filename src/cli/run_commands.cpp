// asgd train, models, info and gpu-bench: the subcommands that start Kokkos.
#include <Kokkos_Core.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/kokkos_scope.hpp"
#include "common/blas_env.hpp"
#include "common/error.hpp"
#include "common/fatal.hpp"
#include "common/runinfo.hpp"
#include "gpu/gpu.hpp"
#include "io/results.hpp"
#include "nn/model.hpp"
#include "ps/mpi_train.hpp"
#include "ps/mpi_util.hpp"
#include "ps/shm_windows.hpp"
#include "sim/virtual.hpp"

namespace asgd::cli {

namespace {
bool mpi_started() {
  int on = 0;
  MPI_Initialized(&on);
  return on != 0;
}
}  // namespace

int world_rank() {
  int r = 0;
  if (mpi_started()) MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int s = 1;
  if (mpi_started()) MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

int cmd_train(const TrainConfig& cfg, bool dry_run, const ps::TrainOptions& opt) {
  const bool distributed =
      !cfg.virtual_learners && (world_size() > 1 || cfg.learners > 1 || cfg.servers > 1);
  if (cfg.virtual_learners && world_size() > 1)
    throw ps::CollectiveError("--virtual runs in one process: start it without mpiexec");
  if (!distributed || dry_run) {
    check(cfg);
    check_resources(cfg);  // before any folder is made; what the run would refuse, a dry run refuses too
  }
  // ASGD_WAIT, ASGD_INJECT_* and the switches, as MPI ranks check them in
  // train_mpi: a bad value is refused in every mode, before any work
  if (!distributed) ps::check_injection();
  {  // OMP_NUM_THREADS and the OpenMP runtime's limits: every rank checks its own, one line, exit 2
    std::string problem;
    try {
      (void)kokkos_threads(cfg.threads);
    } catch (const Error& e) {
      problem = e.what();
    }
    ps::stop_if_any_failed(ps::Comm(MPI_COMM_WORLD), problem, "a rank's threads were refused");
  }
  if (dry_run) {
    if (world_rank() == 0)
      fmt::print("{}\nrun id: {}\n", nlohmann::json(cfg).dump(2), resolved_run_id(cfg));
    return 0;
  }
  KokkosScope kokkos(cfg.threads);
  inject_signal("train");
  const auto out = cfg.virtual_learners ? sim::train_virtual(cfg, opt)
                   : distributed         ? ps::train_mpi(cfg, MPI_COMM_WORLD, opt)
                                         : ps::train_single(cfg, opt);
  if (world_rank() != 0) return 0;
  const auto& r = out.result;
  if (out.skipped) {
    fmt::print("run {} already finished ({}): {}\n", r.run_id, to_text(r.status), out.paths.results);
    return 0;
  }
  const auto& s = r.summary;
  // a diverged run has no error to show: it says so, never "nan%"
  auto pct = [&](double x) { return std::isfinite(x) ? fmt::format("{:.2f}%", 100 * x) : std::string(to_text(r.status)); };
  fmt::print(
      "\nrun {}  status {}\n  updates {}  epochs {:.2f}  train time {:.1f}s  {:.0f} samples/s\n"
      "  final test error {}  best {}  time to {:.1f}% error: {}\n  results {}\n",
      r.run_id, to_text(r.status), s.updates, s.epochs, s.train_time_s, s.samples_per_s,
      pct(s.final_test_error), pct(s.best_test_error), 100 * s.target_error,
      std::isnan(s.time_to_target_s) ? std::string("not reached")
                                     : fmt::format("{:.1f}s", s.time_to_target_s),
      out.paths.results);
  return 0;
}

int cmd_models(const std::string& which, const std::string& dataset) {
  const auto names = nn::model_names();
  if (!which.empty() && std::find(names.begin(), names.end(), which) == names.end())
    throw Error(fmt::format("model '{}' unknown ({}){}", shorten(which),
                                  fmt::join(names, ", "), did_you_mean(which, names)));
  const std::vector<std::string> kinds = {"fashion-mnist", "mnist", "cifar10", "synthetic"};
  if (std::find(kinds.begin(), kinds.end(), dataset) == kinds.end())
    throw Error(fmt::format("dataset '{}' unknown ({}){}", shorten(dataset),
                                  fmt::join(kinds, ", "), did_you_mean(dataset, kinds)));
  KokkosScope kokkos;
  const bool cifar = dataset == "cifar10";
  for (const auto& name : nn::model_names()) {
    if (!which.empty() && which != name) continue;
    nn::Shape in = name == "alexnet" ? nn::Shape{227, 227, 3}
                         : cifar || name == "cifar10-18pct" ? nn::Shape{32, 32, 3}
                                                            : nn::Shape{28, 28, 1};
    auto m = nn::make_model(name, in, name == "alexnet" ? 1000 : 10);
    m.finalize(1);
    fmt::print("{}\n\n", m.summary());
  }
  return 0;
}

namespace {

// ", 1 thread per call" (OpenMP builds: each Kokkos thread calls it alone),
// ", 2 threads" (Serial builds: the BLAS's own threads); "" when not OpenBLAS.
std::string blas_threads_text() {
  const int n = blas_threads();
  if (n <= 0) return "";
#if defined(KOKKOS_ENABLE_OPENMP)
  return fmt::format(", {} thread{} per call (each Kokkos thread calls it)", n, n == 1 ? "" : "s");
#else
  return fmt::format(", {} thread{}", n, n == 1 ? "" : "s");
#endif
}

}  // namespace

int cmd_info(bool as_json, int threads) {
  KokkosScope kokkos(threads);
  set_blas_threads(threads);
  const auto info = collect_run_info();
  std::string gpus;
  if (gpu::built_with_cuda())
    for (int d = 0; d < gpu::device_count(); ++d)
      gpus += (gpus.empty() ? "" : "; ") + gpu::device_info(d).describe();
  if (as_json) {  // the machine record every results file holds, for a site to file
    auto j = nlohmann::json::parse(machine_json(info, {1, threads, {info.host}, ps::mpi_library_version(), gpus}));
    j["asgd_commit"] = info.git_commit;
    j["hdf5"] = io::hdf5_version();
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("asgd-bench {}\n  host    {}\n  CPU     {} ({} online, {} allowed; {})\n  memory  {:.1f} GiB "
             "({:.1f} GiB available), load {:.2f} {:.2f} {:.2f}\n  Kokkos  {} ({} thread{})\n  BLAS    {}{}"
             "\n  MPI     {}\n  HDF5    {}\n  OS      {}, {}\n",
             info.git_commit, info.host, info.cpu_model, info.cpus_online, info.cpus_allowed,
             fmt::join(info.cpu_flags, " "), info.mem_total_bytes / 1073741824.0,
             info.mem_available_bytes / 1073741824.0, info.load1, info.load5, info.load15,
             info.kokkos_version, info.kokkos_concurrency, info.kokkos_concurrency == 1 ? "" : "s", info.blas, blas_threads_text(), ps::mpi_library_version(),
             io::hdf5_version(), info.os, info.kernel);
  if (!gpu::built_with_cuda()) {
    fmt::print("  CUDA    not built (cmake --preset cuda for --device cuda)\n");
  } else if (gpu::device_count() == 0) {
    fmt::print("  CUDA    built; no device visible\n");
  } else {
    for (int d = 0; d < gpu::device_count(); ++d)
      fmt::print("  CUDA    {}\n", gpu::device_info(d).describe());
  }
  return 0;
}

int cmd_gpu_bench(const GpuBenchOptions& o) {
  KokkosScope kokkos;
  return gpu_bench(o);
}

}  // namespace asgd::cli
