#pragma once
// Plain host reference for kernels/conv.hpp: convolution (direct, no im2col)
// (kernels/reference.hpp: conventions).
#include "kernels/elementwise.hpp"

namespace asgd::kernels::ref {

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

}  // namespace asgd::kernels::ref
