// Machine profiles (asgd train --virtual --profile FILE, suites' `profile`):
// the YAML through asgd::perf::read_profile -- every key, figure and source
// checked.
// Invariants of an accepted profile: every figure finite and >= 0 with a
// source (measured, stated or assumed) and a note; bandwidths, throughputs,
// compute times and cores > 0; a compute entry for any model through a gflops
// entry or the entry's own model; and the profile surviving the trip through
// profile_yaml (what asgd calibrate writes) unchanged.
#include <cmath>

#include "fuzz_util.hpp"
#include "perf/profile.hpp"

using namespace asgd;

namespace {

void check(const perf::Figure& f, const char* what, bool positive) {
  if (!std::isfinite(f.value) || f.value < 0 || (positive && f.value <= 0))
    fuzz::bug(std::string("accepted figure out of its domain: ") + what);
  if (f.source != "measured" && f.source != "stated" && f.source != "assumed")
    fuzz::bug(std::string("accepted figure without a source: ") + what);
  if (f.note.empty()) fuzz::bug(std::string("accepted figure without a note: ") + what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string dir = fuzz::work_dir();
  const std::string path = dir + "/profile.yaml";
  fuzz::write_file(path, fuzz::as_text(data, size));
  perf::Profile p;
  if (!fuzz::accepted("read_profile", [&] { p = perf::read_profile(path); })) return 0;

  if (p.compute.empty()) fuzz::bug("an accepted profile has no compute entry");
  for (const auto& e : p.compute) {
    if (e.seconds.has_value() == e.gflops.has_value()) fuzz::bug("a compute entry with both or neither time");
    if (e.seconds) check(*e.seconds, "compute seconds", true);
    if (e.gflops) check(*e.gflops, "compute gflops", true);
    check(e.cv, "compute cv", false);
    const auto t = perf::compute_time(p, e.seconds ? e.model : "mlp", e.batch > 0 ? e.batch : 64, e.threads, 1e6);
    if (!t || !std::isfinite(t->mean_s) || t->mean_s <= 0) fuzz::bug("an entry gives no finite compute time");
  }
  check(p.learner.bandwidth_Bps, "learner bandwidth", true);
  check(p.server.bandwidth_Bps, "server bandwidth", true);
  check(p.learner.latency_s, "learner latency", false);
  check(p.server.latency_s, "server latency", false);
  check(p.accumulate_s_per_param, "accumulate", false);
  check(p.update_s_per_param, "update", false);
  if (p.cores) check(*p.cores, "cores", true);
  const std::string yaml = perf::profile_yaml(p);
  const std::string again = dir + "/again.yaml";
  fuzz::write_file(again, yaml);
  perf::Profile q;
  fuzz::accepted("read_profile(profile_yaml(accepted))", [&] {
    try {
      q = perf::read_profile(again);
    } catch (const Error& e) {
      fuzz::bug(std::string("an accepted profile, written back, is refused: ") + e.what());
    }
  });
  if (perf::profile_yaml(q) != yaml) fuzz::bug("an accepted profile changes through profile_yaml");
  return 0;
}
