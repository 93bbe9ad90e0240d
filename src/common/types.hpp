#pragma once
#include <cstdint>

namespace asgd {
using real_t = float;
using index_t = std::int64_t;
}  // namespace asgd
