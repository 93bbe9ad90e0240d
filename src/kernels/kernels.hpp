#pragma once
// Kokkos kernels for every layer, forward and backward.
//
// Layout is NHWC throughout, LayoutRight:
//   N = batch, H, W = height, width, C = channels, F = filters (output channels),
//   KH, KW = kernel height, width, K = KH*KW*C (im2col row length),
//   M = outputs of a dense layer.
// A convolution is im2col (rows (n, oh, ow), columns (kh, kw, c)) followed by one
// GEMM col[N*OH*OW, K] x Wt[K, F] -> y[N*OH*OW, F], which already is NHWC.
//
// Public entry points check ranks and extents on the host and throw asgd::Error
// with every extent in the message; the functors they launch check nothing and
// allocate nothing. Backward passes ADD into parameter gradients (callers zero
// them) and OVERWRITE activation gradients (dx).
#include <KokkosBlas1_fill.hpp>
#include <KokkosBlas3_gemm.hpp>
#include <Kokkos_Core.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fmt/format.h>
#include <limits>
#include <string>

#include "common/error.hpp"
#include "common/types.hpp"
#include "kernels/geometry.hpp"

namespace asgd::kernels {

// Kokkos 3.4 keeps its math functions in Kokkos::Experimental; 3.7+ in Kokkos.
namespace kmath {
#if KOKKOS_VERSION >= 30700
using Kokkos::exp;
using Kokkos::log;
using Kokkos::pow;
#else
using Kokkos::Experimental::exp;
using Kokkos::Experimental::log;
using Kokkos::Experimental::pow;
#endif
// v if keep else +0, with integer masking: compilers turn a float select or a
// multiply by a 0/1 mask into a branch, which mispredicts half the time on the
// random signs of activations.
KOKKOS_INLINE_FUNCTION float keep_if(float v, bool keep) {
  std::uint32_t bits;
  memcpy(&bits, &v, sizeof bits);
  bits &= 0u - static_cast<std::uint32_t>(keep);
  memcpy(&v, &bits, sizeof v);
  return v;
}
template <class T>
KOKKOS_INLINE_FUNCTION constexpr T neg_infinity() {
  return -Kokkos::Experimental::infinity<T>::value;
}
}  // namespace kmath

template <class Space>
using View1 = Kokkos::View<real_t*, Kokkos::LayoutRight, typename Space::memory_space>;
template <class Space>
using View2 = Kokkos::View<real_t**, Kokkos::LayoutRight, typename Space::memory_space>;
template <class Space>
using IView1 = Kokkos::View<std::int32_t*, Kokkos::LayoutRight, typename Space::memory_space>;

namespace detail {

inline void check_len(const char* what, const char* name, std::size_t have, index_t want) {
  if (static_cast<index_t>(have) < want)
    throw Error(fmt::format("{}: {} has {} elements, needs {}", what, name, have, want));
}

template <class Space>
View2<Space> as_matrix(const View1<Space>& v, index_t rows, index_t cols) {
  return View2<Space>(v.data(), rows, cols);
}

// y[r, f] += b[f] for every row r.
template <class Space>
void add_bias(const View2<Space>& y, const View1<Space>& b) {
  const index_t cols = y.extent(1);
  Kokkos::parallel_for(
      "asgd::add_bias", Kokkos::RangePolicy<Space>(0, y.extent(0)), KOKKOS_LAMBDA(index_t r) {
        for (index_t f = 0; f < cols; ++f) y(r, f) += b(f);
      });
}

// The outputs whose window covers input position p (padded coordinates):
// o with o*stride <= p <= o*stride + k - 1, clipped to [0, n_out).
struct OutRange {
  index_t lo, hi;  // inclusive; empty when lo > hi
};
KOKKOS_INLINE_FUNCTION OutRange covering(index_t p, index_t k, index_t stride, index_t n_out) {
  return {p >= k ? (p - k) / stride + 1 : 0, p / stride < n_out - 1 ? p / stride : n_out - 1};
}

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

// db[F] += column sums of dy[R, F], as a GEMM with a ones vector so the
// vendor BLAS does the reduction (KokkosBlas' own gemv on LayoutRight is slow).
template <class Space>
void bias_grad(const View2<Space>& dy, const View1<Space>& ones, const View1<Space>& db) {
  const index_t rows = dy.extent(0), cols = dy.extent(1);
  KokkosBlas::gemm("T", "N", real_t(1), dy, View2<Space>(ones.data(), rows, 1), real_t(1),
                   View2<Space>(db.data(), cols, 1));
}

}  // namespace detail

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
    KokkosBlas::gemm("N", "T", real_t(1), detail::as_matrix<Space>(x, n, k),
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
    KokkosBlas::gemm("T", "N", real_t(1), dy2, detail::as_matrix<Space>(x, n, k), real_t(1),
                     detail::as_matrix<Space>(dw, m, k));
  }
  detail::bias_grad<Space>(dy2, ones, db);
  if (dx.data() != nullptr && k > 0) {
    KokkosBlas::gemm("N", "N", real_t(1), dy2, detail::as_matrix<Space>(w, m, k), real_t(0),
                     detail::as_matrix<Space>(dx, n, k));
  }
}

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
        const index_t ox = r % q.ow;
        const index_t oy = (r / q.ow) % q.oh;
        const index_t b = r / (q.ow * q.oh);
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
  if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace,
                                           typename Space::memory_space>::accessible) {
    const index_t krow = q.kw * q.c, kk = q.kh * krow;
    Kokkos::parallel_for(
        "asgd::conv2d_backward[col2im]", Kokkos::RangePolicy<Space>(0, g.n * g.h),
        KOKKOS_LAMBDA(index_t row) {
          const index_t iy = row % q.h, b = row / q.h;
          real_t* __restrict out = dx.data() + row * q.w * q.c;
          for (index_t e = 0; e < q.w * q.c; ++e) out[e] = real_t(0);
          const auto ry = detail::covering(iy + q.pad, q.kh, q.stride, q.oh);
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
        const index_t ix = p % q.w;
        const index_t iy = (p / q.w) % q.h;
        const index_t b = p / (q.w * q.h);
        real_t* out = dx.data() + p * q.c;
        for (index_t ch = 0; ch < q.c; ++ch) out[ch] = real_t(0);
        const index_t py = iy + q.pad, px = ix + q.pad;
        // output rows oy with oy*stride <= py <= oy*stride + kh - 1
        const auto ry = detail::covering(py, q.kh, q.stride, q.oh);
        const auto rx = detail::covering(px, q.kw, q.stride, q.ow);
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
  KokkosBlas::gemm("N", "T", real_t(1), dy2, as_matrix<Space>(wt, k, f), real_t(0),
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
  KokkosBlas::gemm("N", "N", real_t(1), detail::as_matrix<Space>(col, rows, k),
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
  KokkosBlas::gemm("T", "N", real_t(1), detail::as_matrix<Space>(col, rows, k),
                   detail::as_matrix<Space>(dy, rows, f), real_t(1),
                   detail::as_matrix<Space>(dwt, k, f));
  detail::conv_backward_end<Space>(what, g, f, wt, dy, dcol, dx, db, ones);
}

// ---------------------------------------------------------------------------
// Convolution, row-folded form (stride 1): instead of all KH*KW taps, the
// workspace holds each padded input row's KW taps once,
//   rows[(n, hp, ox), (j, c)] = x[n, hp - pad, ox - pad + j, c],  hp in [0, H + 2*pad),
// and kernel row i of output row oy reads workspace row hp = oy + i. For one
// sample and one kernel row that is a contiguous [OH*OW, KW*C] block, so
//   y_n = sum_i rows_n[i*OW ...] x wt[i*KW*C ..., F]
// is KH GEMMs of inner dimension KW*C. The workspace is (H+2*pad)/(KH*OH) of
// im2col's (1/4 at 16x16, 5x5, pad 2), which is the copy the layer saves; the
// GEMMs run as fast as the single one on the full im2col matrix. One GEMM per
// sample and kernel row: meant for the host, for layers with many output pixels.
// ---------------------------------------------------------------------------
inline index_t im2row_len(const Window& g) {
  return g.n * (g.h + 2 * g.pad) * g.ow * g.kw * g.c;
}

template <class Space>
void im2row(const Window& g, const View1<Space>& x, const View1<Space>& rows) {
  detail::check_len("im2row", "x", x.extent(0), g.n * g.h * g.w * g.c);
  detail::check_len("im2row", "rows", rows.extent(0), im2row_len(g));
  const Window q = g;
  const index_t hp_n = g.h + 2 * g.pad;
  Kokkos::parallel_for(
      "asgd::conv2d[im2row]", Kokkos::RangePolicy<Space>(0, g.n * hp_n * g.ow),
      KOKKOS_LAMBDA(index_t r) {
        const index_t ox = r % q.ow;
        const index_t hp = (r / q.ow) % hp_n;
        const index_t b = r / (q.ow * hp_n);
        const index_t iy = hp - q.pad;
        const bool inside = iy >= 0 && iy < q.h;
        detail::copy_taps(rows.data() + r * q.kw * q.c,
                          inside ? x.data() + (b * q.h + iy) * q.w * q.c : nullptr,
                          ox * q.stride - q.pad, q.kw, q.w, q.c);
      });
}

namespace detail {
inline void check_stride1(const char* what, const Window& g) {
  if (g.stride != 1)
    throw Error(fmt::format("{}: the row-folded convolution needs stride 1 (stride {})", what,
                            g.stride));
}
// Sample b's block for kernel row i: [OH*OW, KW*C], and kernel row i of wt: [KW*C, F].
template <class Space>
View2<Space> row_block(const Window& g, const View1<Space>& rows, index_t b, index_t i) {
  const index_t krow = g.kw * g.c;
  return View2<Space>(rows.data() + ((b * (g.h + 2 * g.pad) + i) * g.ow) * krow, g.oh * g.ow,
                      krow);
}
template <class Space>
View2<Space> weight_row(const Window& g, index_t f, const View1<Space>& wt, index_t i) {
  const index_t krow = g.kw * g.c;
  return View2<Space>(wt.data() + i * krow * f, krow, f);
}
}  // namespace detail

// y = conv(x, wt) + b, as conv2d_forward; rows is the im2row workspace
// (im2row_len(g)), kept for the backward pass.
template <class Space>
void conv2d_forward_rows(const Window& g, index_t f, const View1<Space>& x, const View1<Space>& wt,
                         const View1<Space>& b, const View1<Space>& rows, const View1<Space>& y) {
  const char* what = "conv2d_forward_rows";
  detail::check_stride1(what, g);
  const index_t k = g.kh * g.kw * g.c, pix = g.oh * g.ow;
  detail::check_len(what, "wt", wt.extent(0), k * f);
  detail::check_len(what, "b", b.extent(0), f);
  detail::check_len(what, "y", y.extent(0), g.n * pix * f);
  if (g.n * pix == 0 || f == 0) return;
  im2row<Space>(g, x, rows);
  for (index_t n = 0; n < g.n; ++n) {
    const View2<Space> yn(y.data() + n * pix * f, pix, f);
    for (index_t i = 0; i < g.kh; ++i)
      KokkosBlas::gemm("N", "N", real_t(1), detail::row_block<Space>(g, rows, n, i),
                       detail::weight_row<Space>(g, f, wt, i), real_t(i == 0 ? 0 : 1), yn);
  }
  detail::add_bias<Space>(detail::as_matrix<Space>(y, g.n * pix, f), b);
}

// As conv2d_backward, from the im2row workspace: dwt += sum over samples and
// kernel rows of rows_n^T dy_n; db += column sums of dy; if dx.data(): dcol =
// dy wt^T (the full im2col shape) and dx = col2im(dcol).
template <class Space>
void conv2d_backward_rows(const Window& g, index_t f, const View1<Space>& rows,
                          const View1<Space>& wt, const View1<Space>& dy,
                          const View1<Space>& dcol, const View1<Space>& dx,
                          const View1<Space>& dwt, const View1<Space>& db,
                          const View1<Space>& ones) {
  const char* what = "conv2d_backward_rows";
  detail::check_stride1(what, g);
  detail::check_len(what, "rows", rows.extent(0), im2row_len(g));
  if (detail::conv_backward_begin<Space>(what, g, f, wt, dy, dx, dwt, db, ones)) return;
  const index_t pix = g.oh * g.ow;
  for (index_t n = 0; n < g.n; ++n) {
    const View2<Space> dyn(dy.data() + n * pix * f, pix, f);
    for (index_t i = 0; i < g.kh; ++i)
      KokkosBlas::gemm("T", "N", real_t(1), detail::row_block<Space>(g, rows, n, i), dyn,
                       real_t(1), detail::weight_row<Space>(g, f, dwt, i));
  }
  detail::conv_backward_end<Space>(what, g, f, wt, dy, dcol, dx, db, ones);
}

// ---------------------------------------------------------------------------
// Pooling (ceil mode, clipped windows): x[N, H, W, C] -> y[N, OH, OW, C]
// ---------------------------------------------------------------------------
template <class Space>
void maxpool_forward(const Window& g, const View1<Space>& x, const View1<Space>& y,
                     const IView1<Space>& argmax) {
  detail::check_len("maxpool_forward", "x", x.extent(0), g.n * g.h * g.w * g.c);
  detail::check_len("maxpool_forward", "y", y.extent(0), g.n * g.oh * g.ow * g.c);
  detail::check_len("maxpool_forward", "argmax", argmax.extent(0), g.n * g.oh * g.ow * g.c);
  const Window q = g;
  Kokkos::parallel_for(
      "asgd::maxpool_forward", Kokkos::RangePolicy<Space>(0, g.n * g.oh * g.ow),
      KOKKOS_LAMBDA(index_t r) {
        const index_t ox = r % q.ow, oy = (r / q.ow) % q.oh, b = r / (q.ow * q.oh);
        const index_t y0 = oy * q.stride, x0 = ox * q.stride;
        const index_t y1 = y0 + q.kh < q.h ? y0 + q.kh : q.h;
        const index_t x1 = x0 + q.kw < q.w ? x0 + q.kw : q.w;
        // Channels innermost: contiguous in NHWC, so the compare vectorises.
        real_t* __restrict best = y.data() + r * q.c;
        std::int32_t* __restrict at = argmax.data() + r * q.c;
        for (index_t ch = 0; ch < q.c; ++ch) {
          best[ch] = kmath::neg_infinity<real_t>();
          at[ch] = static_cast<std::int32_t>(y0 * q.w + x0);
        }
        for (index_t iy = y0; iy < y1; ++iy)
          for (index_t ix = x0; ix < x1; ++ix) {
            const real_t* __restrict src = x.data() + ((b * q.h + iy) * q.w + ix) * q.c;
            const auto here = static_cast<std::int32_t>(iy * q.w + ix);
            for (index_t ch = 0; ch < q.c; ++ch) {
              // masks, not a branch: which element wins is data-dependent
              const std::int32_t m = -static_cast<std::int32_t>(src[ch] > best[ch]);
              best[ch] = src[ch] > best[ch] ? src[ch] : best[ch];
              at[ch] = (here & m) | (at[ch] & ~m);
            }
          }
      });
}

// dx = sum over windows whose maximum was this element of dy (gather form).
template <class Space>
void maxpool_backward(const Window& g, const IView1<Space>& argmax, const View1<Space>& dy,
                      const View1<Space>& dx) {
  detail::check_len("maxpool_backward", "dy", dy.extent(0), g.n * g.oh * g.ow * g.c);
  detail::check_len("maxpool_backward", "dx", dx.extent(0), g.n * g.h * g.w * g.c);
  const Window q = g;
  Kokkos::parallel_for(
      "asgd::maxpool_backward", Kokkos::RangePolicy<Space>(0, g.n * g.h * g.w),
      KOKKOS_LAMBDA(index_t p) {
        const index_t ix = p % q.w, iy = (p / q.w) % q.h, b = p / (q.w * q.h);
        const auto self = static_cast<std::int32_t>(iy * q.w + ix);
        const auto ry = detail::covering(iy, q.kh, q.stride, q.oh);
        const auto rx = detail::covering(ix, q.kw, q.stride, q.ow);
        real_t* out = dx.data() + p * q.c;
        for (index_t ch = 0; ch < q.c; ++ch) out[ch] = 0;
        for (index_t oy = ry.lo; oy <= ry.hi; ++oy)
          for (index_t ox = rx.lo; ox <= rx.hi; ++ox) {
            const index_t o = ((b * q.oh + oy) * q.ow + ox) * q.c;
            for (index_t ch = 0; ch < q.c; ++ch)
              out[ch] += kmath::keep_if(dy(o + ch), argmax(o + ch) == self);
          }
      });
}

// Average over the valid (clipped) part of each window.
template <class Space>
void avgpool_forward(const Window& g, const View1<Space>& x, const View1<Space>& y) {
  detail::check_len("avgpool_forward", "x", x.extent(0), g.n * g.h * g.w * g.c);
  detail::check_len("avgpool_forward", "y", y.extent(0), g.n * g.oh * g.ow * g.c);
  const Window q = g;
  Kokkos::parallel_for(
      "asgd::avgpool_forward", Kokkos::RangePolicy<Space>(0, g.n * g.oh * g.ow),
      KOKKOS_LAMBDA(index_t r) {
        const index_t ox = r % q.ow, oy = (r / q.ow) % q.oh, b = r / (q.ow * q.oh);
        const index_t y0 = oy * q.stride, x0 = ox * q.stride;
        const index_t y1 = y0 + q.kh < q.h ? y0 + q.kh : q.h;
        const index_t x1 = x0 + q.kw < q.w ? x0 + q.kw : q.w;
        const real_t inv = real_t(1) / static_cast<real_t>((y1 - y0) * (x1 - x0));
        real_t* out = y.data() + r * q.c;
        for (index_t ch = 0; ch < q.c; ++ch) out[ch] = 0;
        for (index_t iy = y0; iy < y1; ++iy)
          for (index_t ix = x0; ix < x1; ++ix) {
            const real_t* src = x.data() + ((b * q.h + iy) * q.w + ix) * q.c;
            for (index_t ch = 0; ch < q.c; ++ch) out[ch] += src[ch];
          }
        for (index_t ch = 0; ch < q.c; ++ch) out[ch] *= inv;
      });
}

template <class Space>
void avgpool_backward(const Window& g, const View1<Space>& dy, const View1<Space>& dx) {
  detail::check_len("avgpool_backward", "dy", dy.extent(0), g.n * g.oh * g.ow * g.c);
  detail::check_len("avgpool_backward", "dx", dx.extent(0), g.n * g.h * g.w * g.c);
  const Window q = g;
  Kokkos::parallel_for(
      "asgd::avgpool_backward", Kokkos::RangePolicy<Space>(0, g.n * g.h * g.w),
      KOKKOS_LAMBDA(index_t p) {
        const index_t ix = p % q.w, iy = (p / q.w) % q.h, b = p / (q.w * q.h);
        const auto ry = detail::covering(iy, q.kh, q.stride, q.oh);
        const auto rx = detail::covering(ix, q.kw, q.stride, q.ow);
        real_t* out = dx.data() + p * q.c;
        for (index_t ch = 0; ch < q.c; ++ch) out[ch] = 0;
        for (index_t oy = ry.lo; oy <= ry.hi; ++oy) {
          const index_t y0 = oy * q.stride, y1 = y0 + q.kh < q.h ? y0 + q.kh : q.h;
          for (index_t ox = rx.lo; ox <= rx.hi; ++ox) {
            const index_t x0 = ox * q.stride, x1 = x0 + q.kw < q.w ? x0 + q.kw : q.w;
            const real_t inv = real_t(1) / static_cast<real_t>((y1 - y0) * (x1 - x0));
            const real_t* src = dy.data() + ((b * q.oh + oy) * q.ow + ox) * q.c;
            for (index_t ch = 0; ch < q.c; ++ch) out[ch] += src[ch] * inv;
          }
        }
      });
}

// ---------------------------------------------------------------------------
// Local response normalisation on NHWC data, cuda-convnet style:
//   d_i = k + (alpha / S) * sum_{j in window(i)} x_j^2,  y_i = x_i * d_i^(-beta)
// same-map: window = size x size pixels of the same channel, S = size^2;
// cross-map: window = size neighbouring channels at the same pixel, S = size.
// Windows are centred (size odd) and clipped at the edges.
// ---------------------------------------------------------------------------
namespace detail {
// Calls fn(j) for every flat index j in the window of element (b, iy, ix, ch).
template <class Fn>
KOKKOS_INLINE_FUNCTION void lrn_window(const LrnParams& p, index_t b, index_t iy, index_t ix,
                                       index_t ch, Fn&& fn) {
  const index_t half = p.size / 2;
  if (p.cross_map) {
    const index_t lo = ch - half < 0 ? 0 : ch - half;
    const index_t hi = ch + half > p.c - 1 ? p.c - 1 : ch + half;
    const index_t base = ((b * p.h + iy) * p.w + ix) * p.c;
    for (index_t j = lo; j <= hi; ++j) fn(base + j);
  } else {
    const index_t y0 = iy - half < 0 ? 0 : iy - half;
    const index_t y1 = iy + half > p.h - 1 ? p.h - 1 : iy + half;
    const index_t x0 = ix - half < 0 ? 0 : ix - half;
    const index_t x1 = ix + half > p.w - 1 ? p.w - 1 : ix + half;
    for (index_t yy = y0; yy <= y1; ++yy)
      for (index_t xx = x0; xx <= x1; ++xx) fn(((b * p.h + yy) * p.w + xx) * p.c + ch);
  }
}
}  // namespace detail

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
  const real_t scale = p.alpha / static_cast<real_t>(p.cross_map ? p.size : p.size * p.size);
  Kokkos::parallel_for(
      "asgd::lrn_forward", Kokkos::RangePolicy<Space>(0, total), KOKKOS_LAMBDA(index_t i) {
        const index_t ch = i % q.c, ix = (i / q.c) % q.w, iy = (i / (q.c * q.w)) % q.h;
        const index_t b = i / (q.c * q.w * q.h);
        real_t s = 0;
        detail::lrn_window(q, b, iy, ix, ch, [&](index_t j) { s += x(j) * x(j); });
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
  const real_t scale = p.alpha / static_cast<real_t>(p.cross_map ? p.size : p.size * p.size);
  Kokkos::parallel_for(
      "asgd::lrn_backward[t]", Kokkos::RangePolicy<Space>(0, total),
      KOKKOS_LAMBDA(index_t i) { t(i) = dy(i) * y(i) / denom(i); });
  Kokkos::parallel_for(
      "asgd::lrn_backward", Kokkos::RangePolicy<Space>(0, total), KOKKOS_LAMBDA(index_t i) {
        const index_t ch = i % q.c, ix = (i / q.c) % q.w, iy = (i / (q.c * q.w)) % q.h;
        const index_t b = i / (q.c * q.w * q.h);
        real_t s = 0;
        detail::lrn_window(q, b, iy, ix, ch, [&](index_t j) { s += t(j); });
        dx(i) = dy(i) * kmath::pow(denom(i), -q.beta) - real_t(2) * q.beta * scale * x(i) * s;
      });
}

// ---------------------------------------------------------------------------
// Pointwise
// ---------------------------------------------------------------------------
template <class Space>
void relu_forward(index_t len, const View1<Space>& x, const View1<Space>& y) {
  detail::check_len("relu_forward", "x", x.extent(0), len);
  detail::check_len("relu_forward", "y", y.extent(0), len);
  Kokkos::parallel_for(
      "asgd::relu_forward", Kokkos::RangePolicy<Space>(0, len),
      KOKKOS_LAMBDA(index_t i) { y(i) = x(i) > real_t(0) ? x(i) : real_t(0); });
}

// Uses the forward output: dx = dy where y > 0. Safe in place (dx == dy).
template <class Space>
void relu_backward(index_t len, const View1<Space>& y, const View1<Space>& dy,
                   const View1<Space>& dx) {
  detail::check_len("relu_backward", "y", y.extent(0), len);
  detail::check_len("relu_backward", "dy", dy.extent(0), len);
  detail::check_len("relu_backward", "dx", dx.extent(0), len);
  Kokkos::parallel_for(
      "asgd::relu_backward", Kokkos::RangePolicy<Space>(0, len),
      KOKKOS_LAMBDA(index_t i) { dx(i) = kmath::keep_if(dy(i), y(i) > real_t(0)); });
}

// Counter-based uniform in [0, 1) from (seed, i): splitmix64, so dropout masks
// are reproducible and independent of the order of evaluation.
KOKKOS_INLINE_FUNCTION real_t hash_uniform(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<real_t>(static_cast<double>(z >> 40) * (1.0 / 16777216.0));
}

// Inverted dropout: keep with probability 1 - p, scale kept values by 1/(1-p).
// scale is a workspace holding 0 or 1/(1-p) per element, for the backward pass.
template <class Space>
void dropout_forward(index_t len, real_t p, std::uint64_t seed, const View1<Space>& x,
                     const View1<Space>& scale, const View1<Space>& y) {
  if (!(p >= 0 && p < 1)) throw Error(fmt::format("dropout: rate {} not in [0, 1)", p));
  detail::check_len("dropout_forward", "x", x.extent(0), len);
  detail::check_len("dropout_forward", "scale", scale.extent(0), len);
  detail::check_len("dropout_forward", "y", y.extent(0), len);
  const real_t keep = real_t(1) / (real_t(1) - p);
  Kokkos::parallel_for(
      "asgd::dropout_forward", Kokkos::RangePolicy<Space>(0, len), KOKKOS_LAMBDA(index_t i) {
        const real_t s = hash_uniform(seed, static_cast<std::uint64_t>(i)) < p ? real_t(0) : keep;
        scale(i) = s;
        y(i) = x(i) * s;
      });
}

template <class Space>
void dropout_backward(index_t len, const View1<Space>& scale, const View1<Space>& dy,
                      const View1<Space>& dx) {
  detail::check_len("dropout_backward", "scale", scale.extent(0), len);
  detail::check_len("dropout_backward", "dy", dy.extent(0), len);
  detail::check_len("dropout_backward", "dx", dx.extent(0), len);
  Kokkos::parallel_for(
      "asgd::dropout_backward", Kokkos::RangePolicy<Space>(0, len),
      KOKKOS_LAMBDA(index_t i) { dx(i) = dy(i) * scale(i); });
}

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
        real_t zmax = kmath::neg_infinity<real_t>();
        index_t arg = 0;
        for (index_t j = 0; j < m; ++j)
          if (z[j] > zmax) {
            zmax = z[j];
            arg = j;
          }
        double sum = 0;
        for (index_t j = 0; j < m; ++j) sum += kmath::exp(static_cast<double>(z[j] - zmax));
        const index_t lab = labels(r);
        l += kmath::log(sum) - static_cast<double>(z[lab] - zmax);
        w += arg != lab ? 1 : 0;
        if (want_grad) {
          real_t* g = dlogits.data() + r * m;
          for (index_t j = 0; j < m; ++j) {
            const double pj = kmath::exp(static_cast<double>(z[j] - zmax)) / sum;
            g[j] = static_cast<real_t>((pj - (j == lab ? 1.0 : 0.0)) * grad_scale);
          }
        }
      },
      loss, wrong);
  return {loss, wrong};
}

// ---------------------------------------------------------------------------
// SGD update, cuda-convnet form: inc = m*inc - a*(s*g + wd*w); w += inc,
// where s scales the gradient (a parameter server's 1/c and rate factors),
// fused so the update is one pass over memory.
// ---------------------------------------------------------------------------
template <class Space>
void sgd_update(index_t len, real_t lr, real_t momentum, real_t weight_decay,
                const View1<Space>& g, const View1<Space>& inc, const View1<Space>& w,
                real_t grad_scale = real_t(1)) {
  detail::check_len("sgd_update", "g", g.extent(0), len);
  detail::check_len("sgd_update", "inc", inc.extent(0), len);
  detail::check_len("sgd_update", "w", w.extent(0), len);
  Kokkos::parallel_for(
      "asgd::sgd_update", Kokkos::RangePolicy<Space>(0, len), KOKKOS_LAMBDA(index_t i) {
        const real_t v = momentum * inc(i) - lr * (grad_scale * g(i) + weight_decay * w(i));
        inc(i) = v;
        w(i) += v;
      });
}

}  // namespace asgd::kernels
