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
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <memory>
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

// The window kernels (pooling, LRN) keep a pixel's channels innermost (NHWC)
// and sum or compare over the window's pixels: f(ch0, width) handles channels
// ch0..ch0+width with its running values in registers (a running value in
// memory waits for its own store at every window pixel), width a compile-time
// kChannelBlock for whole blocks, then 1 for the rest. Each channel's
// operations keep their order: the results do not depend on the blocking.
inline constexpr index_t kChannelBlock = 16;
template <class F>
KOKKOS_INLINE_FUNCTION void channel_blocks(index_t channels, const F& f) {
  index_t ch0 = 0;
  for (; ch0 + kChannelBlock <= channels; ch0 += kChannelBlock)
    f(ch0, std::integral_constant<index_t, kChannelBlock>{});
  for (; ch0 < channels; ++ch0) f(ch0, std::integral_constant<index_t, 1>{});
}

// True for a host execution space that runs several threads (Kokkos' OpenMP
// backend). There the kernels split every GEMM themselves into a fixed number
// of blocks (detail::host_gemm), one single-threaded BLAS call per block: so a
// GEMM's results do not depend on the thread count, and the BLAS's
// own threads never compete with Kokkos' (asgd sets the BLAS to 1 thread on
// such a build; common/blas_env.cpp). Serial and device spaces call KokkosBlas.
template <class Space>
inline constexpr bool parallel_host =
#if defined(KOKKOS_ENABLE_OPENMP)
    std::is_same_v<typename Space::execution_space, Kokkos::OpenMP>;
#else
    false;
#endif

// True for a space whose memory the host reads (Serial, OpenMP).
template <class Space>
inline constexpr bool host_space =
    Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename Space::memory_space>::accessible;

}  // namespace detail

}  // namespace asgd::kernels

#if defined(KOKKOS_ENABLE_OPENMP)
#include <cblas.h>
#endif

namespace asgd::kernels {

namespace detail {

#if defined(KOKKOS_ENABLE_OPENMP)
// C[m, n] = alpha op(A) op(B) + beta C on row-major pointers: one BLAS call
// (cblas; single-threaded on an OpenMP build).
inline void blas_gemm(char ta, char tb, index_t m, index_t n, index_t k, real_t alpha,
                      const real_t* a, index_t lda, const real_t* b, index_t ldb, real_t beta,
                      real_t* c, index_t ldc) {
  if (m <= 0 || n <= 0) return;
  cblas_sgemm(CblasRowMajor, ta == 'N' ? CblasNoTrans : CblasTrans,
              tb == 'N' ? CblasNoTrans : CblasTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}

// How many row blocks a parallel host GEMM is cut into: a constant, not the
// thread count, because OpenBLAS's result for an element depends on the shape
// of the call it is in (its small-matrix and edge kernels sum in other orders),
// so the same cut for any thread count gives the same bits. 4 balances 1, 2 and
// 4 threads.
inline constexpr index_t kGemmBlocks = 4;

// The same cut into kGemmBlocks blocks run by the threads of Space. Each block
// is one BLAS call, and the cut is fixed by the shape alone:
// - a GEMM with a long inner dimension and a small C (a weight gradient summed
//   over a batch's pixels: k >= 8 max(m, n)) splits k; each block writes its
//   partial product to its own buffer, and C = beta C + the partials in block
//   order;
// - otherwise the longer side of C is cut, rows or columns: every block packs
//   all of the operand that side does not belong to, so that one is the smaller
//   (cutting fc7's 64 batch rows made each of 4 calls pack its 12.8 MB of weights).
template <class Space>
void host_gemm(char ta, char tb, index_t m, index_t n, index_t k, real_t alpha, const real_t* a,
               index_t lda, const real_t* b, index_t ldb, real_t beta, real_t* c, index_t ldc) {
  if (m <= 0 || n <= 0) return;
  using Policy = Kokkos::RangePolicy<Space, Kokkos::Schedule<Kokkos::Static>>;
  // Below about 1 MFLOP a parallel dispatch costs more than it saves.
  if (2.0 * double(m) * double(n) * double(k) < 1e6) {
    blas_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (k >= 8 * std::max(m, n) && m * n * kGemmBlocks <= (index_t(1) << 18)) {
    // every element is written by its block's GEMM (beta 0): no initialisation
    const std::unique_ptr<real_t[]> part(new real_t[static_cast<std::size_t>(kGemmBlocks * m * n)]);
    real_t* pp = part.get();
    Kokkos::parallel_for("asgd::gemm[k]", Policy(0, kGemmBlocks), [=](index_t t) {
      const index_t k0 = k * t / kGemmBlocks, k1 = k * (t + 1) / kGemmBlocks;
      // op(A)'s columns k0..k1 and op(B)'s rows k0..k1
      blas_gemm(ta, tb, m, n, k1 - k0, alpha, ta == 'N' ? a + k0 : a + k0 * lda, lda,
                tb == 'N' ? b + k0 * ldb : b + k0, ldb, real_t(0), pp + t * m * n, n);
    });
    Kokkos::parallel_for("asgd::gemm[k-sum]", Policy(0, m), [=](index_t r) {
      for (index_t j = 0; j < n; ++j) {
        real_t s = beta == real_t(0) ? real_t(0) : beta * c[r * ldc + j];
        for (index_t t = 0; t < kGemmBlocks; ++t) s += pp[(t * m + r) * n + j];
        c[r * ldc + j] = s;
      }
    });
    return;
  }
  const bool by_cols = n > m;
  const index_t side = by_cols ? n : m;
  const index_t blocks = std::min<index_t>(kGemmBlocks, side);
  Kokkos::parallel_for("asgd::gemm[blocks]", Policy(0, blocks), [=](index_t t) {
    const index_t s0 = side * t / blocks, s1 = side * (t + 1) / blocks;
    if (by_cols)  // C's columns s0..s1: op(B)'s columns
      blas_gemm(ta, tb, m, s1 - s0, k, alpha, a, lda, tb == 'N' ? b + s0 : b + s0 * ldb, ldb,
                beta, c + s0, ldc);
    else  // C's rows s0..s1: op(A)'s rows
      blas_gemm(ta, tb, s1 - s0, n, k, alpha, ta == 'N' ? a + s0 * lda : a + s0, lda, b, ldb,
                beta, c + s0 * ldc, ldc);
  });
}
#endif

// KokkosBlas::gemm on Serial and device spaces (what ran before the OpenMP
// backend: bit-identical there); host_gemm on a parallel host space.
template <class Space>
void gemm(const char* ta, const char* tb, real_t alpha, const View2<Space>& a,
          const View2<Space>& b, real_t beta, const View2<Space>& c) {
#if defined(KOKKOS_ENABLE_OPENMP)
  if constexpr (parallel_host<Space>) {
    const index_t k = ta[0] == 'N' ? a.extent(1) : a.extent(0);
    host_gemm<Space>(ta[0], tb[0], c.extent(0), c.extent(1), k, alpha, a.data(), a.extent(1),
                     b.data(), b.extent(1), beta, c.data(), c.extent(1));
    return;
  }
#endif
  KokkosBlas::gemm(ta, tb, alpha, a, b, beta, c);
}

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
  gemm<Space>("T", "N", real_t(1), dy, View2<Space>(ones.data(), rows, 1), real_t(1),
              View2<Space>(db.data(), cols, 1));
}

}  // namespace detail

}  // namespace asgd::kernels
