// Results files (asgd report, asgd compare, asgd validate, the "already
// finished" check of asgd train): asgd::io::read_results on an HDF5 image
// made of the fuzzed bytes.
// Invariants of an accepted file: result_problems() finds nothing (read_results
// promises a valid result) and equal table lengths where the schema ties them.
#include "fuzz_util.hpp"
#include "h5_files.hpp"
#include "io/results.hpp"

using namespace asgd;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::read_h5(data, size, [](const std::string& path) {
    io::RunResult r;
    if (!fuzz::accepted("read_results", [&] { r = io::read_results(path); })) return;
    if (const auto p = io::result_problems(r); !p.empty()) fuzz::bug("accepted results file: " + p[0]);
  });
  return 0;
}
