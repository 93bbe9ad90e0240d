#include "report/bench.hpp"

#include <fmt/format.h>

#include <cmath>

#include "common/error.hpp"
#include "common/nesting.hpp"
#include "common/text.hpp"
#include "report/detail.hpp"

namespace asgd::report {

using json = nlohmann::json;

double unit_ns(const std::string& unit) {
  if (unit == "ns" || unit.empty()) return 1;
  if (unit == "us") return 1e3;
  if (unit == "ms") return 1e6;
  if (unit == "s") return 1e9;
  return kNaN;
}

namespace {

// Groups the entries of doc["benchmarks"] by benchmark.
void group(BenchFile& f, const std::string& path) {
  std::map<std::string, std::map<std::string, const json*>> aggregates;
  for (const json& b : f.doc["benchmarks"]) {
    if (!b.is_object() || !b.contains("name") || !b["name"].is_string()) {
      f.bad_entries.push_back(path + ": a benchmark entry without a name");
      continue;
    }
    const std::string name = b.contains("run_name") && b["run_name"].is_string() ? b["run_name"].get<std::string>()
                                                                                 : b["name"].get<std::string>();
    try {
      if (detail::bench_flag(b, "error_occurred", false)) {
        ++f.error_entries;
        f.errors[name] = detail::bench_text(b, "error_message", "error");
      } else if (detail::bench_text(b, "run_type", "iteration") == "aggregate") {
        aggregates[name][detail::bench_text(b, "aggregate_name", "")] = &b;
      } else {
        f.series[name].push_back(&b);
      }
    } catch (const Error& e) {
      f.bad_entries.push_back(fmt::format("{}: benchmark {}: {}", path, shorten(name), e.what()));
    }
  }
  for (const auto& [name, aggs] : aggregates) {
    if (f.series.count(name)) continue;
    for (const char* a : {"median", "mean"})
      if (aggs.count(a)) {
        f.series[name].push_back(aggs.at(a));
        break;
      }
  }
  for (auto it = f.errors.begin(); it != f.errors.end();)
    it = f.series.count(it->first) ? f.errors.erase(it) : std::next(it);
}

}  // namespace

BenchFile read_bench_file(const std::string& bytes, const std::string& path) {
  BenchFile f;
  if (const std::string deep = json_nesting_problem(bytes, path); !deep.empty()) {
    f.problem = deep;
    return f;
  }
  f.doc = json::parse(bytes, nullptr, false);
  if (f.doc.is_discarded()) {
    f.problem = path + ": not valid JSON";
    return f;
  }
  f.json_valid = true;
  if (!f.doc.is_object() || !f.doc.contains("benchmarks") || !f.doc["benchmarks"].is_array()) {
    f.problem = path + ": JSON without a \"benchmarks\" array: not a Google Benchmark output file "
                       "(--benchmark_out=FILE --benchmark_out_format=json)";
    return f;
  }
  if (f.doc["benchmarks"].empty()) {
    f.problem = path + ": no benchmarks in the file";
    return f;
  }
  group(f, path);
  return f;
}

BenchFigure bench_figure(const json& row, bool flops) {
  BenchFigure f;
  f.key = flops ? detail::flops_key(row) : "real_time";
  if (f.key.empty() || !row.contains(f.key)) {
    f.problem = fmt::format("{} is missing", flops ? "GFLOP/s" : f.key);
    return f;
  }
  const json& v = row[f.key];
  if (!v.is_number()) {
    f.problem = fmt::format("{} is not a number: {}", f.key, v.is_string() ? shorten(v.get<std::string>())
                                                                             : std::string(v.is_structured() ? "a list or object" : v.dump()));
    return f;
  }
  double x = v.get<double>();
  if (!flops) {
    const json tu = row.contains("time_unit") ? row["time_unit"] : json("ns");
    if (!tu.is_string()) {
      f.problem = "time_unit is not text";
      return f;
    }
    const double ns = unit_ns(tu.get<std::string>());
    if (std::isnan(ns)) {
      f.problem = fmt::format("unknown time_unit '{}'", shorten(tu.get<std::string>()));
      return f;
    }
    x *= ns;
  }
  if (!(std::isfinite(x) && x > 0 && x <= kMaxBenchFigure)) {
    f.problem = fmt::format("{} {} is not a positive finite number up to {:g}{}", f.key, v.dump(), kMaxBenchFigure,
                            flops ? "" : " ns");
    return f;
  }
  f.value = x;
  return f;
}

}  // namespace asgd::report
