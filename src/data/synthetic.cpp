// Synthetic data, dataset dispatch and mean subtraction.
#include <algorithm>
#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "data/detail.hpp"

namespace asgd::data {
namespace {

// Pixel value = kBase + kScale * prototype + kNoise * N(0, 1), clamped to [0, 1];
// prototypes are uniform in [0, 1], so before noise values span [0.25, 0.75].
constexpr double kBase = 0.25;
constexpr double kScale = 0.5;
constexpr double kNoise = 0.15;

// Independent random streams of one seed.
enum Stream : std::uint64_t { kPrototypes = 0, kTrain = 1, kTest = 2 };

Dataset synth_split(const DatasetSpec& spec, const std::vector<double>& prototypes, index_t n,
                    Stream stream) {
  Dataset d;
  d.name = "synthetic";
  d.n = n;
  d.h = spec.h;
  d.w = spec.w;
  d.c = spec.c;
  d.classes = spec.classes;
  const index_t size = d.sample_size();
  d.images.resize(static_cast<std::size_t>(n * size));
  d.labels.resize(static_cast<std::size_t>(n));
  std::mt19937_64 rng(detail::mix_seed(spec.seed, stream));
  for (index_t i = 0; i < n; ++i) {
    const auto label = static_cast<std::int32_t>(
        detail::uniform_below(rng, static_cast<std::uint64_t>(spec.classes)));
    d.labels[static_cast<std::size_t>(i)] = label;
    const double* proto = prototypes.data() + label * size;
    real_t* out = d.images.data() + i * size;
    for (index_t j = 0; j < size; ++j) {
      const double v = kBase + kScale * proto[j] + kNoise * detail::standard_normal(rng);
      out[j] = static_cast<real_t>(std::clamp(v, 0.0, 1.0));
    }
  }
  return d;
}

}  // namespace

DataPair make_synthetic(const DatasetSpec& spec) {
  if (spec.h < 1 || spec.w < 1 || spec.c < 1) {
    throw Error("synthetic dataset: h, w, c must be >= 1, got " + std::to_string(spec.h) + ", " +
                std::to_string(spec.w) + ", " + std::to_string(spec.c));
  }
  if (spec.classes < 1) {
    throw Error("synthetic dataset: classes must be >= 1, got " + std::to_string(spec.classes));
  }
  // No test samples would "reach" every target error at 0 s.
  if (spec.n_train < 1 || spec.n_test < 1) {
    throw Error("synthetic dataset: need n_train >= 1 and n_test >= 1, got " +
                std::to_string(spec.n_train) + " and " + std::to_string(spec.n_test));
  }
  const index_t size = spec.h * spec.w * spec.c;
  std::vector<double> prototypes(static_cast<std::size_t>(spec.classes * size));
  std::mt19937_64 rng(detail::mix_seed(spec.seed, kPrototypes));
  for (double& p : prototypes) p = detail::uniform01(rng);
  return DataPair{synth_split(spec, prototypes, spec.n_train, kTrain),
                  synth_split(spec, prototypes, spec.n_test, kTest)};
}

DataPair load_dataset(const DatasetSpec& spec) {
  DataPair p;
  if (spec.kind == "fashion-mnist" || spec.kind == "mnist") {
    p = load_idx_dir(spec.dir.empty() ? default_dir(spec.kind) : spec.dir, spec.kind);
  } else if (spec.kind == "cifar10") {
    p = load_cifar10(spec.dir.empty() ? default_dir(spec.kind) : spec.dir);
  } else if (spec.kind == "synthetic") {
    p = make_synthetic(spec);
  } else {
    throw Error("unknown dataset kind '" + spec.kind +
                "' (valid: fashion-mnist, mnist, cifar10, synthetic)");
  }
  // Every reader refuses empty sets with the file; this holds for any kind.
  if (p.train.n < 1) throw Error(p.train.name + ": the training set is empty");
  if (p.test.n < 1) throw Error(p.test.name + ": the test set is empty (no test error to measure)");
  if (spec.subtract_mean) subtract_pixel_mean(p);
  return p;
}

void subtract_pixel_mean(DataPair& data) {
  Dataset& train = data.train;
  Dataset& test = data.test;
  if (train.n < 1)
    throw Error(train.name + ": cannot subtract the pixel mean of an empty training set");
  if (test.n > 0 && (test.h != train.h || test.w != train.w || test.c != train.c)) {
    throw Error(train.name + ": test samples are " + std::to_string(test.h) + "x" +
                std::to_string(test.w) + "x" + std::to_string(test.c) + " but train samples are " +
                std::to_string(train.h) + "x" + std::to_string(train.w) + "x" +
                std::to_string(train.c));
  }
  const index_t size = train.sample_size();
  // Accumulate in double: 60000 float additions per pixel would lose digits.
  std::vector<double> mean(static_cast<std::size_t>(size), 0.0);
  for (index_t i = 0; i < train.n; ++i) {
    const real_t* x = train.images.data() + i * size;
    for (index_t j = 0; j < size; ++j) mean[static_cast<std::size_t>(j)] += x[j];
  }
  for (double& m : mean) m /= static_cast<double>(train.n);
  for (Dataset* d : {&train, &test}) {
    for (index_t i = 0; i < d->n; ++i) {
      real_t* x = d->images.data() + i * size;
      for (index_t j = 0; j < size; ++j) {
        x[j] = static_cast<real_t>(x[j] - mean[static_cast<std::size_t>(j)]);
      }
    }
  }
}

}  // namespace asgd::data
