#pragma once
// What an accepted data set must satisfy (the IDX and CIFAR-10 targets):
// non-empty train and test sets of one sample shape, as many labels as
// samples, each in [0, classes), every pixel value finite.
#include <cmath>

#include "data/dataset.hpp"
#include "fuzz_util.hpp"

namespace asgd::fuzz {

inline void check_dataset(const data::Dataset& d, const char* which) {
  const std::string w = which;
  if (d.n < 1) bug(w + ": an accepted set is empty");
  if (d.h < 0 || d.w < 0 || d.c < 1) bug(w + ": negative sample shape");
  if (d.labels.size() != static_cast<std::size_t>(d.n)) bug(w + ": labels != samples");
  if (d.images.size() != static_cast<std::size_t>(d.n * d.sample_size())) bug(w + ": image data != n x h x w x c");
  for (auto l : d.labels)
    if (l < 0 || l >= d.classes) bug(w + ": a label out of range was accepted");
  for (auto v : d.images)
    if (!std::isfinite(v)) bug(w + ": a non-finite pixel");
}

inline void check_pair(const data::DataPair& p) {
  check_dataset(p.train, "train");
  check_dataset(p.test, "test");
  if (p.train.h != p.test.h || p.train.w != p.test.w || p.train.c != p.test.c)
    bug("train and test samples of different shapes were accepted");
}

}  // namespace asgd::fuzz
