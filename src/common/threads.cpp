#include "common/threads.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>

#include "common/error.hpp"

namespace asgd {

int threads_per_rank(int requested) {
  // OMP_NUM_THREADS, when set, must be whole numbers 1..kMaxThreadsPerRank
  // (a list for nested levels; spaces around a number and a '+' allowed, as
  // libgomp allows them): libgomp ignores a bad value with a warning of its
  // own, and Kokkos' OpenMP backend crashes at start when the first level is
  // above its pool (512 in Kokkos 3.4: OpenMPExec::MAX_THREAD_COUNT),
  // whatever --threads asks for.
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    int first = 0;
    for (const char* at = env;;) {
      char* end = nullptr;
      errno = 0;
      const long t = std::strtol(at, &end, 10);
      const bool number = end != at && errno == 0 && t >= 1 && t <= kMaxThreadsPerRank;
      while (number && (*end == ' ' || *end == '\t')) ++end;
      if (!number || (*end != '\0' && *end != ','))
        throw Error(fmt::format("OMP_NUM_THREADS '{}': want whole numbers in 1..{} (threads per rank)", env,
                                kMaxThreadsPerRank));
      if (first == 0) first = static_cast<int>(t);
      if (*end == '\0') break;
      at = end + 1;
    }
    if (requested == 1) return first;
  }
  return requested;
}

}  // namespace asgd
