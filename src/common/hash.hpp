#pragma once
// The project's few hash functions, one copy each: splitmix64 (a 64-bit
// finaliser), mix (a seed of stream b of seed a) and FNV-1a 64 (stable text
// digests: config hashes, report ids). Every one is part of a file format or
// of the numerics (dropout masks, sampling orders, run ids): their values
// must never change. splitmix64 and mix are ASGD_HD (common/hd.hpp): the
// dropout hash (kernels/elementwise.hpp) calls them on the CPU and in CUDA kernels.
#include <cstdint>
#include <string_view>

#include "common/hd.hpp"

namespace asgd {

// Steele, Lea and Flood's splitmix64 output function of x + golden gamma.
ASGD_HD constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Seed of stream b of seed a (the trainers' dropout and sampling seeds):
// splitmix64 of a * C + b; distinct (a, b) give unrelated values.
ASGD_HD constexpr std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  return splitmix64(a * 0xD1B54A32D192ED03ULL + b);
}

inline constexpr std::uint64_t kFnv1aOffset = 0xcbf29ce484222325ULL;
inline constexpr std::uint64_t kFnv1aPrime = 0x100000001b3ULL;

// FNV-1a 64 of the bytes of text, continuing from h.
constexpr std::uint64_t fnv1a64(std::string_view text, std::uint64_t h = kFnv1aOffset) {
  for (const char ch : text) {
    h ^= static_cast<unsigned char>(ch);
    h *= kFnv1aPrime;
  }
  return h;
}

}  // namespace asgd
