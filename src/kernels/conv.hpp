#pragma once
// Convolution as im2col + one GEMM: x[N, H, W, C] -> col[N*OH*OW, K] -> y[N*OH*OW, F]
// (rows (n, oh, ow), columns (kh, kw, c); the product already is NHWC).
// kernels/conv_rows.hpp: the row-folded form; kernels/common.hpp: conventions.
#include "kernels/common.hpp"

namespace asgd::kernels {

namespace detail {

// The taps j of a kernel row whose window starts at column x0 (may be negative)
// that fall inside [0, w): [lo, hi), empty when lo == hi. Those taps read
// consecutive input pixels, which are contiguous in NHWC.
struct TapRange {
  index_t lo, hi;
};
KOKKOS_INLINE_FUNCTION TapRange inside_taps(index_t x0, index_t kw, index_t w) {
  const index_t lo = x0 < 0 ? (-x0 < kw ? -x0 : kw) : 0;
  const index_t hi = w - x0 < kw ? (w - x0 > lo ? w - x0 : lo) : kw;
  return {lo, hi};
}

// One kernel row of an im2col/im2row row: out[j*C + c] = src[(x0 + j)*C + c] for
// the taps inside [0, w), zero for the rest; src is the input row (n, iy), or
// nullptr when iy lies in the padding. Inside taps are one copy (contiguous in NHWC).
KOKKOS_INLINE_FUNCTION void copy_taps(real_t* out, const real_t* src, index_t x0, index_t kw,
                                      index_t w, index_t c) {
  const std::size_t cb = static_cast<std::size_t>(c) * sizeof(real_t);
  if (src == nullptr) {
    memset(out, 0, cb * static_cast<std::size_t>(kw));
    return;
  }
  const auto [lo, hi] = inside_taps(x0, kw, w);
  if (lo > 0) memset(out, 0, cb * static_cast<std::size_t>(lo));
  if (hi > lo) memcpy(out + lo * c, src + (x0 + lo) * c, cb * static_cast<std::size_t>(hi - lo));
  if (hi < kw) memset(out + hi * c, 0, cb * static_cast<std::size_t>(kw - hi));
}

}  // namespace detail

// ---------------------------------------------------------------------------
// Convolution: x[N, H, W, C] -> col[N*OH*OW, K] -> y[N*OH*OW, F]
// ---------------------------------------------------------------------------
template <class Space>
void im2col(const Window& g, const View1<Space>& x, const View1<Space>& col) {
  detail::check_len("im2col", "x", x.extent(0), g.n * g.h * g.w * g.c);
  detail::check_len("im2col", "col", col.extent(0), g.n * g.oh * g.ow * g.kh * g.kw * g.c);
  const Window q = g;
  const index_t rows = g.n * g.oh * g.ow;
  Kokkos::parallel_for(
      "asgd::conv2d_forward[im2col]", Kokkos::RangePolicy<Space>(0, rows),
      KOKKOS_LAMBDA(index_t r) {
        const auto [b, oy, ox] = elem::pixel_of(r, q.oh, q.ow);
        const index_t x0 = ox * q.stride - q.pad;
        real_t* out = col.data() + r * q.kh * q.kw * q.c;
        for (index_t i = 0; i < q.kh; ++i, out += q.kw * q.c) {
          const index_t iy = oy * q.stride - q.pad + i;
          const bool inside = iy >= 0 && iy < q.h;
          detail::copy_taps(out, inside ? x.data() + (b * q.h + iy) * q.w * q.c : nullptr, x0,
                            q.kw, q.w, q.c);
        }
      });
}

// dx[n, y, x, c] = sum of dcol entries that im2col copied from (n, y, x, c).
// Gather form, no atomics: on the host each input row (n, y) sums its own
// contributions, one contiguous run of (taps inside) x C values per output
// pixel and kernel row; on a device each input pixel sums its own.
template <class Space>
void col2im(const Window& g, const View1<Space>& dcol, const View1<Space>& dx) {
  detail::check_len("col2im", "dcol", dcol.extent(0), g.n * g.oh * g.ow * g.kh * g.kw * g.c);
  detail::check_len("col2im", "dx", dx.extent(0), g.n * g.h * g.w * g.c);
  const Window q = g;
  if constexpr (detail::host_space<Space>) {
    const index_t krow = q.kw * q.c, kk = q.kh * krow;
    Kokkos::parallel_for(
        "asgd::conv2d_backward[col2im]", Kokkos::RangePolicy<Space>(0, g.n * g.h),
        KOKKOS_LAMBDA(index_t row) {
          const index_t iy = row % q.h, b = row / q.h;
          real_t* __restrict out = dx.data() + row * q.w * q.c;
          for (index_t e = 0; e < q.w * q.c; ++e) out[e] = real_t(0);
          const auto ry = elem::covering(iy + q.pad, q.kh, q.stride, q.oh);
          for (index_t oy = ry.lo; oy <= ry.hi; ++oy) {
            const index_t i = iy + q.pad - oy * q.stride;
            const real_t* src_row = dcol.data() + (b * q.oh + oy) * q.ow * kk + i * krow;
            for (index_t ox = 0; ox < q.ow; ++ox) {
              const index_t x0 = ox * q.stride - q.pad;
              const auto [j_lo, j_hi] = detail::inside_taps(x0, q.kw, q.w);
              const real_t* __restrict src = src_row + ox * kk + j_lo * q.c;
              real_t* __restrict acc = out + (x0 + j_lo) * q.c;  // dx and dcol never overlap
              const index_t len = (j_hi - j_lo) * q.c;
              for (index_t e = 0; e < len; ++e) acc[e] += src[e];
            }
          }
        });
    return;
  }
  const index_t pixels = g.n * g.h * g.w;
  Kokkos::parallel_for(
      "asgd::conv2d_backward[col2im]", Kokkos::RangePolicy<Space>(0, pixels),
      KOKKOS_LAMBDA(index_t p) {
        const auto [b, iy, ix] = elem::pixel_of(p, q.h, q.w);
        real_t* out = dx.data() + p * q.c;
        for (index_t ch = 0; ch < q.c; ++ch) out[ch] = real_t(0);
        const index_t py = iy + q.pad, px = ix + q.pad;
        // output rows oy with oy*stride <= py <= oy*stride + kh - 1
        const auto ry = elem::covering(py, q.kh, q.stride, q.oh);
        const auto rx = elem::covering(px, q.kw, q.stride, q.ow);
        for (index_t oy = ry.lo; oy <= ry.hi; ++oy) {
          const index_t i = py - oy * q.stride;
          for (index_t ox = rx.lo; ox <= rx.hi; ++ox) {
            const index_t j = px - ox * q.stride;
            const real_t* __restrict src =
                dcol.data() + (((b * q.oh + oy) * q.ow + ox) * q.kh * q.kw + i * q.kw + j) * q.c;
            real_t* __restrict acc = out;  // dx and dcol never overlap
            for (index_t ch = 0; ch < q.c; ++ch) acc[ch] += src[ch];
          }
        }
      });
}

namespace detail {
// The checks both convolution backward passes share. True when there are no
// outputs: then dx (overwritten, not accumulated) is a sum over nothing, set to 0.
template <class Space>
bool conv_backward_begin(const char* what, const Window& g, index_t f, const View1<Space>& wt,
                         const View1<Space>& dy, const View1<Space>& dx, const View1<Space>& dwt,
                         const View1<Space>& db, const View1<Space>& ones) {
  const index_t k = g.kh * g.kw * g.c, rows = g.n * g.oh * g.ow;
  check_len(what, "wt", wt.extent(0), k * f);
  check_len(what, "dy", dy.extent(0), rows * f);
  check_len(what, "dwt", dwt.extent(0), k * f);
  check_len(what, "db", db.extent(0), f);
  check_len(what, "ones", ones.extent(0), rows);
  if (rows > 0 && f > 0) return false;
  const index_t nx = g.n * g.h * g.w * g.c;
  if (dx.data() != nullptr && nx > 0) {
    check_len(what, "dx", dx.extent(0), nx);
    Kokkos::deep_copy(Kokkos::subview(dx, std::make_pair(index_t(0), nx)), real_t(0));
  }
  return true;
}
// What follows dwt in both: db += column sums of dy; if dx.data(): dcol = dy
// wt^T and dx = col2im(dcol).
template <class Space>
void conv_backward_end(const char* what, const Window& g, index_t f, const View1<Space>& wt,
                       const View1<Space>& dy, const View1<Space>& dcol, const View1<Space>& dx,
                       const View1<Space>& db, const View1<Space>& ones) {
  const index_t k = g.kh * g.kw * g.c, rows = g.n * g.oh * g.ow;
  auto dy2 = as_matrix<Space>(dy, rows, f);
  bias_grad<Space>(dy2, ones, db);
  if (dx.data() == nullptr) return;
  check_len(what, "dcol", dcol.extent(0), rows * k);
  gemm<Space>("N", "T", real_t(1), dy2, as_matrix<Space>(wt, k, f), real_t(0),
                   as_matrix<Space>(dcol, rows, k));
  col2im<Space>(g, dcol, dx);
}
}  // namespace detail

// y = conv(x, wt) + b. wt is [KH*KW*C, F]; col is the im2col workspace, kept
// for the backward pass.
template <class Space>
void conv2d_forward(const Window& g, index_t f, const View1<Space>& x, const View1<Space>& wt,
                    const View1<Space>& b, const View1<Space>& col, const View1<Space>& y) {
  const char* what = "conv2d_forward";
  const index_t k = g.kh * g.kw * g.c, rows = g.n * g.oh * g.ow;
  detail::check_len(what, "wt", wt.extent(0), k * f);
  detail::check_len(what, "b", b.extent(0), f);
  detail::check_len(what, "y", y.extent(0), rows * f);
  if (rows == 0 || f == 0) return;
  im2col<Space>(g, x, col);
  auto y2 = detail::as_matrix<Space>(y, rows, f);
  detail::gemm<Space>("N", "N", real_t(1), detail::as_matrix<Space>(col, rows, k),
                   detail::as_matrix<Space>(wt, k, f), real_t(0), y2);
  detail::add_bias<Space>(y2, b);
}

// dwt += col^T dy; db += column sums of dy; if dx.data(): dcol = dy wt^T and
// dx = col2im(dcol). col must hold im2col(x) from the forward pass.
template <class Space>
void conv2d_backward(const Window& g, index_t f, const View1<Space>& col, const View1<Space>& wt,
                     const View1<Space>& dy, const View1<Space>& dcol, const View1<Space>& dx,
                     const View1<Space>& dwt, const View1<Space>& db, const View1<Space>& ones) {
  const char* what = "conv2d_backward";
  const index_t k = g.kh * g.kw * g.c, rows = g.n * g.oh * g.ow;
  detail::check_len(what, "col", col.extent(0), rows * k);
  if (detail::conv_backward_begin<Space>(what, g, f, wt, dy, dx, dwt, db, ones)) return;
  detail::gemm<Space>("T", "N", real_t(1), detail::as_matrix<Space>(col, rows, k),
                   detail::as_matrix<Space>(dy, rows, f), real_t(1),
                   detail::as_matrix<Space>(dwt, k, f));
  detail::conv_backward_end<Space>(what, g, f, wt, dy, dcol, dx, db, ones);
}

}  // namespace asgd::kernels
