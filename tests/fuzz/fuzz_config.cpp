// Configuration JSON (asgd train --config FILE): asgd::load_config_file, then
// the validation `asgd train` applies (asgd::check).
// Invariants of a valid config: its run id is a safe file name, and it
// survives the trip through JSON (to_json, from_json) unchanged, with the same
// config_hash -- suites write configs that way and trainers compare hashes.
#include <nlohmann/json.hpp>

#include "config/config.hpp"
#include "fuzz_util.hpp"

using namespace asgd;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz::work_dir() + "/config.json";
  fuzz::write_file(path, fuzz::as_text(data, size));
  TrainConfig c;
  if (!fuzz::accepted("load_config_file", [&] { c = load_config_file(path); })) return 0;
  if (!fuzz::accepted("check", [&] { check(c); })) return 0;
  if (const auto why = name_problem("run id", resolved_run_id(c), kMaxRunId); !why.empty())
    fuzz::bug("a valid config gives an unusable run id: " + why);
  const nlohmann::json j = c;
  TrainConfig back;
  fuzz::accepted("from_json(to_json(config))", [&] {
    try {
      from_json(nlohmann::json::parse(j.dump()), back);
    } catch (const Error& e) {
      fuzz::bug(std::string("a valid config is refused when read back from its JSON: ") + e.what());
    }
  });
  if (config_hash(back) != config_hash(c) || nlohmann::json(back) != j)
    fuzz::bug("a valid config changes through JSON: " + j.dump());
  if (!validate(back).empty()) fuzz::bug("a valid config is invalid after the JSON trip: " + validate(back)[0]);
  return 0;
}
