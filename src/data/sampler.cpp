// Per-learner minibatch sampling over one shared permutation per epoch.
#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

#include "data/dataset.hpp"
#include "data/detail.hpp"

namespace asgd::data {

Sampler::Sampler(index_t n, std::uint64_t seed, std::int32_t learner, std::int32_t learners,
                 index_t mu)
    : n_(n), seed_(seed), learner_(learner), learners_(learners), mu_(mu) {
  if (mu < 1) throw Error("sampler: minibatch size mu must be >= 1, got " + std::to_string(mu));
  if (learners < 1) {
    throw Error("sampler: learners must be >= 1, got " + std::to_string(learners));
  }
  if (learner < 0 || learner >= learners) {
    throw Error("sampler: learner " + std::to_string(learner) + " out of range [0, " +
                std::to_string(learners) + ")");
  }
  // mu > n / L is n < mu * L without the overflow of the product.
  if (mu > n / learners) {
    throw Error("sampler: dataset has " + std::to_string(n) + " samples, fewer than one round of " +
                std::to_string(learners) + " learners x " + std::to_string(mu));
  }
}

index_t Sampler::batches_per_epoch() const { return n_ / (mu_ * learners_); }

void Sampler::make_permutation() {
  perm_.resize(static_cast<std::size_t>(n_));
  std::iota(perm_.begin(), perm_.end(), index_t{0});
  std::mt19937_64 rng(detail::mix_seed(seed_, static_cast<std::uint64_t>(state_.epoch)));
  for (index_t i = n_ - 1; i > 0; --i) {
    const auto j =
        static_cast<index_t>(detail::uniform_below(rng, static_cast<std::uint64_t>(i + 1)));
    std::swap(perm_[static_cast<std::size_t>(i)], perm_[static_cast<std::size_t>(j)]);
  }
  perm_epoch_ = state_.epoch;
}

void Sampler::next(std::vector<index_t>& idx) {
  if (perm_epoch_ != state_.epoch) make_permutation();
  const index_t start = (state_.batch * learners_ + learner_) * mu_;
  idx.assign(perm_.begin() + start, perm_.begin() + start + mu_);
  // Every learner ends its epoch after the same number of batches, so round k
  // of all learners always tiles one block of L*mu positions.
  if (++state_.batch == batches_per_epoch()) {
    state_.batch = 0;
    ++state_.epoch;
  }
}

void Sampler::restore(State s) {
  if (s.epoch < 0 || s.batch < 0 || s.batch >= batches_per_epoch()) {
    throw Error("sampler: cannot restore epoch " + std::to_string(s.epoch) + ", batch " +
                std::to_string(s.batch) +
                " (batches per epoch: " + std::to_string(batches_per_epoch()) + ")");
  }
  state_ = s;
}

void gather_batch(const Dataset& d, std::span<const index_t> idx, real_t* x, std::int32_t* y) {
  const index_t size = d.sample_size();
  for (std::size_t i = 0; i < idx.size(); ++i) {
    const index_t s = idx[i];
    if (s < 0 || s >= d.n) {
      throw Error(d.name + ": sample index " + std::to_string(s) + " out of range [0, " +
                  std::to_string(d.n) + ")");
    }
    std::copy_n(d.images.data() + s * size, size, x + static_cast<index_t>(i) * size);
    if (y != nullptr) y[i] = d.labels[static_cast<std::size_t>(s)];
  }
}

}  // namespace asgd::data
