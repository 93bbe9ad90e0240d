// Site files (asgd sweep submit --site NAME reads slurm/sites/NAME.yaml):
// asgd::sweep::load_site on the fuzzed bytes.
// Invariants of an accepted site: no value holds a control character (each
// goes into a script line) and max_parallel_tasks >= 0.
#include "fuzz_util.hpp"
#include "sweep/slurm.hpp"

using namespace asgd;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string dir = fuzz::work_dir();
  fuzz::write_file(dir + "/site.yaml", fuzz::as_text(data, size));
  sweep::Site site;
  if (!fuzz::accepted("load_site", [&] { site = sweep::load_site(dir, "site"); })) return 0;
  std::vector<std::string> values = {site.partition, site.account, site.mpi};
  values.insert(values.end(), site.modules.begin(), site.modules.end());
  values.insert(values.end(), site.sbatch.begin(), site.sbatch.end());
  for (const auto& v : values)
    for (char c : v)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
        fuzz::bug("an accepted site value holds a control character: " + v);
  if (site.max_parallel_tasks < 0) fuzz::bug("accepted a negative max_parallel_tasks");
  return 0;
}
