// Checkpoint files (asgd train resuming, or --warm-start FILE):
// asgd::io::read_checkpoint on an HDF5 image made of the fuzzed bytes, then
// check_checkpoint as a trainer calls it.
// Invariants of an accepted file: a 1-shard checkpoint holds n_params weights
// and as many momentum values, clock, epochs and times are finite and >= 0.
#include <cmath>

#include "fuzz_util.hpp"
#include "h5_files.hpp"
#include "io/results.hpp"

using namespace asgd;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::read_h5(data, size, [](const std::string& path) {
    io::Checkpoint c;
    if (!fuzz::accepted("read_checkpoint", [&] { c = io::read_checkpoint(path); })) return;
    if (c.shard_count == 1 && static_cast<std::int64_t>(c.weights.size()) != c.n_params)
      fuzz::bug("accepted a 1-shard checkpoint whose weight count is not n_params");
    if (c.clock < 0 || !std::isfinite(c.epochs) || c.epochs < 0 || !std::isfinite(c.wall_s) || c.wall_s < 0)
      fuzz::bug("accepted a negative or non-finite clock, epoch count or time");
    // As a resuming trainer and a warm start check it.
    io::CheckpointExpect want;
    want.model = c.model;
    want.n_params = c.n_params;
    want.shard_count = c.shard_count;
    want.shard_index = c.shard_index;
    want.shard_offset = c.shard_offset;
    want.learners = static_cast<std::int64_t>(c.cursors.size());
    want.finite_weights = true;
    fuzz::accepted("check_checkpoint", [&] { io::check_checkpoint(c, path, want); });
  });
  return 0;
}
