#pragma once
// Local response normalisation (kernels/elementwise.hpp: LrnParams and the window).
//
// Host kernels, one image row per iteration: the window sums run over whole
// rows of channels (contiguous in NHWC), so they vectorise, and no index is
// divided per element. Each element's sum adds its window in the order of
// elem::lrn_window (rows, then columns; channels upwards), as the reference does,
// and no value depends on how rows are split over threads.
#include <cmath>

#include "kernels/common.hpp"

namespace asgd::kernels {

namespace detail {

// dst[i] = sum over i's window of f(src[j]) for the elements i of image row r
// (r = image * h + y), where f squares (the forward pass) or not (the backward pass).
template <bool Square>
KOKKOS_INLINE_FUNCTION void lrn_window_row(const LrnParams& p, index_t r, const real_t* src, real_t* dst) {
  const index_t c = p.c, w = p.w, half = p.size / 2;
  real_t* out = dst + r * w * c;
  if (p.cross_map) {
    for (index_t ix = 0; ix < w; ++ix) {
      const real_t* v = src + (r * w + ix) * c;
      for (index_t ch = 0; ch < c; ++ch) {
        const index_t lo = ch - half < 0 ? 0 : ch - half, hi = ch + half > c - 1 ? c - 1 : ch + half;
        real_t s = 0;
        for (index_t j = lo; j <= hi; ++j) s += Square ? v[j] * v[j] : v[j];
        out[ix * c + ch] = s;
      }
    }
    return;
  }
  const index_t b = r / p.h, iy = r % p.h;
  const index_t y0 = iy - half < 0 ? 0 : iy - half, y1 = iy + half > p.h - 1 ? p.h - 1 : iy + half;
  for (index_t ix = 0; ix < w; ++ix) {
    const index_t x0 = ix - half < 0 ? 0 : ix - half, x1 = ix + half > w - 1 ? w - 1 : ix + half;
    channel_blocks(c, [&](index_t ch0, auto width) {
      constexpr index_t B = decltype(width)::value;
      real_t acc[B] = {};
      for (index_t yy = y0; yy <= y1; ++yy)
        for (index_t xx = x0; xx <= x1; ++xx) {
          const real_t* v = src + ((b * p.h + yy) * w + xx) * c + ch0;
          for (index_t k = 0; k < B; ++k) acc[k] += Square ? v[k] * v[k] : v[k];
        }
      for (index_t k = 0; k < B; ++k) out[ix * c + ch0 + k] = acc[k];
    });
  }
}

// d^-beta. beta = 0.75 (every LRN of the model zoo) as r sqrt(r) with
// r = 1 / sqrt(d), which vectorises where pow does not and stays finite over
// the whole float range of d.
template <bool ThreeQuarters>
KOKKOS_INLINE_FUNCTION real_t lrn_power(real_t d, real_t beta) {
  if constexpr (ThreeQuarters) {
    const real_t r = real_t(1) / std::sqrt(d);
    return r * std::sqrt(r);
  }
  else return kmath::pow(d, -beta);
}

template <class Space, bool ThreeQuarters>
void lrn_forward_rows(const LrnParams& q, real_t scale, const View1<Space>& x, const View1<Space>& denom,
                      const View1<Space>& y) {
  const real_t* xp = x.data();
  real_t *dp = denom.data(), *yp = y.data();
  const index_t row = q.w * q.c;
  Kokkos::parallel_for(
      "asgd::lrn_forward", Kokkos::RangePolicy<Space>(0, q.n * q.h), KOKKOS_LAMBDA(index_t r) {
        lrn_window_row<true>(q, r, xp, dp);
        for (index_t i = r * row; i < (r + 1) * row; ++i) {
          const real_t d = q.k + scale * dp[i];
          dp[i] = d;
          yp[i] = xp[i] * lrn_power<ThreeQuarters>(d, q.beta);
        }
      });
}

template <class Space, bool ThreeQuarters>
void lrn_backward_rows(const LrnParams& q, real_t scale, const View1<Space>& x, const View1<Space>& y,
                       const View1<Space>& denom, const View1<Space>& dy, const View1<Space>& t,
                       const View1<Space>& dx) {
  const real_t *xp = x.data(), *yp = y.data(), *dp = denom.data(), *gp = dy.data();
  real_t *tp = t.data(), *op = dx.data();
  const index_t row = q.w * q.c;
  Kokkos::parallel_for(
      "asgd::lrn_backward[t]", Kokkos::RangePolicy<Space>(0, q.n * q.h), KOKKOS_LAMBDA(index_t r) {
        for (index_t i = r * row; i < (r + 1) * row; ++i) tp[i] = gp[i] * yp[i] / dp[i];
      });
  const real_t coeff = real_t(2) * q.beta * scale;
  Kokkos::parallel_for(
      "asgd::lrn_backward", Kokkos::RangePolicy<Space>(0, q.n * q.h), KOKKOS_LAMBDA(index_t r) {
        lrn_window_row<false>(q, r, tp, op);
        for (index_t i = r * row; i < (r + 1) * row; ++i)
          op[i] = gp[i] * lrn_power<ThreeQuarters>(dp[i], q.beta) - coeff * xp[i] * op[i];
      });
}

}  // namespace detail

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
  if (p.beta == real_t(0.75)) detail::lrn_forward_rows<Space, true>(p, elem::lrn_scale(p), x, denom, y);
  else detail::lrn_forward_rows<Space, false>(p, elem::lrn_scale(p), x, denom, y);
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
  if (p.beta == real_t(0.75)) detail::lrn_backward_rows<Space, true>(p, elem::lrn_scale(p), x, y, denom, dy, t, dx);
  else detail::lrn_backward_rows<Space, false>(p, elem::lrn_scale(p), x, y, denom, dy, t, dx);
}

}  // namespace asgd::kernels
