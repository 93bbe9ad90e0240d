// The time `asgd report` takes over 1,000 result files (docs/MEASUREMENTS.md's
// "report over 1,000 result files" figure). A Google Benchmark, not a test:
// Report.ThousandRunFilesQuickly (tests/unit/test_report.cpp) checks the
// content of the same report and asserts no time; timings belong here.
//   build/<preset>/bench_report [--benchmark_repetitions=5]
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "io/results.hpp"
#include "report/report.hpp"

namespace fs = std::filesystem;

namespace {

// 1,000 runs of one suite: hardsync and softsync, 1-16 learners, n 1-4, 17 seeds,
// about 1% diverged (the same mix as Report.ThousandRunFilesQuickly).
void write_runs(const fs::path& runs) {
  fs::create_directories(runs);
  for (int i = 0; i < 1000; ++i) {
    char id[32];
    std::snprintf(id, sizeof id, "run-%04d", i);
    const int learners = 1 << (i % 5), n = 1 + (i / 5) % 4;
    const std::string protocol = i % 3 == 0 ? "hardsync" : "softsync";
    const bool diverged = i % 97 == 0;
    asgd::io::RunResult r;
    r.run_id = id;
    r.suite = "big";
    r.model = "lenet";
    r.protocol = protocol;
    r.status = diverged ? asgd::RunStatus::diverged : asgd::RunStatus::completed;
    r.git_commit = "bench";
    r.host = "benchhost";
    r.config_json = nlohmann::json{{"model", "lenet"}, {"dataset", {{"kind", "synthetic"}}}, {"batch", 64},
                                   {"lr", 0.01}, {"seed", i / 60 + 1}, {"suite", "big"}, {"run_id", id},
                                   {"learners", learners}, {"servers", 1}, {"protocol", protocol},
                                   {"softsync_n", n}, {"n_sync", 1}, {"lr_policy", "constant"}}
                        .dump();
    for (int k = 0; k < 10; ++k)
      r.updates.push_back({k + 1, 0.5 * (k + 1), learners, learners > 1 ? 1.0 : 0.0, 0.01, 1.0 - 0.05 * k,
                           0.5 - 0.02 * k, 64L * learners});
    const double nan = std::numeric_limits<double>::quiet_NaN();
    r.evals = {{0.5, 5, 2.5, 1.0, 0.5, 0.1}, {1.0, 10, 5.0, diverged ? nan : 0.6, diverged ? nan : 0.2, 0.1}};
    if (learners > 1) r.staleness_histogram = {5, 3, 2};
    for (int l = 0; l < learners; ++l) r.learners.push_back({l, 1.0, 0.1, 0.01, 0.01, 10 / learners, 640 / learners});
    r.summary.target_error = 0.25;
    r.summary.time_to_target_s = 100.0 / learners;
    r.summary.final_test_error = r.summary.best_test_error = diverged ? nan : 0.2;
    r.summary.samples_per_s = 100.0 * learners * (0.8 + 0.001 * (i % 50));
    r.summary.updates = 10;
    r.summary.epochs = 1.0;
    r.summary.train_time_s = 5.0;
    asgd::io::write_results((runs / (std::string(id) + ".h5")).string(), r);
  }
}

void BM_ReportThousandRunFiles(benchmark::State& state) {
  const fs::path dir = fs::temp_directory_path() / ("asgd_bench_report_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  write_runs(dir / "runs");
  asgd::report::ReportOptions opt;
  opt.suite_dir = dir.string();
  opt.quiet = true;  // no plot script: the report's own work
  int files = 0;
  for (auto _ : state) files = asgd::report::write_report(opt);
  state.counters["files"] = files;
  fs::remove_all(dir);
  if (files != 1000) state.SkipWithError("the report did not read 1,000 files");
}
BENCHMARK(BM_ReportThousandRunFiles)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
