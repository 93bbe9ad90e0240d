#pragma once
// The monotonic clock every timing in the project uses.
#include <chrono>

namespace asgd {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace asgd
