#pragma once
// What data a run loads, as plain values: the configuration holds it
// (config/config.hpp) and the loaders read it (data/dataset.hpp), so neither
// part includes the other.
#include <cstdint>
#include <string>

#include "common/types.hpp"

namespace asgd::data {

// kind: "fashion-mnist" | "mnist" | "cifar10" | "synthetic".
struct DatasetSpec {
  std::string kind = "fashion-mnist";
  std::string dir;  // empty: the default folder of that kind
  // synthetic only
  index_t h = 28, w = 28, c = 1;
  std::int32_t classes = 10;
  index_t n_train = 1024, n_test = 256;
  std::uint64_t seed = 1;
  bool subtract_mean = true;
};

}  // namespace asgd::data
