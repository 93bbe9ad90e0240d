#pragma once
// Internal to src/data: file reading and portable random numbers. The
// std:: distributions are implementation-defined, so every draw the data
// module makes goes through these helpers to stay identical across
// standard libraries.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/hash.hpp"

namespace asgd::data::detail {

// Whole file as bytes; decompressed through zlib when path ends in ".gz".
// Throws asgd::Error "<path>: cannot open: <reason>" or a read error.
// A folder is refused by name.
std::vector<std::uint8_t> read_file_bytes(const std::string& path);

// Throws asgd::Error when dir exists but is not a folder (a missing one is
// reported by the first file looked up in it).
void check_data_dir(const std::string& dir);

// Seed for stream `b` of seed `a`; distinct (a, b) give unrelated streams.
inline std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b) {
  return splitmix64(splitmix64(a) ^ (b * 0xD1B54A32D192ED03ULL + 0x632BE59BD9B4E019ULL));
}

// Unbiased integer in [0, bound), bound >= 1: rejects the low (2^64 mod bound)
// outputs so every residue is equally likely.
inline std::uint64_t uniform_below(std::mt19937_64& rng, std::uint64_t bound) {
  const std::uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    const std::uint64_t r = rng();
    if (r >= threshold) return r % bound;
  }
}

// Uniform double in [0, 1) with 53 random bits.
inline double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

// Standard normal via Box-Muller (one of the pair; the other is discarded so
// that the stream position depends only on the number of calls).
inline double standard_normal(std::mt19937_64& rng) {
  const double u1 = 1.0 - uniform01(rng);  // (0, 1], keeps log finite
  const double u2 = uniform01(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace asgd::data::detail
