#pragma once
// Pointwise layers: ReLU and inverted dropout.
#include "kernels/common.hpp"

namespace asgd::kernels {

template <class Space>
void relu_forward(index_t len, const View1<Space>& x, const View1<Space>& y) {
  detail::check_lens("relu_forward", {{"x", x.extent(0), len}, {"y", y.extent(0), len}});
  Kokkos::parallel_for(
      "asgd::relu_forward", Kokkos::RangePolicy<Space>(0, len),
      KOKKOS_LAMBDA(index_t i) { y(i) = x(i) > real_t(0) ? x(i) : real_t(0); });
}

// Uses the forward output: dx = dy where y > 0. Safe in place (dx == dy).
template <class Space>
void relu_backward(index_t len, const View1<Space>& y, const View1<Space>& dy,
                   const View1<Space>& dx) {
  detail::check_lens("relu_backward", {{"y", y.extent(0), len},
                                       {"dy", dy.extent(0), len},
                                       {"dx", dx.extent(0), len}});
  Kokkos::parallel_for(
      "asgd::relu_backward", Kokkos::RangePolicy<Space>(0, len),
      KOKKOS_LAMBDA(index_t i) { dx(i) = kmath::keep_if(dy(i), y(i) > real_t(0)); });
}

// Counter-based uniform in [0, 1) from (seed, i) (kernels/elementwise.hpp).
using elem::hash_uniform;

// Inverted dropout: keep with probability 1 - p, scale kept values by 1/(1-p).
// scale is a workspace holding 0 or 1/(1-p) per element, for the backward pass.
template <class Space>
void dropout_forward(index_t len, real_t p, std::uint64_t seed, const View1<Space>& x,
                     const View1<Space>& scale, const View1<Space>& y) {
  if (!(p >= 0 && p < 1)) throw Error(fmt::format("dropout: rate {} not in [0, 1)", p));
  detail::check_lens("dropout_forward", {{"x", x.extent(0), len},
                                         {"scale", scale.extent(0), len},
                                         {"y", y.extent(0), len}});
  const real_t keep = real_t(1) / (real_t(1) - p);
  Kokkos::parallel_for(
      "asgd::dropout_forward", Kokkos::RangePolicy<Space>(0, len), KOKKOS_LAMBDA(index_t i) {
        const real_t s = elem::dropout_scale(seed, i, p, keep);
        scale(i) = s;
        y(i) = x(i) * s;
      });
}

template <class Space>
void dropout_backward(index_t len, const View1<Space>& scale, const View1<Space>& dy,
                      const View1<Space>& dx) {
  detail::check_lens("dropout_backward", {{"scale", scale.extent(0), len},
                                          {"dy", dy.extent(0), len},
                                          {"dx", dx.extent(0), len}});
  Kokkos::parallel_for(
      "asgd::dropout_backward", Kokkos::RangePolicy<Space>(0, len),
      KOKKOS_LAMBDA(index_t i) { dx(i) = dy(i) * scale(i); });
}

}  // namespace asgd::kernels
