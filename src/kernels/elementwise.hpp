#pragma once
// The per-element bodies the Kokkos kernels (src/kernels) and the CUDA kernels
// (src/gpu/kernels.cu) share, written once: the update rule, the dropout hash,
// the softmax cross-entropy of one row, the ceil-mode pooling windows and the
// LRN window, with the plain structs they read. No Kokkos and no library
// headers: nvcc compiles this for the device, the host compiler for the CPU.
// Every function is ASGD_HD (common/hd.hpp): __host__ __device__ under nvcc,
// plain inline otherwise. Each keeps the operation order of the kernels it
// replaced (the results are compared bit for bit).
#include <cmath>
#include <cstdint>

#include "common/hash.hpp"
#include "common/hd.hpp"
#include "common/types.hpp"

namespace asgd::kernels {

// Geometry of a 2-D window operation (convolution or pooling) on NHWC data
// (kernels/geometry.hpp fills it in and checks it).
struct Window {
  index_t n = 0, h = 0, w = 0, c = 0;  // input
  index_t kh = 1, kw = 1;              // window
  index_t stride = 1, pad = 0;
  index_t oh = 0, ow = 0;              // output (set by conv_window / pool_window)
};

// Local response normalisation, cuda-convnet style:
//   d_i = k + (alpha / S) * sum_{j in window(i)} x_j^2,  y_i = x_i * d_i^(-beta)
// same-map: window = size x size pixels of the same channel, S = size^2;
// cross-map: window = size neighbouring channels at the same pixel, S = size.
// Windows are centred (size odd) and clipped at the edges.
struct LrnParams {
  index_t n = 0, h = 0, w = 0, c = 0;
  index_t size = 3;
  real_t alpha = real_t(1e-4), beta = real_t(0.75), k = real_t(1);
  bool cross_map = false;
};

namespace elem {

// ---------------------------------------------------------------------------
// Update rule, cuda-convnet form: inc = m*inc - lr*(gs*g + wd*w); w += inc,
// where gs scales the gradient (a parameter server's 1/c and rate factors).
// ---------------------------------------------------------------------------
ASGD_HD inline void sgd_step(real_t g, real_t& inc, real_t& w, real_t lr, real_t momentum,
                             real_t weight_decay, real_t grad_scale) {
  const real_t v = momentum * inc - lr * (grad_scale * g + weight_decay * w);
  inc = v;
  w += v;
}

// ---------------------------------------------------------------------------
// Dropout: a counter-based uniform in [0, 1) from (seed, i), splitmix64
// (common/hash.hpp) of seed + i * golden gamma, so masks are reproducible and
// independent of the order of evaluation (and the same on the CPU and the GPU).
// ---------------------------------------------------------------------------
// Element i of the counter-based stream `seed` (also the layers' init seeds).
ASGD_HD constexpr std::uint64_t counter_hash(std::uint64_t seed, std::uint64_t i) {
  return asgd::splitmix64(seed + i * 0x9E3779B97F4A7C15ull);
}

ASGD_HD inline real_t hash_uniform(std::uint64_t seed, std::uint64_t i) {
  const std::uint64_t z = counter_hash(seed, i);
  return static_cast<real_t>(static_cast<double>(z >> 40) * (1.0 / 16777216.0));
}

// Inverted dropout's factor for element i: 0 (dropped, probability p) or keep = 1/(1-p).
ASGD_HD inline real_t dropout_scale(std::uint64_t seed, index_t i, real_t p, real_t keep) {
  return hash_uniform(seed, static_cast<std::uint64_t>(i)) < p ? real_t(0) : keep;
}

// ---------------------------------------------------------------------------
// Softmax cross-entropy of one row z[0, m) with label lab:
//   loss = log(sum_j exp(z_j - zmax)) - (z_lab - zmax), wrong = argmax != lab,
//   gradient_j = (p_j - [j == lab]) * grad_scale.
// ---------------------------------------------------------------------------
struct XentRow {
  real_t zmax;
  index_t arg;  // first maximum
  double sum;   // sum_j exp(z_j - zmax), in double
};

ASGD_HD inline XentRow xent_row(const real_t* z, index_t m) {
  XentRow r{-INFINITY, 0, 0};
  for (index_t j = 0; j < m; ++j)
    if (z[j] > r.zmax) {
      r.zmax = z[j];
      r.arg = j;
    }
  for (index_t j = 0; j < m; ++j) r.sum += exp(static_cast<double>(z[j] - r.zmax));
  return r;
}

ASGD_HD inline double xent_loss(const XentRow& r, const real_t* z, index_t lab) {
  return log(r.sum) - static_cast<double>(z[lab] - r.zmax);
}

// The probability of class j (in double, as the CPU computes it).
ASGD_HD inline double xent_prob(const XentRow& r, const real_t* z, index_t j) {
  return exp(static_cast<double>(z[j] - r.zmax)) / r.sum;
}

// T: the precision the probability p comes in (double on the CPU, float from cuDNN).
template <class T>
ASGD_HD inline real_t xent_grad(T p, bool is_label, real_t grad_scale) {
  return static_cast<real_t>((p - (is_label ? T(1) : T(0))) * grad_scale);
}

// ---------------------------------------------------------------------------
// Pooling windows, cuda-convnet's ceil mode: output o reads [o*stride,
// min(o*stride + k, n)) along each axis (first window at 0, clipped at the far
// edge, no padding).
// ---------------------------------------------------------------------------
struct Span {
  index_t lo, hi;  // [lo, hi)
};
ASGD_HD inline Span pool_span(index_t o, index_t k, index_t stride, index_t n) {
  const index_t lo = o * stride;
  return {lo, lo + k < n ? lo + k : n};
}

// Flat index r of an N x H x W grid (NHW order) as sample b, row y, column x.
struct Pixel {
  index_t b, y, x;
};
ASGD_HD inline Pixel pixel_of(index_t r, index_t h, index_t w) {
  return {r / (w * h), (r / w) % h, r % w};
}

// The outputs whose window covers input position p (padded coordinates):
// o with o*stride <= p <= o*stride + k - 1, clipped to [0, n_out).
struct OutRange {
  index_t lo, hi;  // inclusive; empty when lo > hi
};
ASGD_HD inline OutRange covering(index_t p, index_t k, index_t stride, index_t n_out) {
  return {p >= k ? (p - k) / stride + 1 : 0, p / stride < n_out - 1 ? p / stride : n_out - 1};
}

// ---------------------------------------------------------------------------
// LRN: calls fn(j) for every flat NHWC index j in the window of element i.
// ---------------------------------------------------------------------------
template <class Fn>
ASGD_HD inline void lrn_window(const LrnParams& p, index_t i, Fn&& fn) {
  const index_t ch = i % p.c, ix = (i / p.c) % p.w, iy = (i / (p.c * p.w)) % p.h;
  const index_t b = i / (p.c * p.w * p.h);
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

// alpha / S (S = size for cross-map, size^2 for same-map windows).
ASGD_HD inline real_t lrn_scale(const LrnParams& p) {
  return p.alpha / static_cast<real_t>(p.cross_map ? p.size : p.size * p.size);
}

}  // namespace elem
}  // namespace asgd::kernels
