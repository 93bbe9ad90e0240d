#pragma once
// Plain host reference for kernels/update.hpp: the SGD update rule
// (kernels/reference.hpp: conventions).
#include "kernels/elementwise.hpp"

namespace asgd::kernels::ref {

template <class T>
void sgd_update(index_t len, T lr, T momentum, T wd, const T* g, T* inc, T* w) {
  for (index_t i = 0; i < len; ++i) {
    inc[i] = momentum * inc[i] - lr * (g[i] + wd * w[i]);
    w[i] += inc[i];
  }
}

}  // namespace asgd::kernels::ref
