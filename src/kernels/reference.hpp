#pragma once
// Plain host reference versions of every kernel in kernels.hpp, templated on
// the scalar so tests can run them in double for finite-difference checks.
// Same layouts and conventions: NHWC, weights [M, K] / [KH*KW*C, F],
// parameter gradients accumulate, input gradients are overwritten.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/kernels.hpp"

namespace asgd::kernels::ref {

template <class T>
void dense_forward(index_t n, index_t k, index_t m, const T* x, const T* w, const T* b, T* y) {
  for (index_t r = 0; r < n; ++r)
    for (index_t j = 0; j < m; ++j) {
      T s = b[j];
      for (index_t i = 0; i < k; ++i) s += x[r * k + i] * w[j * k + i];
      y[r * m + j] = s;
    }
}

template <class T>
void dense_backward(index_t n, index_t k, index_t m, const T* x, const T* w, const T* dy, T* dx,
                    T* dw, T* db) {
  for (index_t r = 0; r < n; ++r)
    for (index_t j = 0; j < m; ++j) {
      db[j] += dy[r * m + j];
      for (index_t i = 0; i < k; ++i) dw[j * k + i] += x[r * k + i] * dy[r * m + j];
    }
  if (dx == nullptr) return;
  for (index_t r = 0; r < n; ++r)
    for (index_t i = 0; i < k; ++i) {
      T s = 0;
      for (index_t j = 0; j < m; ++j) s += dy[r * m + j] * w[j * k + i];
      dx[r * k + i] = s;
    }
}

// Direct convolution (no im2col), so it checks the im2col path independently.
template <class T>
void conv2d_forward(const Window& g, index_t f, const T* x, const T* wt, const T* b, T* y) {
  for (index_t n = 0; n < g.n; ++n)
    for (index_t oy = 0; oy < g.oh; ++oy)
      for (index_t ox = 0; ox < g.ow; ++ox)
        for (index_t o = 0; o < f; ++o) {
          T s = b[o];
          for (index_t i = 0; i < g.kh; ++i)
            for (index_t j = 0; j < g.kw; ++j) {
              const index_t iy = oy * g.stride - g.pad + i, ix = ox * g.stride - g.pad + j;
              if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
              for (index_t c = 0; c < g.c; ++c)
                s += x[((n * g.h + iy) * g.w + ix) * g.c + c] *
                     wt[((i * g.kw + j) * g.c + c) * f + o];
            }
          y[((n * g.oh + oy) * g.ow + ox) * f + o] = s;
        }
}

template <class T>
void conv2d_backward(const Window& g, index_t f, const T* x, const T* wt, const T* dy, T* dx,
                     T* dwt, T* db) {
  if (dx != nullptr)
    for (index_t i = 0; i < g.n * g.h * g.w * g.c; ++i) dx[i] = 0;
  for (index_t n = 0; n < g.n; ++n)
    for (index_t oy = 0; oy < g.oh; ++oy)
      for (index_t ox = 0; ox < g.ow; ++ox)
        for (index_t o = 0; o < f; ++o) {
          const T d = dy[((n * g.oh + oy) * g.ow + ox) * f + o];
          db[o] += d;
          for (index_t i = 0; i < g.kh; ++i)
            for (index_t j = 0; j < g.kw; ++j) {
              const index_t iy = oy * g.stride - g.pad + i, ix = ox * g.stride - g.pad + j;
              if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
              for (index_t c = 0; c < g.c; ++c) {
                const index_t xi = ((n * g.h + iy) * g.w + ix) * g.c + c;
                const index_t wi = ((i * g.kw + j) * g.c + c) * f + o;
                dwt[wi] += x[xi] * d;
                if (dx != nullptr) dx[xi] += wt[wi] * d;
              }
            }
        }
}

template <class T>
void maxpool_forward(const Window& g, const T* x, T* y) {
  for (index_t n = 0; n < g.n; ++n)
    for (index_t oy = 0; oy < g.oh; ++oy)
      for (index_t ox = 0; ox < g.ow; ++ox)
        for (index_t c = 0; c < g.c; ++c) {
          T best = -std::numeric_limits<T>::infinity();
          for (index_t iy = oy * g.stride; iy < std::min(oy * g.stride + g.kh, g.h); ++iy)
            for (index_t ix = ox * g.stride; ix < std::min(ox * g.stride + g.kw, g.w); ++ix)
              best = std::max(best, x[((n * g.h + iy) * g.w + ix) * g.c + c]);
          y[((n * g.oh + oy) * g.ow + ox) * g.c + c] = best;
        }
}

// Routes each output gradient to the first maximum of its window (the same
// tie rule as the kernel: strict > while scanning rows, then columns).
template <class T>
void maxpool_backward(const Window& g, const T* x, const T* dy, T* dx) {
  for (index_t i = 0; i < g.n * g.h * g.w * g.c; ++i) dx[i] = 0;
  for (index_t n = 0; n < g.n; ++n)
    for (index_t oy = 0; oy < g.oh; ++oy)
      for (index_t ox = 0; ox < g.ow; ++ox)
        for (index_t c = 0; c < g.c; ++c) {
          T best = -std::numeric_limits<T>::infinity();
          index_t at = -1;
          for (index_t iy = oy * g.stride; iy < std::min(oy * g.stride + g.kh, g.h); ++iy)
            for (index_t ix = ox * g.stride; ix < std::min(ox * g.stride + g.kw, g.w); ++ix) {
              const index_t xi = ((n * g.h + iy) * g.w + ix) * g.c + c;
              if (at < 0 || x[xi] > best) {
                best = x[xi];
                at = xi;
              }
            }
          dx[at] += dy[((n * g.oh + oy) * g.ow + ox) * g.c + c];
        }
}

template <class T>
void avgpool_forward(const Window& g, const T* x, T* y) {
  for (index_t n = 0; n < g.n; ++n)
    for (index_t oy = 0; oy < g.oh; ++oy)
      for (index_t ox = 0; ox < g.ow; ++ox)
        for (index_t c = 0; c < g.c; ++c) {
          T s = 0;
          index_t cnt = 0;
          for (index_t iy = oy * g.stride; iy < std::min(oy * g.stride + g.kh, g.h); ++iy)
            for (index_t ix = ox * g.stride; ix < std::min(ox * g.stride + g.kw, g.w); ++ix) {
              s += x[((n * g.h + iy) * g.w + ix) * g.c + c];
              ++cnt;
            }
          y[((n * g.oh + oy) * g.ow + ox) * g.c + c] = s / static_cast<T>(cnt);
        }
}

template <class T>
void avgpool_backward(const Window& g, const T* dy, T* dx) {
  for (index_t i = 0; i < g.n * g.h * g.w * g.c; ++i) dx[i] = 0;
  for (index_t n = 0; n < g.n; ++n)
    for (index_t oy = 0; oy < g.oh; ++oy)
      for (index_t ox = 0; ox < g.ow; ++ox) {
        const index_t y0 = oy * g.stride, y1 = std::min(y0 + g.kh, g.h);
        const index_t x0 = ox * g.stride, x1 = std::min(x0 + g.kw, g.w);
        const T inv = T(1) / static_cast<T>((y1 - y0) * (x1 - x0));
        for (index_t c = 0; c < g.c; ++c) {
          const T d = dy[((n * g.oh + oy) * g.ow + ox) * g.c + c] * inv;
          for (index_t iy = y0; iy < y1; ++iy)
            for (index_t ix = x0; ix < x1; ++ix) dx[((n * g.h + iy) * g.w + ix) * g.c + c] += d;
        }
      }
}

// LRN written as the definition: y_i = x_i * (k + a/S * sum_window x_j^2)^-beta;
// the backward pass differentiates through every d_j that contains x_i.
template <class T>
std::vector<index_t> lrn_window_of(const LrnParams& p, index_t i) {
  std::vector<index_t> out;
  const index_t ch = i % p.c, ix = (i / p.c) % p.w, iy = (i / (p.c * p.w)) % p.h;
  const index_t b = i / (p.c * p.w * p.h);
  detail::lrn_window(p, b, iy, ix, ch, [&](index_t j) { out.push_back(j); });
  return out;
}

template <class T>
void lrn_forward(const LrnParams& p, const T* x, T* y) {
  const index_t total = p.n * p.h * p.w * p.c;
  const T scale = T(p.alpha) / T(p.cross_map ? p.size : p.size * p.size);
  for (index_t i = 0; i < total; ++i) {
    T s = 0;
    for (index_t j : lrn_window_of<T>(p, i)) s += x[j] * x[j];
    y[i] = x[i] * std::pow(T(p.k) + scale * s, -T(p.beta));
  }
}

template <class T>
void lrn_backward(const LrnParams& p, const T* x, const T* dy, T* dx) {
  const index_t total = p.n * p.h * p.w * p.c;
  const T scale = T(p.alpha) / T(p.cross_map ? p.size : p.size * p.size);
  std::vector<T> d(total);
  for (index_t i = 0; i < total; ++i) {
    T s = 0;
    for (index_t j : lrn_window_of<T>(p, i)) s += x[j] * x[j];
    d[i] = T(p.k) + scale * s;
  }
  for (index_t i = 0; i < total; ++i) dx[i] = dy[i] * std::pow(d[i], -T(p.beta));
  // y_j depends on x_i through d_j for every j whose window holds i.
  for (index_t j = 0; j < total; ++j) {
    const T coeff = dy[j] * x[j] * (-T(p.beta)) * std::pow(d[j], -T(p.beta) - 1) * scale * 2;
    for (index_t i : lrn_window_of<T>(p, j)) dx[i] += coeff * x[i];
  }
}

template <class T>
void relu_forward(index_t len, const T* x, T* y) {
  for (index_t i = 0; i < len; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
}

template <class T>
void relu_backward(index_t len, const T* y, const T* dy, T* dx) {
  for (index_t i = 0; i < len; ++i) dx[i] = y[i] > T(0) ? dy[i] : T(0);
}

template <class T>
void dropout_forward(index_t len, T p, std::uint64_t seed, const T* x, T* y) {
  for (index_t i = 0; i < len; ++i)
    y[i] = static_cast<T>(hash_uniform(seed, static_cast<std::uint64_t>(i))) < p
               ? T(0)
               : x[i] / (T(1) - p);
}

// Mean loss over n rows and the gradient of the mean loss.
template <class T>
T softmax_xent(index_t n, index_t m, const T* z, const std::int32_t* labels, T* dz,
               index_t* wrong) {
  T total = 0;
  *wrong = 0;
  for (index_t r = 0; r < n; ++r) {
    T zmax = -std::numeric_limits<T>::infinity();
    index_t arg = 0;
    for (index_t j = 0; j < m; ++j)
      if (z[r * m + j] > zmax) {
        zmax = z[r * m + j];
        arg = j;
      }
    T sum = 0;
    for (index_t j = 0; j < m; ++j) sum += std::exp(z[r * m + j] - zmax);
    total += std::log(sum) - (z[r * m + labels[r]] - zmax);
    *wrong += arg != labels[r] ? 1 : 0;
    if (dz != nullptr)
      for (index_t j = 0; j < m; ++j)
        dz[r * m + j] =
            (std::exp(z[r * m + j] - zmax) / sum - (j == labels[r] ? T(1) : T(0))) / T(n);
  }
  return n > 0 ? total / T(n) : T(0);
}

template <class T>
void sgd_update(index_t len, T lr, T momentum, T wd, const T* g, T* inc, T* w) {
  for (index_t i = 0; i < len; ++i) {
    inc[i] = momentum * inc[i] - lr * (g[i] + wd * w[i]);
    w[i] += inc[i];
  }
}

}  // namespace asgd::kernels::ref
