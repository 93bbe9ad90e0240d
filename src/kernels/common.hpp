#pragma once
// What every Kokkos kernel family (kernels/*.hpp) shares: the view types,
// the extent checks, Kokkos' math functions under one name, the bias helpers.
//
// Layout is NHWC throughout, LayoutRight:
//   N = batch, H, W = height, width, C = channels, F = filters (output channels),
//   KH, KW = kernel height, width, K = KH*KW*C (im2col row length),
//   M = outputs of a dense layer.
//
// Public entry points check ranks and extents on the host and throw asgd::Error
// with every extent in the message; the functors they launch check nothing and
// allocate nothing. Backward passes ADD into parameter gradients (callers zero
// them) and OVERWRITE activation gradients (dx).
#include <KokkosBlas3_gemm.hpp>
#include <Kokkos_Core.hpp>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <fmt/format.h>

#include "common/error.hpp"
#include "common/types.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/geometry.hpp"

namespace asgd::kernels {

// Kokkos 3.4 keeps its math functions in Kokkos::Experimental; 3.7+ in Kokkos.
namespace kmath {
#if KOKKOS_VERSION >= 30700
using Kokkos::pow;
#else
using Kokkos::Experimental::pow;
#endif
// v if keep else +0, with integer masking: compilers turn a float select or a
// multiply by a 0/1 mask into a branch, which mispredicts half the time on the
// random signs of activations.
KOKKOS_INLINE_FUNCTION float keep_if(float v, bool keep) {
  std::uint32_t bits;
  memcpy(&bits, &v, sizeof bits);
  bits &= 0u - static_cast<std::uint32_t>(keep);
  memcpy(&v, &bits, sizeof v);
  return v;
}
template <class T>
KOKKOS_INLINE_FUNCTION constexpr T neg_infinity() {
  return -Kokkos::Experimental::infinity<T>::value;
}
}  // namespace kmath

template <class Space>
using View1 = Kokkos::View<real_t*, Kokkos::LayoutRight, typename Space::memory_space>;
template <class Space>
using View2 = Kokkos::View<real_t**, Kokkos::LayoutRight, typename Space::memory_space>;
template <class Space>
using IView1 = Kokkos::View<std::int32_t*, Kokkos::LayoutRight, typename Space::memory_space>;


namespace detail {

inline void check_len(const char* what, const char* name, std::size_t have, index_t want) {
  if (static_cast<index_t>(have) < want)
    throw Error(fmt::format("{}: {} has {} elements, needs {}", what, name, have, want));
}

// Several extents at once: {name, have, want} each.
struct Extent {
  const char* name;
  std::size_t have;
  index_t want;
};
inline void check_lens(const char* what, std::initializer_list<Extent> extents) {
  for (const Extent& e : extents) check_len(what, e.name, e.have, e.want);
}

template <class Space>
View2<Space> as_matrix(const View1<Space>& v, index_t rows, index_t cols) {
  return View2<Space>(v.data(), rows, cols);
}

// y[r, f] += b[f] for every row r.
template <class Space>
void add_bias(const View2<Space>& y, const View1<Space>& b) {
  const index_t cols = y.extent(1);
  Kokkos::parallel_for(
      "asgd::add_bias", Kokkos::RangePolicy<Space>(0, y.extent(0)), KOKKOS_LAMBDA(index_t r) {
        for (index_t f = 0; f < cols; ++f) y(r, f) += b(f);
      });
}

// The outputs whose window covers input position p (padded coordinates):
// o with o*stride <= p <= o*stride + k - 1, clipped to [0, n_out).

// db[F] += column sums of dy[R, F], as a GEMM with a ones vector so the
// vendor BLAS does the reduction (KokkosBlas' own gemv on LayoutRight is slow).
template <class Space>
void bias_grad(const View2<Space>& dy, const View1<Space>& ones, const View1<Space>& db) {
  const index_t rows = dy.extent(0), cols = dy.extent(1);
  KokkosBlas::gemm("T", "N", real_t(1), dy, View2<Space>(ones.data(), rows, 1), real_t(1),
                   View2<Space>(db.data(), cols, 1));
}

}  // namespace detail

}  // namespace asgd::kernels
