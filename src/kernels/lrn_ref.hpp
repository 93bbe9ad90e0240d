#pragma once
// Plain host reference for kernels/lrn.hpp: local response normalisation
// (kernels/reference.hpp: conventions).
#include <cmath>
#include <vector>

#include "kernels/elementwise.hpp"

namespace asgd::kernels::ref {

// LRN written as the definition: y_i = x_i * (k + a/S * sum_window x_j^2)^-beta;
// the backward pass differentiates through every d_j that contains x_i.
template <class T>
std::vector<index_t> lrn_window_of(const LrnParams& p, index_t i) {
  std::vector<index_t> out;
  elem::lrn_window(p, i, [&](index_t j) { out.push_back(j); });
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

}  // namespace asgd::kernels::ref
