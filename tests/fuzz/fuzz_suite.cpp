// Suite files (asgd sweep plan|run|submit SUITE): the YAML through
// asgd::sweep::load_suite -- parsing, every key and value checked, the
// run-count cap, expansion into runs, validation of each run, the dataset
// folders looked up.
// Invariants of an accepted suite: at least one run and at most the cap, run
// ids unique and safe file names, every run's config valid, and each config
// surviving the trip through JSON that `asgd sweep` makes (configs/<id>.json
// read back by `asgd train --config`) with the same config_hash.
#include <nlohmann/json.hpp>

#include <set>

#include "config/config.hpp"
#include "fuzz_util.hpp"
#include "sweep/suite.hpp"

using namespace asgd;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string dir = fuzz::work_dir();
  const std::string path = dir + "/suite.yaml";
  fuzz::write_file(path, fuzz::as_text(data, size));
  sweep::Suite s;
  if (!fuzz::accepted("load_suite", [&] { s = sweep::load_suite(path, dir + "/results"); })) return 0;

  if (s.runs.empty()) fuzz::bug("an accepted suite has no runs");
  if (s.runs.size() > ASGD_MAX_SUITE_RUNS) fuzz::bug("an accepted suite has more runs than the cap");
  std::set<std::string> ids;
  std::size_t grouped = 0;
  for (const auto& g : sweep::group_by_shape(s)) grouped += g.size();
  if (grouped != s.runs.size()) fuzz::bug("group_by_shape lost or duplicated runs");
  std::size_t checked = 0;
  for (const auto& r : s.runs) {
    if (!ids.insert(r.run_id).second) fuzz::bug("two runs share the id " + r.run_id);
    if (checked++ >= 64) continue;  // the expensive checks on the first runs only
    if (const auto why = name_problem("run id", r.run_id, kMaxRunId); !why.empty())
      fuzz::bug("accepted run id: " + why);
    if (const auto p = validate(r.config); !p.empty()) fuzz::bug("run " + r.run_id + " is invalid: " + p[0]);
    const nlohmann::json j = r.config;
    TrainConfig back;
    fuzz::accepted("from_json(to_json(run config))", [&] {
      try {
        from_json(nlohmann::json::parse(j.dump()), back);
      } catch (const Error& e) {
        fuzz::bug("run " + r.run_id + ": its config JSON is refused when read back: " + e.what());
      }
    });
    if (config_hash(back) != config_hash(r.config) || nlohmann::json(back) != j)
      fuzz::bug("run " + r.run_id + ": its config changes through JSON: " + j.dump());
  }
  return 0;
}
