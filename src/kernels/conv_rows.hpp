#pragma once
// Convolution, row-folded form (stride 1; see below). kernels/conv.hpp: the im2col form.
#include "kernels/common.hpp"
#include "kernels/conv.hpp"

namespace asgd::kernels {

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

// The input gradient of a stride-1 convolution is itself a stride-1
// convolution: of dy, padded by KH - 1 - pad, with the kernel turned by 180
// degrees and its channel axes swapped,
//   wflip[(i, j, f), c] = wt[(KH-1-i, KW-1-j, c), f],
// whose output is the input's H x W x C. On the host that is the row-folded
// product of dy's im2row workspace and wflip, one sample at a time: neither the
// [N*OH*OW, KH*KW*C] dcol matrix nor col2im, and GEMMs of inner dimension
// KW*F (320 in lenet's conv4) where dcol's has F (64). transposed_window: that
// convolution's window (square kernels, pad <= KH - 1).
inline bool transposed_fits(const Window& g) {
  return g.stride == 1 && g.kh == g.kw && g.pad <= g.kh - 1;
}
inline Window transposed_window(const Window& g, index_t f) {
  return conv_window(g.n, g.oh, g.ow, f, g.kh, 1, g.kh - 1 - g.pad);
}
inline index_t flip_len(const Window& g, index_t f) { return g.kh * g.kw * g.c * f; }

// wflip (above) of wt into flip.
template <class Space>
void flip_weights(const Window& g, index_t f, const real_t* wp, real_t* flip) {
  const index_t kh = g.kh, kw = g.kw, c = g.c;
  Kokkos::parallel_for(
      "asgd::conv2d_backward_rows[flip]", Kokkos::RangePolicy<Space>(0, kh * kw * f),
      [=](index_t r) {  // r = (i, j, fo): wflip's row
        const index_t fo = r % f, j = (r / f) % kw, i = r / (f * kw);
        const real_t* src = wp + ((kh - 1 - i) * kw + (kw - 1 - j)) * c * f + fo;
        for (index_t ch = 0; ch < c; ++ch) flip[r * c + ch] = src[ch * f];
      });
}

#if defined(KOKKOS_ENABLE_OPENMP)
// y = the row-folded product of the im2row workspace rp and the weights wp on a
// parallel host: one sample per iteration, its KH GEMMs in order, one BLAS
// thread each (no bias).
template <class Space>
void rows_gemms(const Window& g, index_t f, const real_t* rp, const real_t* wp, real_t* yp) {
  const Window q = g;
  const index_t krow = g.kw * g.c, pix = g.oh * g.ow;
  Kokkos::parallel_for(
      "asgd::conv2d_rows[gemm]", Kokkos::RangePolicy<Space>(0, g.n), [=](index_t n) {
        for (index_t i = 0; i < q.kh; ++i)
          blas_gemm('N', 'N', pix, f, krow, real_t(1),
                    rp + ((n * (q.h + 2 * q.pad) + i) * q.ow) * krow, krow, wp + i * krow * f, f,
                    real_t(i == 0 ? 0 : 1), yp + n * pix * f, f);
      });
}
#endif

// y = the row-folded product of rows (im2row_len(g)) and wt, no bias: on a
// parallel host rows_gemms, else per sample its KH KokkosBlas GEMMs in order.
template <class Space>
void rows_product(const Window& g, index_t f, const View1<Space>& rows, const View1<Space>& wt,
                  const View1<Space>& y) {
#if defined(KOKKOS_ENABLE_OPENMP)
  if constexpr (parallel_host<Space>) {
    rows_gemms<Space>(g, f, rows.data(), wt.data(), y.data());
    return;
  }
#endif
  const index_t pix = g.oh * g.ow;
  for (index_t n = 0; n < g.n; ++n) {
    const View2<Space> yn(y.data() + n * pix * f, pix, f);
    for (index_t i = 0; i < g.kh; ++i)
      KokkosBlas::gemm("N", "N", real_t(1), row_block<Space>(g, rows, n, i),
                       weight_row<Space>(g, f, wt, i), real_t(i == 0 ? 0 : 1), yn);
  }
}

// dwt += sum over samples and kernel rows of rows_n^T dy_n. On a parallel
// host dwt's rows (the KW*C of each kernel row) in kGemmBlocks blocks (the
// same cut for any thread count), each block summing over the samples in
// order, as the KokkosBlas loop does.
template <class Space>
void rows_weight_grad(const Window& g, index_t f, const View1<Space>& rows,
                      const View1<Space>& dy, const View1<Space>& dwt) {
  const index_t pix = g.oh * g.ow;
#if defined(KOKKOS_ENABLE_OPENMP)
  if constexpr (parallel_host<Space>) {
    const Window q = g;
    const index_t krow = g.kw * g.c;
    const index_t blocks = std::min<index_t>(kGemmBlocks, krow);
    const real_t* rp = rows.data();
    const real_t* dyp = dy.data();
    real_t* dwp = dwt.data();
    Kokkos::parallel_for(
        "asgd::conv2d_backward_rows[dwt]",
        Kokkos::RangePolicy<Space, Kokkos::Schedule<Kokkos::Static>>(0, blocks), [=](index_t t) {
          const index_t j0 = krow * t / blocks, j1 = krow * (t + 1) / blocks;
          for (index_t n = 0; n < q.n; ++n)
            for (index_t i = 0; i < q.kh; ++i)
              blas_gemm('T', 'N', j1 - j0, f, pix, real_t(1),
                        rp + ((n * (q.h + 2 * q.pad) + i) * q.ow) * krow + j0, krow,
                        dyp + n * pix * f, f, real_t(1), dwp + (i * krow + j0) * f, f);
        });
    return;
  }
#endif
  for (index_t n = 0; n < g.n; ++n) {
    const View2<Space> dyn(dy.data() + n * pix * f, pix, f);
    for (index_t i = 0; i < g.kh; ++i)
      KokkosBlas::gemm("T", "N", real_t(1), row_block<Space>(g, rows, n, i), dyn, real_t(1),
                       weight_row<Space>(g, f, dwt, i));
  }
}

// dx of a stride-1 convolution as the transposed convolution above: ws holds
// wflip (written here when flip is true, else by an earlier call with the same
// weights), then dy's im2row rows.
template <class Space>
void transposed_dx(const Window& g, index_t f, const View1<Space>& wt, const View1<Space>& dy,
                   const View1<Space>& ws, const View1<Space>& dx, bool flip) {
  const Window t = transposed_window(g, f);
  const index_t nf = flip_len(g, f);
  if (flip) flip_weights<Space>(g, f, wt.data(), ws.data());
  const View1<Space> rows(ws.data() + nf, im2row_len(t));
  im2row<Space>(t, dy, rows);
  rows_product<Space>(t, g.c, rows, View1<Space>(ws.data(), nf), dx);
}

}  // namespace detail

// The workspace the transposed input gradient needs in conv2d_backward_rows'
// dcol on the host (wflip, then dy's im2row rows); 0 where it does not apply
// (a device, stride > 1, pad > KH - 1), and there dcol is the [N*OH*OW,
// KH*KW*C] matrix of conv2d_backward.
template <class Space>
index_t transposed_dx_len(const Window& g, index_t f) {
  if (!detail::host_space<Space> || !detail::transposed_fits(g)) return 0;
  return detail::flip_len(g, f) + im2row_len(detail::transposed_window(g, f));
}

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
  detail::rows_product<Space>(g, f, rows, wt, y);
  detail::add_bias<Space>(detail::as_matrix<Space>(y, g.n * pix, f), b);
}

// As conv2d_backward, from the im2row workspace: dwt += sum over samples and
// kernel rows of rows_n^T dy_n; db += column sums of dy; if dx.data(): on the
// host, where dcol holds transposed_dx_len(g, f), dx is the transposed
// convolution above (flip: write wflip into dcol's head; a later call on the
// next chunk of the same batch, with the same wt, may pass false and reuse it);
// else dcol = dy wt^T (the full im2col shape) and dx = col2im(dcol).
template <class Space>
void conv2d_backward_rows(const Window& g, index_t f, const View1<Space>& rows,
                          const View1<Space>& wt, const View1<Space>& dy,
                          const View1<Space>& dcol, const View1<Space>& dx,
                          const View1<Space>& dwt, const View1<Space>& db,
                          const View1<Space>& ones, bool flip = true) {
  const char* what = "conv2d_backward_rows";
  detail::check_stride1(what, g);
  detail::check_len(what, "rows", rows.extent(0), im2row_len(g));
  if (detail::conv_backward_begin<Space>(what, g, f, wt, dy, dx, dwt, db, ones)) return;
  const index_t pix = g.oh * g.ow;
  detail::rows_weight_grad<Space>(g, f, rows, dy, dwt);
  if constexpr (detail::host_space<Space>) {
    const index_t tlen = transposed_dx_len<Space>(g, f);
    if (dx.data() != nullptr && tlen > 0 && static_cast<index_t>(dcol.extent(0)) >= tlen) {
      detail::bias_grad<Space>(detail::as_matrix<Space>(dy, g.n * pix, f), ones, db);
      detail::check_len(what, "dx", dx.extent(0), g.n * g.h * g.w * g.c);
      detail::transposed_dx<Space>(g, f, wt, dy, dcol, dx, flip);
      return;
    }
  }
  detail::conv_backward_end<Space>(what, g, f, wt, dy, dcol, dx, db, ones);
}

}  // namespace asgd::kernels
