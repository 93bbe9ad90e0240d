#pragma once
// The IDX targets' data folder: the four files of a Fashion-MNIST/MNIST
// folder, written raw or gzip-compressed, then loaded through
// asgd::data::load_dataset (what `asgd train --dataset mnist --data-dir D`
// does), mean subtraction included.
#include <zlib.h>

#include "data_checks.hpp"

namespace asgd::fuzz {

// Writes bytes to path through zlib's gzip writer (a valid .gz of bytes).
inline void write_gz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb1");
  if (f == nullptr) bug("cannot create " + path);
  if (!bytes.empty() && gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) <= 0) bug("gzwrite " + path);
  if (gzclose(f) != Z_OK) bug("gzclose " + path);
}

enum class Form { raw, gzip_of, gz_bytes };  // file = bytes; file = gzip(bytes); file.gz = bytes

inline void write_idx(const std::string& dir, const std::string& base, const std::string& bytes, Form f) {
  if (f == Form::raw) write_file(dir + "/" + base, bytes);
  else if (f == Form::gzip_of) write_gz(dir + "/" + base + ".gz", bytes);
  else write_file(dir + "/" + base + ".gz", bytes);
}

// images/labels of the training set; the test set is the same pair unless
// separate test bytes are given.
inline void load_idx(const std::string& train_images, const std::string& train_labels,
                     const std::string& test_images, const std::string& test_labels, Form fi, Form fl,
                     bool subtract_mean) {
  const std::string dir = fresh_dir("idx");
  write_idx(dir, "train-images-idx3-ubyte", train_images, fi);
  write_idx(dir, "train-labels-idx1-ubyte", train_labels, fl);
  write_idx(dir, "t10k-images-idx3-ubyte", test_images, fi);
  write_idx(dir, "t10k-labels-idx1-ubyte", test_labels, fl);
  data::DatasetSpec spec;
  spec.kind = "mnist";
  spec.dir = dir;
  spec.subtract_mean = subtract_mean;
  data::DataPair p;
  if (accepted("load_dataset(mnist)", [&] { p = data::load_dataset(spec); })) check_pair(p);
}

}  // namespace asgd::fuzz
