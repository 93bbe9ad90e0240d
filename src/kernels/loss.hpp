#pragma once
// The loss: softmax cross-entropy over logits with integer labels.
#include "kernels/common.hpp"

namespace asgd::kernels {

// ---------------------------------------------------------------------------
// Softmax cross-entropy over logits[N, M] with integer labels[N].
// Returns the summed loss and the number of wrong argmax predictions; writes
// dlogits = (softmax - onehot) * grad_scale (grad_scale = 1/N gives the
// gradient of the mean loss). dlogits may alias nothing else.
// ---------------------------------------------------------------------------
struct LossSum {
  double loss = 0;
  index_t wrong = 0;
};

template <class Space>
LossSum softmax_xent(index_t n, index_t m, const View1<Space>& logits, const IView1<Space>& labels,
                     real_t grad_scale, const View1<Space>& dlogits) {
  detail::check_len("softmax_xent", "logits", logits.extent(0), n * m);
  detail::check_len("softmax_xent", "labels", labels.extent(0), n);
  const bool want_grad = dlogits.data() != nullptr;
  if (want_grad) detail::check_len("softmax_xent", "dlogits", dlogits.extent(0), n * m);
  if (m < 1 && n > 0) throw Error("softmax_xent: zero classes");
  double loss = 0;
  index_t wrong = 0;
  Kokkos::parallel_reduce(
      "asgd::softmax_xent", Kokkos::RangePolicy<Space>(0, n),
      KOKKOS_LAMBDA(index_t r, double& l, index_t& w) {
        const real_t* z = logits.data() + r * m;
        const elem::XentRow row = elem::xent_row(z, m);
        const index_t lab = labels(r);
        l += elem::xent_loss(row, z, lab);
        w += row.arg != lab ? 1 : 0;
        if (want_grad) {
          real_t* g = dlogits.data() + r * m;
          for (index_t j = 0; j < m; ++j)
            g[j] = elem::xent_grad(elem::xent_prob(row, z, j), j == lab, grad_scale);
        }
      },
      loss, wrong);
  return {loss, wrong};
}

}  // namespace asgd::kernels
