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
#if defined(KOKKOS_ENABLE_OPENMP)
  if constexpr (detail::parallel_host<Space>) {
    // Rows in parallel, each row's loss kept; summed in row order afterwards,
    // as the Serial reduction does: the same sum for any thread count.
    Kokkos::View<double*, Kokkos::HostSpace> row_loss("asgd::softmax_xent::loss", n);
    Kokkos::View<index_t*, Kokkos::HostSpace> row_wrong("asgd::softmax_xent::wrong", n);
    Kokkos::parallel_for(
        "asgd::softmax_xent", Kokkos::RangePolicy<Space>(0, n), KOKKOS_LAMBDA(index_t r) {
          const real_t* z = logits.data() + r * m;
          const elem::XentRow row = elem::xent_row(z, m);
          const index_t lab = labels(r);
          double l = 0;
          l += elem::xent_loss(row, z, lab);
          row_loss(r) = l;
          row_wrong(r) = row.arg != lab ? 1 : 0;
          if (want_grad) {
            real_t* g = dlogits.data() + r * m;
            for (index_t j = 0; j < m; ++j)
              g[j] = elem::xent_grad(elem::xent_prob(row, z, j), j == lab, grad_scale);
          }
        });
    for (index_t r = 0; r < n; ++r) {
      loss += row_loss(r);
      wrong += row_wrong(r);
    }
    return {loss, wrong};
  }
#endif
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
