// Google Benchmark JSON (asgd compare and asgd history on benchmark files):
// the text through asgd::report::read_bench_file, then every row's figure
// through bench_figure, as both commands read them.
// Invariants of an accepted file: a document with a non-empty "benchmarks"
// array; a benchmark either has rows or an error, never both; every figure
// taken is finite, positive and at most kMaxBenchFigure, so a relative change
// between two of them is finite.
#include <cmath>

#include "fuzz_util.hpp"
#include "report/bench.hpp"

using namespace asgd;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(fuzz::as_text(data, size));
  report::BenchFile f;
  if (!fuzz::accepted("read_bench_file", [&] { f = report::read_bench_file(text, "bench.json"); })) return 0;
  if (!f.problem.empty()) return 0;
  if (!f.doc.is_object() || !f.doc.contains("benchmarks") || !f.doc["benchmarks"].is_array() ||
      f.doc["benchmarks"].empty())
    fuzz::bug("an accepted file without a non-empty benchmarks array");
  for (const auto& [name, msg] : f.errors)
    if (f.series.count(name)) fuzz::bug("a benchmark with both rows and an error: " + name);
  for (const auto& [name, rows] : f.series) {
    if (rows.empty()) fuzz::bug("a benchmark without rows: " + name);
    for (const auto* r : rows)
      for (const bool flops : {true, false}) {
        report::BenchFigure fig;
        fuzz::accepted("bench_figure", [&] { fig = report::bench_figure(*r, flops); });
        if (!fig.problem.empty()) continue;
        if (!(std::isfinite(fig.value) && fig.value > 0 && fig.value <= report::kMaxBenchFigure))
          fuzz::bug("a figure out of its domain taken: " + name);
        const double change = (fig.value - 1e-300) / 1e-300;
        if (std::isnan(change)) fuzz::bug("a relative change that is not a number: " + name);
      }
  }
  return 0;
}
