#pragma once
// Convolution, direct form, for the host: a layer with few input taps per
// kernel row (KW*C; lenet's first convolution has 5, one channel) makes the
// im2col and row-folded GEMMs thin (inner dimension 5 forward, a 25-row
// weight gradient backward), where OpenBLAS runs at a quarter of its rate.
// Here each output pixel's filters are summed in registers instead:
//   y[n, oy, ox, f] = b[f] + sum_{i, j, c} xp[n, oy*s + i, ox*s + j, c] * wt[(i*KW + j)*C + c, f]
// over xp, the input padded with zeros (the workspace, kept for the backward
// pass), the filters in vectors of the build target's width (16 floats where it
// has AVX-512, 8 else: AVX, or two SSE halves), several output pixels at a time.
// Backward gives the parameter gradients only (a layer whose input gradient is not
// needed: the first), each sample's into its own slot of a workspace, then
// summed over the samples in sample order: the same bits for any thread count.
// Each lane does the same products and sums in the same order at any width, so
// the width changes the speed, not the bits.
// Products and sums stay apart (no FMA), as everywhere in the kernels.
#include "kernels/common.hpp"

namespace asgd::kernels {

namespace detail {

// 8 floats, as one AVX register or two SSE ones, and the widest vector of the
// build target (16 floats with AVX-512, else the same 8). Moved with memcpy
// through a fresh local where they are used, never passed to or returned from a
// function (where the build does not target AVX, ASGD_ARCH=x86-64, that would
// change the function's ABI, which GCC warns of: -Wpsabi), and the arrays of
// them never have their address taken (it keeps them out of registers).
typedef float Float8 __attribute__((vector_size(32)));
#if defined(__AVX512F__)
typedef float FloatWide __attribute__((vector_size(64)));
#else
typedef Float8 FloatWide;
#endif
template <class Vec>
inline constexpr int kLanes = static_cast<int>(sizeof(Vec) / sizeof(float));
// Filters a wide block takes (4 AVX vectors, 2 AVX-512 ones) and the
// accumulators a block keeps in registers: the forward pass's pixels and the
// backward pass's taps follow from them.
inline constexpr int kWideFilters = 32, kWideAccumulators = 8, kTapAccumulators = 12;

// v = x in every lane: a broadcast, no arithmetic (`Vec{} + x` adds 0 to x
// first: one more addition per broadcast on the adders the sums need).
#define ASGD_SPLAT(Vec, v, x)                                       \
  Vec v;                                                            \
  if constexpr (kLanes<Vec> == 16)                                  \
    v = Vec{x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x};        \
  else                                                              \
    v = Vec{x, x, x, x, x, x, x, x}

// V vectors of filters from f0, P output pixels of one row from ox, of one
// sample (xp padded, y the sample's output).
template <class Vec, int V, int P>
inline void direct_pixels(const Window& g, index_t f, index_t f0, index_t oy, index_t ox,
                          const real_t* xp, const real_t* wt, const real_t* b, real_t* y) {
  constexpr int L = kLanes<Vec>;
  const index_t wp = g.w + 2 * g.pad, taps = g.kw * g.c;
  Vec acc[P][V];
  for (int v = 0; v < V; ++v) {
    Vec bv;
    std::memcpy(&bv, b + f0 + L * v, sizeof bv);
    for (int p = 0; p < P; ++p) acc[p][v] = bv;
  }
  for (index_t i = 0; i < g.kh; ++i) {
    const real_t* xr = xp + ((oy * g.stride + i) * wp + ox * g.stride) * g.c;
    const real_t* wr = wt + i * taps * f + f0;
    for (index_t t = 0; t < taps; ++t) {
      Vec w[V];
      for (int v = 0; v < V; ++v) {
        Vec wv;
        std::memcpy(&wv, wr + t * f + L * v, sizeof wv);
        w[v] = wv;
      }
      for (int p = 0; p < P; ++p) {
        const real_t xs = xr[p * g.stride * g.c + t];
        ASGD_SPLAT(Vec, xv, xs);
        for (int v = 0; v < V; ++v) acc[p][v] += xv * w[v];
      }
    }
  }
  for (int p = 0; p < P; ++p)
    for (int v = 0; v < V; ++v) {
      const Vec out = acc[p][v];
      std::memcpy(y + ((oy * g.ow + ox + p) * f) + f0 + L * v, &out, sizeof out);
    }
}

// T taps from t0 and V vectors of filters from f0 of one sample's weight
// gradient: part[t, f] = sum over the output pixels of xp[pixel + tap t] * dy[pixel, f].
template <class Vec, int V, int T>
inline void direct_taps(const Window& g, index_t f, index_t f0, index_t t0, const real_t* xp,
                        const real_t* dy, real_t* part) {
  constexpr int L = kLanes<Vec>;
  const index_t wp = g.w + 2 * g.pad, taps = g.kw * g.c;
  Vec acc[T][V];
  index_t off[T];
  for (int u = 0; u < T; ++u) {
    off[u] = ((t0 + u) / taps) * wp * g.c + (t0 + u) % taps;
    for (int v = 0; v < V; ++v) acc[u][v] = Vec{};
  }
  for (index_t oy = 0; oy < g.oh; ++oy)
    for (index_t ox = 0; ox < g.ow; ++ox) {
      const real_t* xr = xp + (oy * g.stride * wp + ox * g.stride) * g.c;
      const real_t* d = dy + (oy * g.ow + ox) * f + f0;
      Vec dv[V];
      for (int v = 0; v < V; ++v) {
        Vec dd;
        std::memcpy(&dd, d + L * v, sizeof dd);
        dv[v] = dd;
      }
      for (int u = 0; u < T; ++u) {
        const real_t xs = xr[off[u]];
        ASGD_SPLAT(Vec, xv, xs);
        for (int v = 0; v < V; ++v) acc[u][v] += xv * dv[v];
      }
    }
  for (int u = 0; u < T; ++u)
    for (int v = 0; v < V; ++v) {
      const Vec out = acc[u][v];
      std::memcpy(part + (t0 + u) * f + f0 + L * v, &out, sizeof out);
    }
}
#undef ASGD_SPLAT

inline void pad_sample(const Window& g, const real_t* x, real_t* xp) {
  const index_t wp = g.w + 2 * g.pad, row = g.w * g.c;
  std::fill(xp, xp + (g.h + 2 * g.pad) * wp * g.c, real_t(0));
  for (index_t y = 0; y < g.h; ++y)
    std::copy(x + y * row, x + (y + 1) * row, xp + ((y + g.pad) * wp + g.pad) * g.c);
}

// One output row of filters [f0, f0 + V vectors): P pixels at a time, then the rest one by one.
template <class Vec, int V, int P>
inline void direct_row(const Window& g, index_t f, index_t f0, index_t oy, const real_t* xp,
                       const real_t* wt, const real_t* b, real_t* y) {
  index_t ox = 0;
  for (; ox + P <= g.ow; ox += P) direct_pixels<Vec, V, P>(g, f, f0, oy, ox, xp, wt, b, y);
  for (; ox < g.ow; ++ox) direct_pixels<Vec, V, 1>(g, f, f0, oy, ox, xp, wt, b, y);
}

// The weight gradient of filters [f0, f0 + V vectors): T taps at a time, then the rest one by one.
template <class Vec, int V, int T>
inline void direct_tap_block(const Window& g, index_t f, index_t f0, const real_t* xp,
                             const real_t* dy, real_t* part) {
  const index_t k = g.kh * g.kw * g.c;
  index_t t = 0;
  for (; t + T <= k; t += T) direct_taps<Vec, V, T>(g, f, f0, t, xp, dy, part);
  for (; t < k; ++t) direct_taps<Vec, V, 1>(g, f, f0, t, xp, dy, part);
}

// Filters in blocks of kWideFilters in the widest vectors, the rest (a multiple
// of 8) in vectors of 8.
inline void direct_forward_sample(const Window& g, index_t f, const real_t* xp, const real_t* wt,
                                  const real_t* b, real_t* y) {
  constexpr int V = kWideFilters / kLanes<FloatWide>, P = kWideAccumulators / V;
  for (index_t f0 = 0; f0 < f;) {
    const bool wide = f - f0 >= kWideFilters;
    for (index_t oy = 0; oy < g.oh; ++oy)
      wide ? direct_row<FloatWide, V, P>(g, f, f0, oy, xp, wt, b, y)
           : direct_row<Float8, 1, 2>(g, f, f0, oy, xp, wt, b, y);
    f0 += wide ? kWideFilters : 8;
  }
}

// One sample's weight gradient into part[K, F] and its bias gradient into part[K*F, +F].
inline void direct_backward_sample(const Window& g, index_t f, const real_t* xp, const real_t* dy,
                                   real_t* part) {
  constexpr int V = kWideFilters / kLanes<FloatWide>, T = kTapAccumulators / V;
  const index_t k = g.kh * g.kw * g.c;
  for (index_t f0 = 0; f0 < f;) {
    const bool wide = f - f0 >= kWideFilters;
    wide ? direct_tap_block<FloatWide, V, T>(g, f, f0, xp, dy, part)
         : direct_tap_block<Float8, 1, 3>(g, f, f0, xp, dy, part);
    f0 += wide ? kWideFilters : 8;
  }
  real_t* db = part + k * f;
  std::fill(db, db + f, real_t(0));
  for (index_t p = 0; p < g.oh * g.ow; ++p)
    for (index_t j = 0; j < f; ++j) db[j] += dy[p * f + j];
}

inline void check_direct_filters(const char* what, index_t f) {
  if (f % 8 != 0) throw Error(fmt::format("{}: {} filters, not a multiple of 8", what, f));
}

}  // namespace detail

// Where the direct form applies: a host space, filters in whole vectors of 8,
// few taps per kernel row (the GEMM forms' inner dimension).
template <class Space>
constexpr bool direct_fits(const Window& g, index_t f) {
  return detail::host_space<Space> && f > 0 && f % 8 == 0 && g.kw * g.c <= 16;
}
// Where the direct form is the faster one (direct_fits: where it applies). Its
// products and sums stay apart, two instructions a multiply-add: on cores whose
// adders are units of their own beside the multipliers (AMD's Zen) that runs at
// the FMA rate, on Intel's cores, whose adders are the FMA units, at half of it.
// There the row-folded GEMMs win once a kernel row has more than 8 taps: on an
// Intel Xeon with AVX-512, cifar10-18pct's conv1 (15 taps) took 7.1 ms forward
// and backward as GEMMs against 9.2 ms direct, lenet's conv1 (5 taps) 3.5 against
// 2.7 ms. Decided from the CPU the process runs on: the same form, and so the same
// bits, every time on one machine.
inline bool direct_pays(const Window& g) {
#if defined(__x86_64__)
  static const bool intel = __builtin_cpu_is("intel") != 0;
  if (intel && g.kw * g.c > 8) return false;
#else
  (void)g;
#endif
  return true;
}
// The direct form's workspace: the padded input of every sample.
inline index_t direct_pad_len(const Window& g) { return g.n * (g.h + 2 * g.pad) * (g.w + 2 * g.pad) * g.c; }
// The backward pass's workspace: every sample's parameter gradients.
inline index_t direct_part_len(const Window& g, index_t f) { return g.n * (g.kh * g.kw * g.c + 1) * f; }

// y = conv(x, wt) + b; xp receives the padded input (kept for the backward pass).
template <class Space>
void conv2d_forward_direct(const Window& g, index_t f, const View1<Space>& x, const View1<Space>& wt,
                           const View1<Space>& b, const View1<Space>& xp, const View1<Space>& y) {
  const char* what = "conv2d_forward_direct";
  if constexpr (!detail::host_space<Space>) {
    throw Error(fmt::format("{}: the direct convolution runs on the host only", what));
  } else {
    detail::check_direct_filters(what, f);
    detail::check_lens(what, {{"x", x.extent(0), g.n * g.h * g.w * g.c},
                              {"wt", wt.extent(0), g.kh * g.kw * g.c * f},
                              {"b", b.extent(0), f},
                              {"xp", xp.extent(0), direct_pad_len(g)},
                              {"y", y.extent(0), g.n * g.oh * g.ow * f}});
    const Window q = g;
    const index_t in = g.h * g.w * g.c, padded = (g.h + 2 * g.pad) * (g.w + 2 * g.pad) * g.c;
    const index_t out = g.oh * g.ow * f;
    real_t *xd = x.data(), *wd = wt.data(), *bd = b.data(), *pd = xp.data(), *yd = y.data();
    Kokkos::parallel_for("asgd::conv2d_forward[direct]", Kokkos::RangePolicy<Space>(0, g.n), [=](index_t s) {
      detail::pad_sample(q, xd + s * in, pd + s * padded);
      detail::direct_forward_sample(q, f, pd + s * padded, wd, bd, yd + s * out);
    });
  }
}

// dwt += the weight gradient, db += the bias gradient (xp: the forward pass's
// padded input); part: direct_part_len(g, f) floats of workspace.
template <class Space>
void conv2d_backward_direct(const Window& g, index_t f, const View1<Space>& xp, const View1<Space>& dy,
                            const View1<Space>& part, const View1<Space>& dwt, const View1<Space>& db) {
  const char* what = "conv2d_backward_direct";
  if constexpr (!detail::host_space<Space>) {
    throw Error(fmt::format("{}: the direct convolution runs on the host only", what));
  } else {
    detail::check_direct_filters(what, f);
    const index_t k = g.kh * g.kw * g.c;
    detail::check_lens(what, {{"xp", xp.extent(0), direct_pad_len(g)},
                              {"dy", dy.extent(0), g.n * g.oh * g.ow * f},
                              {"part", part.extent(0), direct_part_len(g, f)},
                              {"dwt", dwt.extent(0), k * f},
                              {"db", db.extent(0), f}});
    const Window q = g;
    const index_t padded = (g.h + 2 * g.pad) * (g.w + 2 * g.pad) * g.c, out = g.oh * g.ow * f;
    const index_t slot = (k + 1) * f, n = g.n;
    real_t *pd = xp.data(), *dyd = dy.data(), *qd = part.data(), *wd = dwt.data(), *bd = db.data();
    Kokkos::parallel_for("asgd::conv2d_backward[direct]", Kokkos::RangePolicy<Space>(0, n), [=](index_t s) {
      detail::direct_backward_sample(q, f, pd + s * padded, dyd + s * out, qd + s * slot);
    });
    // each gradient element summed over the samples in sample order
    Kokkos::parallel_for("asgd::conv2d_backward[direct-sum]", Kokkos::RangePolicy<Space>(0, slot), [=](index_t e) {
      real_t sum = 0;
      for (index_t s = 0; s < n; ++s) sum += qd[s * slot + e];
      if (e < k * f)
        wd[e] += sum;
      else
        bd[e - k * f] += sum;
    });
  }
}

}  // namespace asgd::kernels
