// IDX images and labels, uncompressed (and, by the first byte, each file
// gzip-compressed by the target: the same parser behind zlib).
// Input: 1 flag byte, then the image file and the label file as two pieces
// (fuzz_util.hpp Pieces: a backslash doubled inside a piece, "\\x" ends it),
// then optionally a second pair for the test set (else the same pair).
// flag bit 0: images gzip-compressed; bit 1: labels; bit 2: subtract the mean.
#include "idx_files.hpp"

using namespace asgd;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t flag = data[0];
  fuzz::Pieces in(data + 1, size - 1);
  const std::string images = in.next(), labels = in.next();
  std::string test_images = images, test_labels = labels;
  if (!in.empty()) {
    test_images = in.next();
    test_labels = in.rest();
  }
  using F = fuzz::Form;
  fuzz::load_idx(images, labels, test_images, test_labels, flag & 1 ? F::gzip_of : F::raw,
                 flag & 2 ? F::gzip_of : F::raw, (flag & 4) != 0);
  return 0;
}
