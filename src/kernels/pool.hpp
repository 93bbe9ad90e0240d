#pragma once
// Pooling, cuda-convnet ceil mode (kernels/geometry.hpp: pool_window).
#include "kernels/common.hpp"

namespace asgd::kernels {

// ---------------------------------------------------------------------------
// Pooling (ceil mode, clipped windows): x[N, H, W, C] -> y[N, OH, OW, C]
// ---------------------------------------------------------------------------
template <class Space>
void maxpool_forward(const Window& g, const View1<Space>& x, const View1<Space>& y,
                     const IView1<Space>& argmax) {
  const index_t nx = g.n * g.h * g.w * g.c, ny = g.n * g.oh * g.ow * g.c;
  detail::check_lens("maxpool_forward", {{"x", x.extent(0), nx},
                                         {"y", y.extent(0), ny},
                                         {"argmax", argmax.extent(0), ny}});
  const Window q = g;
  Kokkos::parallel_for(
      "asgd::maxpool_forward", Kokkos::RangePolicy<Space>(0, g.n * g.oh * g.ow),
      KOKKOS_LAMBDA(index_t r) {
        const auto [b, oy, ox] = elem::pixel_of(r, q.oh, q.ow);
        const auto [y0, y1] = elem::pool_span(oy, q.kh, q.stride, q.h);
        const auto [x0, x1] = elem::pool_span(ox, q.kw, q.stride, q.w);
        // Channels innermost: contiguous in NHWC, so the compare vectorises
        // (its running values in memory: GCC 12 vectorises these masked
        // selects there, not on a register block as in detail::channel_blocks).
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
  detail::check_lens("maxpool_backward", {{"dy", dy.extent(0), g.n * g.oh * g.ow * g.c},
                                          {"dx", dx.extent(0), g.n * g.h * g.w * g.c}});
  const Window q = g;
  if constexpr (detail::host_space<Space>) {
    // On the host a row of dx at a time, each window of the output rows that
    // cover it adding to its inputs in that row: no division per pixel, and each
    // element gets the same terms in the same order as in the gather form below.
    Kokkos::parallel_for(
        "asgd::maxpool_backward", Kokkos::RangePolicy<Space>(0, g.n * g.h), KOKKOS_LAMBDA(index_t row) {
          const index_t iy = row % q.h, b = row / q.h;
          real_t* __restrict out = dx.data() + row * q.w * q.c;
          for (index_t e = 0; e < q.w * q.c; ++e) out[e] = 0;
          const auto ry = elem::covering(iy, q.kh, q.stride, q.oh);
          for (index_t oy = ry.lo; oy <= ry.hi; ++oy)
            for (index_t ox = 0; ox < q.ow; ++ox) {
              const index_t o = ((b * q.oh + oy) * q.ow + ox) * q.c;
              const real_t* __restrict d = dy.data() + o;
              const std::int32_t* __restrict at = argmax.data() + o;
              const auto [x0, x1] = elem::pool_span(ox, q.kw, q.stride, q.w);
              for (index_t ix = x0; ix < x1; ++ix) {
                const auto self = static_cast<std::int32_t>(iy * q.w + ix);
                real_t* __restrict acc = out + ix * q.c;
                for (index_t ch = 0; ch < q.c; ++ch) acc[ch] += kmath::keep_if(d[ch], at[ch] == self);
              }
            }
        });
    return;
  }
  Kokkos::parallel_for(
      "asgd::maxpool_backward", Kokkos::RangePolicy<Space>(0, g.n * g.h * g.w),
      KOKKOS_LAMBDA(index_t p) {
        const auto [b, iy, ix] = elem::pixel_of(p, q.h, q.w);
        const auto self = static_cast<std::int32_t>(iy * q.w + ix);
        const auto ry = elem::covering(iy, q.kh, q.stride, q.oh);
        const auto rx = elem::covering(ix, q.kw, q.stride, q.ow);
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
  detail::check_lens("avgpool_forward", {{"x", x.extent(0), g.n * g.h * g.w * g.c},
                                         {"y", y.extent(0), g.n * g.oh * g.ow * g.c}});
  const Window q = g;
  Kokkos::parallel_for(
      "asgd::avgpool_forward", Kokkos::RangePolicy<Space>(0, g.n * g.oh * g.ow),
      KOKKOS_LAMBDA(index_t r) {
        // plain names, not structured bindings: the channel blocks' lambda captures them
        const elem::Pixel o = elem::pixel_of(r, q.oh, q.ow);
        const elem::Span sy = elem::pool_span(o.y, q.kh, q.stride, q.h), sx = elem::pool_span(o.x, q.kw, q.stride, q.w);
        const index_t b = o.b, y0 = sy.lo, y1 = sy.hi, x0 = sx.lo, x1 = sx.hi;
        const real_t inv = real_t(1) / static_cast<real_t>((y1 - y0) * (x1 - x0));
        detail::channel_blocks(q.c, [&](index_t ch0, auto width) {
          constexpr index_t B = decltype(width)::value;
          real_t sum[B] = {};
          for (index_t iy = y0; iy < y1; ++iy)
            for (index_t ix = x0; ix < x1; ++ix) {
              const real_t* src = x.data() + ((b * q.h + iy) * q.w + ix) * q.c + ch0;
              for (index_t k = 0; k < B; ++k) sum[k] += src[k];
            }
          for (index_t k = 0; k < B; ++k) y.data()[r * q.c + ch0 + k] = sum[k] * inv;
        });
      });
}

template <class Space>
void avgpool_backward(const Window& g, const View1<Space>& dy, const View1<Space>& dx) {
  detail::check_lens("avgpool_backward", {{"dy", dy.extent(0), g.n * g.oh * g.ow * g.c},
                                          {"dx", dx.extent(0), g.n * g.h * g.w * g.c}});
  const Window q = g;
  Kokkos::parallel_for(
      "asgd::avgpool_backward", Kokkos::RangePolicy<Space>(0, g.n * g.h * g.w),
      KOKKOS_LAMBDA(index_t p) {
        const auto [b, iy, ix] = elem::pixel_of(p, q.h, q.w);
        const auto ry = elem::covering(iy, q.kh, q.stride, q.oh);
        const auto rx = elem::covering(ix, q.kw, q.stride, q.ow);
        real_t* out = dx.data() + p * q.c;
        for (index_t ch = 0; ch < q.c; ++ch) out[ch] = 0;
        for (index_t oy = ry.lo; oy <= ry.hi; ++oy) {
          const auto [y0, y1] = elem::pool_span(oy, q.kh, q.stride, q.h);
          for (index_t ox = rx.lo; ox <= rx.hi; ++ox) {
            const auto [x0, x1] = elem::pool_span(ox, q.kw, q.stride, q.w);
            const real_t inv = real_t(1) / static_cast<real_t>((y1 - y0) * (x1 - x0));
            const real_t* src = dy.data() + ((b * q.oh + oy) * q.ow + ox) * q.c;
            for (index_t ch = 0; ch < q.c; ++ch) out[ch] += src[ch] * inv;
          }
        }
      });
}

}  // namespace asgd::kernels
