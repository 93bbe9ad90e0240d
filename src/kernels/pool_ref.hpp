#pragma once
// Plain host reference for kernels/pool.hpp: max and average pooling
// (kernels/reference.hpp: conventions).
#include <algorithm>
#include <limits>

#include "kernels/elementwise.hpp"

namespace asgd::kernels::ref {

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

}  // namespace asgd::kernels::ref
