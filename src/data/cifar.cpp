// CIFAR-10 binary batches: records of 1 label byte + R, G, B planes (32x32 each).
#include <filesystem>
#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "data/detail.hpp"

namespace asgd::data {
namespace {

constexpr index_t kSide = 32;
constexpr index_t kChannels = 3;
constexpr index_t kPlane = kSide * kSide;            // bytes per colour plane
constexpr index_t kRecord = 1 + kChannels * kPlane;  // 3073 bytes
constexpr std::int32_t kClasses = 10;

// Appends the records of one batch file to d (NHWC, [0, 1]).
void append_batch(const std::string& path, Dataset& d) {
  const std::vector<std::uint8_t> b = detail::read_file_bytes(path);
  const index_t size = static_cast<index_t>(b.size());
  if (size == 0) {
    throw Error(path + ": truncated at byte 0: empty file, expected records of " +
                std::to_string(kRecord) + " bytes");
  }
  if (size % kRecord != 0) {
    const index_t last = size / kRecord;
    throw Error(path + ": truncated at byte " + std::to_string(size) + ": record " +
                std::to_string(last) + " (starting at byte " + std::to_string(last * kRecord) +
                ") has " + std::to_string(size - last * kRecord) + " of " +
                std::to_string(kRecord) + " bytes");
  }
  const index_t records = size / kRecord;
  const index_t first = d.n;
  d.n += records;
  d.labels.resize(static_cast<std::size_t>(d.n));
  d.images.resize(static_cast<std::size_t>(d.n * kPlane * kChannels));
  for (index_t r = 0; r < records; ++r) {
    const std::uint8_t* rec = b.data() + r * kRecord;
    if (rec[0] >= kClasses) {
      throw Error(path + ": byte " + std::to_string(r * kRecord) + ": label " +
                  std::to_string(rec[0]) + " out of range [0, " + std::to_string(kClasses) + ")");
    }
    d.labels[static_cast<std::size_t>(first + r)] = rec[0];
    real_t* out = d.images.data() + (first + r) * kPlane * kChannels;
    // CHW planes -> HWC: pixel p of channel ch lands at p * 3 + ch.
    for (index_t ch = 0; ch < kChannels; ++ch) {
      const std::uint8_t* plane = rec + 1 + ch * kPlane;
      for (index_t p = 0; p < kPlane; ++p) {
        out[p * kChannels + ch] = static_cast<real_t>(plane[p]) / real_t{255};
      }
    }
  }
}

Dataset empty_cifar() {
  Dataset d;
  d.name = "cifar10";
  d.h = kSide;
  d.w = kSide;
  d.c = kChannels;
  d.classes = kClasses;
  return d;
}

}  // namespace

DataPair load_cifar10(const std::string& dir) {
  namespace fs = std::filesystem;
  detail::check_data_dir(dir);
  DataPair p{empty_cifar(), empty_cifar()};
  for (int i = 1; i <= 5; ++i) {
    append_batch((fs::path(dir) / ("data_batch_" + std::to_string(i) + ".bin")).string(), p.train);
  }
  append_batch((fs::path(dir) / "test_batch.bin").string(), p.test);
  return p;
}

}  // namespace asgd::data
