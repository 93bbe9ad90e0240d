#pragma once
// Datasets held in host memory as float images in NHWC order.
// N = samples, H, W = height, width, C = channels; pixels scaled to [0, 1],
// then (optionally) the per-pixel mean of the training set subtracted.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/dataset_spec.hpp"
#include "common/error.hpp"
#include "common/types.hpp"

namespace asgd::data {

struct Dataset {
  std::string name;
  index_t n = 0, h = 0, w = 0, c = 0;
  std::int32_t classes = 10;
  std::vector<real_t> images;        // n * h * w * c
  std::vector<std::int32_t> labels;  // n, each in [0, classes)
  index_t sample_size() const { return h * w * c; }
};

struct DataPair {
  Dataset train, test;
};

// Default folders: fashion-mnist -> /usr/share/datasets/fashion-mnist,
// mnist -> /usr/share/datasets/mnist, cifar10 -> ./data/cifar-10-batches-bin.
std::string default_dir(const std::string& kind);

// IDX image + label files, gzip-compressed (name ends in .gz) or raw.
// Errors (asgd::Error) name the file and the byte offset: wrong magic,
// truncated file, image/label count mismatch, label >= classes.
Dataset read_idx(const std::string& images_path, const std::string& labels_path,
                 const std::string& name, std::int32_t classes = 10);

// fashion-mnist / mnist: dir holds train-images-idx3-ubyte[.gz],
// train-labels-idx1-ubyte[.gz], t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz].
DataPair load_idx_dir(const std::string& dir, const std::string& name);

// CIFAR-10 binary: dir holds data_batch_1.bin .. data_batch_5.bin and
// test_batch.bin, records of 1 label byte + 3072 bytes (R, G, B planes of 32x32).
// Converted to NHWC. Truncated records and labels > 9 are errors with offsets.
DataPair load_cifar10(const std::string& dir);

// Random images and labels where the label is learnable (class-dependent
// pattern plus noise), deterministic from seed.
DataPair make_synthetic(const DatasetSpec& spec);

// Dispatch on spec.kind, then subtract the training mean if spec.subtract_mean.
DataPair load_dataset(const DatasetSpec& spec);

// Per-pixel mean of train, subtracted from train and test.
void subtract_pixel_mean(DataPair& data);

// Deterministic per-learner sampling. One global permutation of [0, n) per
// epoch, derived only from (seed, epoch). Learner l of L takes, as its k-th
// minibatch of an epoch, positions [(k*L + l)*mu, (k*L + l)*mu + mu) of that
// permutation; an epoch (for this learner) ends when the next block would run
// past n, and the learner moves to the next epoch's permutation. So with L
// learners and batch mu, the union of the k-th minibatches of all learners is
// exactly the k-th minibatch of one learner with batch L*mu.
class Sampler {
 public:
  struct State {
    std::int64_t epoch = 0;
    std::int64_t batch = 0;  // k within the epoch
  };
  Sampler(index_t n, std::uint64_t seed, std::int32_t learner, std::int32_t learners,
          index_t mu);
  // Fills idx (resized to mu) with the next minibatch's sample indices.
  void next(std::vector<index_t>& idx);
  State state() const { return state_; }
  void restore(State s);
  // Batches per epoch for one learner: floor(n / (L*mu)) (at least 1 when n >= mu*L).
  index_t batches_per_epoch() const;

 private:
  void make_permutation();
  index_t n_;
  std::uint64_t seed_;
  std::int32_t learner_, learners_;
  index_t mu_;
  State state_;
  std::int64_t perm_epoch_ = -1;
  std::vector<index_t> perm_;
};

// Copies the samples idx into x (idx.size() * sample_size, NHWC) and y.
void gather_batch(const Dataset& d, std::span<const index_t> idx, real_t* x, std::int32_t* y);

}  // namespace asgd::data
