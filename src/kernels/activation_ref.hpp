#pragma once
// Plain host reference for kernels/activation.hpp: ReLU and dropout
// (kernels/reference.hpp: conventions).
#include "kernels/elementwise.hpp"

namespace asgd::kernels::ref {

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
    y[i] = static_cast<T>(elem::hash_uniform(seed, static_cast<std::uint64_t>(i))) < p
               ? T(0)
               : x[i] / (T(1) - p);
}

}  // namespace asgd::kernels::ref
