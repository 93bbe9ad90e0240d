#pragma once
// How the flat parameter buffer is cut into server shards, and where each
// shard's checkpoint lives.
#include <fmt/format.h>

#include <string>
#include <utility>

#include "nn/model.hpp"
#include "ps/trainer.hpp"

namespace asgd::ps {

struct Shard {
  index_t offset = 0, len = 0;
};

// Shard k of S: parameters [n*k/S, n*(k+1)/S).
inline Shard shard_of(index_t n_params, int k, int servers) {
  const index_t lo = n_params * k / servers, hi = n_params * (k + 1) / servers;
  return {lo, hi - lo};
}

// Shard 0 uses the run's checkpoint path, shard k "<run>.shard<k>.h5".
inline std::string shard_checkpoint(const RunPaths& p, int k) {
  if (k == 0) return p.checkpoint;
  const std::string& s = p.checkpoint;
  return s.substr(0, s.size() - 3) + fmt::format(".shard{}.h5", k);
}

inline nn::View sub(const nn::View& v, const Shard& s) {
  return Kokkos::subview(v, std::make_pair(s.offset, s.offset + s.len));
}

}  // namespace asgd::ps
