// CIFAR-10 binary batches (asgd train --dataset cifar10 --data-dir D):
// data_batch_1..5.bin and test_batch.bin through asgd::data::load_dataset.
// Input: 1 flag byte; bit 0 set: the rest is one batch file used for all six;
// else six pieces (fuzz_util.hpp Pieces), the last running to the end.
// Bit 1: subtract the mean.
#include "data_checks.hpp"

using namespace asgd;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t flag = data[0];
  fuzz::Pieces in(data + 1, size - 1);
  std::string files[6];
  if (flag & 1) {
    files[0] = in.rest();
    for (int i = 1; i < 6; ++i) files[i] = files[0];
  } else {
    for (int i = 0; i < 5; ++i) files[i] = in.next();
    files[5] = in.rest();
  }
  const std::string dir = fuzz::fresh_dir("cifar");
  for (int i = 0; i < 5; ++i)
    fuzz::write_file(dir + "/data_batch_" + std::to_string(i + 1) + ".bin", files[i]);
  fuzz::write_file(dir + "/test_batch.bin", files[5]);
  data::DatasetSpec spec;
  spec.kind = "cifar10";
  spec.dir = dir;
  spec.subtract_mean = (flag & 2) != 0;
  data::DataPair p;
  if (fuzz::accepted("load_dataset(cifar10)", [&] { p = data::load_dataset(spec); })) {
    fuzz::check_pair(p);
    if (p.train.h != 32 || p.train.w != 32 || p.train.c != 3) fuzz::bug("CIFAR-10 images not 32x32x3");
  }
  return 0;
}
