#pragma once
// Plain host reference for kernels/loss.hpp: softmax cross-entropy
// (kernels/reference.hpp: conventions).
#include <cmath>
#include <limits>

#include "kernels/elementwise.hpp"

namespace asgd::kernels::ref {

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

}  // namespace asgd::kernels::ref
