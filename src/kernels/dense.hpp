#pragma once
// Dense layers: y[N, M] = x[N, K] * w[M, K]^T + b[M] (kernels/common.hpp: conventions).
#include "kernels/common.hpp"

namespace asgd::kernels {

// ---------------------------------------------------------------------------
// Dense: y[N, M] = x[N, K] * w[M, K]^T + b[M]. Weights are out-major (each
// output's K weights contiguous, as in PyTorch): with M = 10 outputs OpenBLAS
// runs the three GEMMs 1.5x faster than on [K, M], and no slower for wide layers.
// ---------------------------------------------------------------------------
template <class Space>
void dense_forward(index_t n, index_t k, index_t m, const View1<Space>& x, const View1<Space>& w,
                   const View1<Space>& b, const View1<Space>& y) {
  const char* what = "dense_forward";
  detail::check_len(what, "x", x.extent(0), n * k);
  detail::check_len(what, "w", w.extent(0), k * m);
  detail::check_len(what, "b", b.extent(0), m);
  detail::check_len(what, "y", y.extent(0), n * m);
  if (n == 0 || m == 0) return;
  auto y2 = detail::as_matrix<Space>(y, n, m);
  if (k == 0) {
    Kokkos::deep_copy(y2, real_t(0));
  } else {
    detail::gemm<Space>("N", "T", real_t(1), detail::as_matrix<Space>(x, n, k),
                     detail::as_matrix<Space>(w, m, k), real_t(0), y2);
  }
  detail::add_bias<Space>(y2, b);
}

// dw[M, K] += dy^T x; db[M] += sum over rows of dy; dx[N, K] = dy w when
// dx.data() != nullptr (the first layer needs no input gradient). ones is a
// workspace of at least N ones (for the bias reduction as a GEMV).
template <class Space>
void dense_backward(index_t n, index_t k, index_t m, const View1<Space>& x, const View1<Space>& w,
                    const View1<Space>& dy, const View1<Space>& dx, const View1<Space>& dw,
                    const View1<Space>& db, const View1<Space>& ones) {
  const char* what = "dense_backward";
  detail::check_len(what, "x", x.extent(0), n * k);
  detail::check_len(what, "w", w.extent(0), k * m);
  detail::check_len(what, "dy", dy.extent(0), n * m);
  detail::check_len(what, "dw", dw.extent(0), k * m);
  detail::check_len(what, "db", db.extent(0), m);
  detail::check_len(what, "ones", ones.extent(0), n);
  if (dx.data() != nullptr) detail::check_len(what, "dx", dx.extent(0), n * k);
  if (n == 0 || m == 0) {
    if (dx.data() != nullptr && n * k > 0)
      Kokkos::deep_copy(Kokkos::subview(dx, std::make_pair(index_t(0), n * k)), real_t(0));
    return;
  }
  auto dy2 = detail::as_matrix<Space>(dy, n, m);
  if (k > 0) {
    detail::gemm<Space>("T", "N", real_t(1), dy2, detail::as_matrix<Space>(x, n, k), real_t(1),
                     detail::as_matrix<Space>(dw, m, k));
  }
  detail::bias_grad<Space>(dy2, ones, db);
  if (dx.data() != nullptr && k > 0) {
    detail::gemm<Space>("N", "N", real_t(1), dy2, detail::as_matrix<Space>(w, m, k), real_t(0),
                     detail::as_matrix<Space>(dx, n, k));
  }
}

}  // namespace asgd::kernels
