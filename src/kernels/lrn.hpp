#pragma once
// Local response normalisation (kernels/elementwise.hpp: LrnParams and the window).
#include "kernels/common.hpp"

namespace asgd::kernels {

// Local response normalisation on NHWC data (kernels/elementwise.hpp:
// LrnParams, the formula and elem::lrn_window).
// denom is a workspace (same size as x) kept for the backward pass.
template <class Space>
void lrn_forward(const LrnParams& p, const View1<Space>& x, const View1<Space>& denom,
                 const View1<Space>& y) {
  check_lrn(p);
  const index_t total = p.n * p.h * p.w * p.c;
  detail::check_len("lrn_forward", "x", x.extent(0), total);
  detail::check_len("lrn_forward", "denom", denom.extent(0), total);
  detail::check_len("lrn_forward", "y", y.extent(0), total);
  const LrnParams q = p;
  const real_t scale = elem::lrn_scale(p);
  Kokkos::parallel_for(
      "asgd::lrn_forward", Kokkos::RangePolicy<Space>(0, total), KOKKOS_LAMBDA(index_t i) {
        real_t s = 0;
        elem::lrn_window(q, i, [&](index_t j) { s += x(j) * x(j); });
        const real_t d = q.k + scale * s;
        denom(i) = d;
        y(i) = x(i) * kmath::pow(d, -q.beta);
      });
}

// dx_i = dy_i d_i^-beta - 2 beta (alpha/S) x_i sum_{j in window(i)} dy_j y_j / d_j
// (windows are symmetric, so i in window(j) iff j in window(i)). t is a
// workspace the size of x.
template <class Space>
void lrn_backward(const LrnParams& p, const View1<Space>& x, const View1<Space>& y,
                  const View1<Space>& denom, const View1<Space>& dy, const View1<Space>& t,
                  const View1<Space>& dx) {
  check_lrn(p);
  const index_t total = p.n * p.h * p.w * p.c;
  for (auto [name, len] : {std::pair{"x", x.extent(0)}, {"y", y.extent(0)},
                           {"denom", denom.extent(0)}, {"dy", dy.extent(0)},
                           {"t", t.extent(0)}, {"dx", dx.extent(0)}})
    detail::check_len("lrn_backward", name, len, total);
  const LrnParams q = p;
  const real_t scale = elem::lrn_scale(p);
  Kokkos::parallel_for(
      "asgd::lrn_backward[t]", Kokkos::RangePolicy<Space>(0, total),
      KOKKOS_LAMBDA(index_t i) { t(i) = dy(i) * y(i) / denom(i); });
  Kokkos::parallel_for(
      "asgd::lrn_backward", Kokkos::RangePolicy<Space>(0, total), KOKKOS_LAMBDA(index_t i) {
        real_t s = 0;
        elem::lrn_window(q, i, [&](index_t j) { s += t(j); });
        dx(i) = dy(i) * kmath::pow(denom(i), -q.beta) - real_t(2) * q.beta * scale * x(i) * s;
      });
}

}  // namespace asgd::kernels
