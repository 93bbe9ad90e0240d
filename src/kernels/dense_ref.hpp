#pragma once
// Plain host reference for kernels/dense.hpp: dense layers
// (kernels/reference.hpp: conventions).
#include "kernels/elementwise.hpp"

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

}  // namespace asgd::kernels::ref
