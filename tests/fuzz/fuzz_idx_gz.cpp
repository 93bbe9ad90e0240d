// IDX images and labels, gzip-compressed: the fuzzed bytes are the .gz files
// themselves (the gzip header, deflate stream, CRC and length trailer, cut-off
// and concatenated streams), read through zlib by the IDX reader.
// Input: 1 flag byte (bit 2: subtract the mean), then images.gz and
// labels.gz as two pieces (fuzz_util.hpp Pieces); the test set is the same pair.
#include "idx_files.hpp"

using namespace asgd;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t flag = data[0];
  fuzz::Pieces in(data + 1, size - 1);
  const std::string images = in.next(), labels = in.rest();
  using F = fuzz::Form;
  fuzz::load_idx(images, labels, images, labels, F::gz_bytes, F::gz_bytes, (flag & 4) != 0);
  return 0;
}
