// Unit tests for every kernel in kernels/kernels.hpp against the plain host
// references in kernels/reference.hpp.
//
// Conventions used throughout:
//  * Every kernel output (y, dx, col, denom, argmax, ...) is pre-filled with NaN
//    (or a sentinel for integers) before the kernel runs, so an element the
//    kernel forgot to write fails the comparison.
//  * The float Kokkos kernel is compared to the reference run in double on the
//    same (float-representable) inputs, with tolerance
//        eps_float * reduction_length * max(1, |reference value|) * 4,
//    reduction_length being the number of terms summed into that element.
//  * The reference backward passes are checked by central finite differences in
//    double (h = 1e-6) of the scalar loss L = sum(y * r) with random r, so that
//    dy = r; the Kokkos backward passes are then compared to the reference ones.
//  * Backward passes ADD into parameter gradients (dw, db) and OVERWRITE dx:
//    dw/db are pre-filled with known nonzero values, dx with NaN.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "kernels/kernels.hpp"
#include "kernels/reference.hpp"

namespace {

using asgd::index_t;
namespace k = asgd::kernels;
namespace ref = asgd::kernels::ref;

using Space = Kokkos::DefaultExecutionSpace;
using V = k::View1<Space>;
using IV = k::IView1<Space>;
using Vec = std::vector<float>;
using DVec = std::vector<double>;
using IVec = std::vector<std::int32_t>;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr std::int32_t kSentinel = -7;
constexpr double kEpsF = std::numeric_limits<float>::epsilon();
constexpr double kFactor = 4;      // slack on eps_float * reduction_length
constexpr double kFdStep = 1e-6;   // central-difference step (double)
constexpr double kFdTol = 1e-6;    // |analytic - fd| <= kFdTol * max(1, |fd|)

// ---------------------------------------------------------------------------
// Host <-> device helpers
// ---------------------------------------------------------------------------
V make(const Vec& h) {
  V v(Kokkos::view_alloc(std::string("v"), Kokkos::WithoutInitializing), h.size());
  auto m = Kokkos::create_mirror_view(v);
  for (std::size_t i = 0; i < h.size(); ++i) m(i) = h[i];
  Kokkos::deep_copy(v, m);
  return v;
}
IV make_i(const IVec& h) {
  IV v(Kokkos::view_alloc(std::string("iv"), Kokkos::WithoutInitializing), h.size());
  auto m = Kokkos::create_mirror_view(v);
  for (std::size_t i = 0; i < h.size(); ++i) m(i) = h[i];
  Kokkos::deep_copy(v, m);
  return v;
}
V nans(index_t n) { return make(Vec(static_cast<std::size_t>(n), kNaN)); }
V ones(index_t n) { return make(Vec(static_cast<std::size_t>(n), 1.0f)); }
Vec get(const V& v) {
  auto m = Kokkos::create_mirror_view(v);
  Kokkos::deep_copy(m, v);
  return Vec(m.data(), m.data() + m.extent(0));
}
IVec get_i(const IV& v) {
  auto m = Kokkos::create_mirror_view(v);
  Kokkos::deep_copy(m, v);
  return IVec(m.data(), m.data() + m.extent(0));
}
DVec dbl(const Vec& v) { return DVec(v.begin(), v.end()); }

// Uniform floats in [lo, hi): float-representable inputs for both sides.
Vec rand_vec(index_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Vec v(static_cast<std::size_t>(n));
  for (auto& e : v) e = dist(gen);
  return v;
}
// Values of magnitude in [lo, hi) with random sign: away from 0.
Vec rand_away_from_zero(index_t n, unsigned seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> mag(lo, hi);
  std::bernoulli_distribution sign(0.5);
  Vec v(static_cast<std::size_t>(n));
  for (auto& e : v) e = sign(gen) ? mag(gen) : -mag(gen);
  return v;
}
// A random permutation of n evenly spaced values in [-1, 1): all distinct, with
// gaps far larger than the finite-difference step, so argmaxes are stable.
Vec distinct_vec(index_t n, unsigned seed) {
  std::vector<index_t> idx(static_cast<std::size_t>(n));
  std::iota(idx.begin(), idx.end(), index_t(0));
  std::shuffle(idx.begin(), idx.end(), std::mt19937(seed));
  Vec v(idx.size());
  for (std::size_t i = 0; i < idx.size(); ++i)
    v[i] = static_cast<float>(-1.0 + 2.0 * static_cast<double>(idx[i]) / static_cast<double>(n));
  return v;
}
IVec rand_labels(index_t n, index_t m, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<std::int32_t> dist(0, static_cast<std::int32_t>(m - 1));
  IVec v(static_cast<std::size_t>(n));
  for (auto& e : v) e = dist(gen);
  return v;
}

double dot(const DVec& a, const DVec& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// ---------------------------------------------------------------------------
// Comparisons
// ---------------------------------------------------------------------------
// Float kernel output vs double reference: eps_float * len * max(1, |want|) * 4.
void expect_close(const Vec& got, const DVec& want, double len, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double tol = kEpsF * std::max(len, 1.0) * std::max(1.0, std::abs(want[i])) * kFactor;
    if (!(std::abs(static_cast<double>(got[i]) - want[i]) <= tol) && ++bad <= 8)
      ADD_FAILURE() << what << "[" << i << "]: kernel " << got[i] << " reference " << want[i]
                    << " tolerance " << tol;
  }
  EXPECT_EQ(bad, 0) << what << ": mismatching elements";
}

void expect_equal(const Vec& got, const Vec& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i]) && ++bad <= 8)
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << " want " << want[i];
  EXPECT_EQ(bad, 0) << what << ": mismatching elements";
}

void expect_all_nan(const Vec& v, const std::string& what) {
  for (std::size_t i = 0; i < v.size(); ++i)
    EXPECT_TRUE(std::isnan(v[i])) << what << "[" << i << "] was written: " << v[i];
}

// Central differences of loss() with respect to every element of p (in place).
DVec fd_grad(DVec& p, const std::function<double()>& loss) {
  DVec g(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double save = p[i];
    p[i] = save + kFdStep;
    const double lp = loss();
    p[i] = save - kFdStep;
    const double lm = loss();
    p[i] = save;
    g[i] = (lp - lm) / (2 * kFdStep);
  }
  return g;
}

void expect_fd(const DVec& analytic, const DVec& fd, const std::string& what) {
  ASSERT_EQ(analytic.size(), fd.size()) << what;
  int bad = 0;
  for (std::size_t i = 0; i < fd.size(); ++i) {
    const double tol = kFdTol * std::max(1.0, std::abs(fd[i]));
    if (!(std::abs(analytic[i] - fd[i]) <= tol) && ++bad <= 8)
      ADD_FAILURE() << what << "[" << i << "]: analytic " << analytic[i] << " finite diff "
                    << fd[i];
  }
  EXPECT_EQ(bad, 0) << what << ": mismatching elements";
}

// fn() must throw asgd::Error whose message contains every part.
template <class Fn>
void expect_error(Fn&& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected asgd::Error, nothing thrown";
  } catch (const asgd::Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

// ---------------------------------------------------------------------------
// Geometry cases
// ---------------------------------------------------------------------------
struct ConvCase {
  index_t n, h, w, c, f, k, stride, pad;
};
std::string describe(const ConvCase& cc) {
  return "conv n=" + std::to_string(cc.n) + " h=" + std::to_string(cc.h) +
         " w=" + std::to_string(cc.w) + " c=" + std::to_string(cc.c) +
         " f=" + std::to_string(cc.f) + " k=" + std::to_string(cc.k) +
         " stride=" + std::to_string(cc.stride) + " pad=" + std::to_string(cc.pad);
}
const ConvCase kConvCases[] = {
    {3, 7, 5, 3, 4, 3, 2, 1},  // odd sizes, stride 2, pad 1
    {2, 7, 5, 3, 4, 5, 1, 2},  // kernel 5 pad 2 keeps the size
    {2, 9, 8, 2, 3, 2, 3, 1},  // stride > kernel: some pixels lie in no window
    {1, 6, 5, 2, 3, 1, 1, 0},  // 1x1
    {2, 3, 4, 3, 2, 2, 1, 2},  // pad >= kernel: some windows lie wholly in the padding
};

struct PoolCase {
  index_t n, h, w, c, k, stride;
};
std::string describe(const PoolCase& pc) {
  return "pool n=" + std::to_string(pc.n) + " h=" + std::to_string(pc.h) +
         " w=" + std::to_string(pc.w) + " c=" + std::to_string(pc.c) +
         " k=" + std::to_string(pc.k) + " stride=" + std::to_string(pc.stride);
}
const PoolCase kPoolCases[] = {
    {3, 7, 5, 3, 3, 2},  // overlapping 3/2, windows fit exactly
    {2, 8, 6, 3, 3, 2},  // overlapping 3/2, last windows clipped (ceil mode)
    {3, 7, 5, 3, 2, 2},  // 2/2, last windows clipped to one row / column
    {2, 7, 5, 2, 2, 3},  // stride > size, last window clipped
    {2, 4, 5, 2, 1, 2},  // stride > size: ceil mode must not create empty windows
};

std::string describe(const k::LrnParams& p) {
  return std::string(p.cross_map ? "cross-map" : "same-map") + " size " + std::to_string(p.size) +
         " beta " + std::to_string(p.beta);
}
std::vector<k::LrnParams> lrn_cases() {
  std::vector<k::LrnParams> out;
  for (bool cross : {false, true})
    for (index_t size : {3, 5})
      // beta 0.75 takes the square-root form of d^-beta, any other pow;
      // 37 channels: two of the kernel's 16-channel blocks and a remainder
      for (float beta : {0.75f, 0.6f})
        for (index_t channels : {6, 37}) {
          k::LrnParams p;
          p.n = 2;
          p.h = 7;
          p.w = 5;
          p.c = channels;
          p.size = size;
          // Large alpha so the cross terms of the backward pass matter.
          p.alpha = 2.0f;
          p.beta = beta;
          p.k = 2.0f;
          p.cross_map = cross;
          out.push_back(p);
        }
  // windows wider than the image and the channels (clipped on both sides)
  for (bool cross : {false, true}) {
    k::LrnParams p;
    p.n = 2;
    p.h = 2;
    p.w = 3;
    p.c = 3;
    p.size = 5;
    p.alpha = 2.0f;
    p.beta = 0.75f;
    p.k = 2.0f;
    p.cross_map = cross;
    out.push_back(p);
  }
  return out;
}

// ===========================================================================
// Geometry
// ===========================================================================
TEST(Geometry, PoolWindowOutputSizes) {
  EXPECT_EQ(k::pool_window(1, 32, 32, 3, 3, 2).oh, 16);
  EXPECT_EQ(k::pool_window(1, 16, 16, 3, 3, 2).oh, 8);
  EXPECT_EQ(k::pool_window(1, 8, 8, 3, 3, 2).oh, 4);
  EXPECT_EQ(k::pool_window(1, 28, 28, 1, 2, 2).oh, 14);
  const auto g = k::pool_window(2, 8, 6, 3, 3, 2);  // ceil mode: 8 -> 4 (clipped), 6 -> 3
  EXPECT_EQ(g.oh, 4);
  EXPECT_EQ(g.ow, 3);
  EXPECT_EQ(g.n, 2);
  EXPECT_EQ(g.c, 3);
  EXPECT_EQ(g.kh, 3);
  EXPECT_EQ(g.kw, 3);
  EXPECT_EQ(g.pad, 0);
  const auto g2 = k::pool_window(1, 7, 5, 1, 2, 2);
  EXPECT_EQ(g2.oh, 4);
  EXPECT_EQ(g2.ow, 3);
  // stride > size: 1/2 on 4x5 has windows at 0, 2 (not an empty one at 4) and 0, 2, 4.
  const auto g3 = k::pool_window(1, 4, 5, 1, 1, 2);
  EXPECT_EQ(g3.oh, 2);
  EXPECT_EQ(g3.ow, 3);
  // Every window starts inside the input, also when stride > size.
  for (const auto& pc : kPoolCases) {
    SCOPED_TRACE(describe(pc));
    const auto q = k::pool_window(pc.n, pc.h, pc.w, pc.c, pc.k, pc.stride);
    EXPECT_LT((q.oh - 1) * q.stride, q.h);
    EXPECT_LT((q.ow - 1) * q.stride, q.w);
    if (q.stride <= q.kh) {  // ceil mode: then the last window reaches the edge or past it
      EXPECT_GE((q.oh - 1) * q.stride + q.kh, q.h);
      EXPECT_GE((q.ow - 1) * q.stride + q.kw, q.w);
    }
  }
}

TEST(Geometry, ConvWindowOutputSizes) {
  EXPECT_EQ(k::conv_window(1, 32, 32, 3, 5, 1, 2).oh, 32);  // 5 pad 2 keeps the size
  EXPECT_EQ(k::conv_window(1, 32, 32, 3, 5, 1, 2).ow, 32);
  const auto a = k::conv_window(1, 227, 227, 3, 11, 4, 0);
  EXPECT_EQ(a.oh, 55);
  EXPECT_EQ(a.ow, 55);
  const auto g = k::conv_window(3, 7, 5, 3, 3, 2, 1);
  EXPECT_EQ(g.oh, 4);
  EXPECT_EQ(g.ow, 3);
  EXPECT_EQ(g.kh, 3);
  EXPECT_EQ(g.kw, 3);
  EXPECT_EQ(g.stride, 2);
  EXPECT_EQ(g.pad, 1);
  EXPECT_EQ(k::conv_window(1, 7, 9, 1, 7, 1, 0).oh, 1);
  // floor, not ceil: (8 + 2 - 3) / 2 + 1 = 4 and (10 + 0 - 3) / 3 + 1 = 3
  EXPECT_EQ(k::conv_window(1, 8, 8, 3, 3, 2, 1).oh, 4);
  EXPECT_EQ(k::conv_window(1, 8, 8, 3, 3, 2, 1).ow, 4);
  EXPECT_EQ(k::conv_window(1, 10, 11, 3, 3, 3, 0).oh, 3);
  EXPECT_EQ(k::conv_window(1, 10, 11, 3, 3, 3, 0).ow, 3);
  EXPECT_EQ(k::conv_window(1, 7, 9, 1, 7, 1, 0).ow, 3);
}

TEST(Geometry, BadGeometryThrowsWithExtents) {
  expect_error([] { k::conv_window(1, 4, 6, 3, 7, 1, 0); }, {"kernel 7", "4x6"});
  expect_error([] { k::conv_window(1, 9, 6, 3, 7, 1, 0); }, {"kernel 7", "9x6"});
  expect_error([] { k::conv_window(1, 9, 8, 3, 3, 0, 1); }, {"stride 0", "9x8"});
  expect_error([] { k::conv_window(1, 9, 8, 3, 3, 1, -1); }, {"pad -1", "9x8"});
  expect_error([] { k::conv_window(1, 9, 8, 3, 0, 1, 0); }, {"kernel 0", "9x8"});
  expect_error([] { k::pool_window(1, 4, 6, 3, 5, 2); }, {"size 5", "4x6"});
  expect_error([] { k::pool_window(1, 6, 4, 3, 5, 2); }, {"size 5", "6x4"});
  expect_error([] { k::pool_window(1, 6, 6, 3, 3, 0); }, {"stride 0", "6x6"});
  expect_error([] { k::pool_window(1, 6, 6, 3, 0, 1); }, {"size 0", "6x6"});
}

// ===========================================================================
// Dense
// ===========================================================================
TEST(Dense, ForwardMatchesReference) {
  const index_t n = 3, kk = 7, m = 5;
  const Vec x = rand_vec(n * kk, 1), w = rand_vec(kk * m, 2), b = rand_vec(m, 3);
  V y = nans(n * m);
  k::dense_forward<Space>(n, kk, m, make(x), make(w), make(b), y);
  DVec yr(n * m);
  const DVec xd = dbl(x), wd = dbl(w), bd = dbl(b);
  ref::dense_forward<double>(n, kk, m, xd.data(), wd.data(), bd.data(), yr.data());
  expect_close(get(y), yr, kk + 1, "y");
}

TEST(Dense, ReferenceBackwardMatchesFiniteDifferences) {
  const index_t n = 3, kk = 7, m = 5;
  DVec x = dbl(rand_vec(n * kk, 11)), w = dbl(rand_vec(kk * m, 12)), b = dbl(rand_vec(m, 13));
  const DVec r = dbl(rand_vec(n * m, 14));
  auto loss = [&] {
    DVec y(n * m);
    ref::dense_forward<double>(n, kk, m, x.data(), w.data(), b.data(), y.data());
    return dot(y, r);
  };
  DVec dx(n * kk, std::nan("")), dw(kk * m, 0.0), db(m, 0.0);
  ref::dense_backward<double>(n, kk, m, x.data(), w.data(), r.data(), dx.data(), dw.data(),
                              db.data());
  expect_fd(dx, fd_grad(x, loss), "dx");
  expect_fd(dw, fd_grad(w, loss), "dw");
  expect_fd(db, fd_grad(b, loss), "db");
}

TEST(Dense, BackwardMatchesReferenceAddsToParamGradsOverwritesDx) {
  const index_t n = 3, kk = 7, m = 5;
  const Vec x = rand_vec(n * kk, 21), w = rand_vec(kk * m, 22), dy = rand_vec(n * m, 23);
  // Known nonzero prior contents: the kernel must add to them.
  const Vec dw0 = rand_vec(kk * m, 24, 0.5f, 1.5f), db0 = rand_vec(m, 25, 0.5f, 1.5f);
  V dx = nans(n * kk), dw = make(dw0), db = make(db0);
  k::dense_backward<Space>(n, kk, m, make(x), make(w), make(dy), dx, dw, db, ones(n));
  const DVec xd = dbl(x), wd = dbl(w), dyd = dbl(dy);
  DVec dxr(n * kk, std::nan("")), dwr = dbl(dw0), dbr = dbl(db0);
  ref::dense_backward<double>(n, kk, m, xd.data(), wd.data(), dyd.data(), dxr.data(), dwr.data(),
                              dbr.data());
  expect_close(get(dx), dxr, m, "dx");
  expect_close(get(dw), dwr, n + 1, "dw");
  expect_close(get(db), dbr, n + 1, "db");

  // Without dx (first layer): parameter gradients still accumulate (twice now).
  V dw2 = make(dw0), db2 = make(db0);
  k::dense_backward<Space>(n, kk, m, make(x), make(w), make(dy), V(), dw2, db2, ones(n));
  k::dense_backward<Space>(n, kk, m, make(x), make(w), make(dy), V(), dw2, db2, ones(n));
  ref::dense_backward<double>(n, kk, m, xd.data(), wd.data(), dyd.data(), nullptr, dwr.data(),
                              dbr.data());
  expect_close(get(dw2), dwr, 2 * n + 1, "dw (no dx, twice)");
  expect_close(get(db2), dbr, 2 * n + 1, "db (no dx, twice)");
}

TEST(Dense, ZeroSizes) {
  const index_t kk = 7, m = 5;
  const Vec w = rand_vec(kk * m, 31), b = rand_vec(m, 32);
  const Vec dw0 = rand_vec(kk * m, 33, 0.5f, 1.5f), db0 = rand_vec(m, 34, 0.5f, 1.5f);
  {  // n = 0: nothing written (views padded so they are not empty)
    V y = nans(4), dx = nans(4), dw = make(dw0), db = make(db0);
    k::dense_forward<Space>(0, kk, m, nans(4), make(w), make(b), y);
    expect_all_nan(get(y), "y (n=0)");
    k::dense_backward<Space>(0, kk, m, nans(4), make(w), nans(4), dx, dw, db, ones(4));
    expect_all_nan(get(dx), "dx (n=0)");
    expect_equal(get(dw), dw0, "dw (n=0)");
    expect_equal(get(db), db0, "db (n=0)");
  }
  {  // m = 0: no outputs; dx = dy w^T is a sum over nothing, so zero
    const index_t n = 3;
    V y = nans(4), dx = nans(n * kk + 2);
    k::dense_forward<Space>(n, kk, 0, make(rand_vec(n * kk, 35)), nans(2), nans(2), y);
    expect_all_nan(get(y), "y (m=0)");
    V dw = nans(2), db = nans(2);
    k::dense_backward<Space>(n, kk, 0, make(rand_vec(n * kk, 35)), nans(2), nans(2), dx, dw, db,
                             ones(n));
    const Vec got = get(dx);
    for (index_t i = 0; i < n * kk; ++i) EXPECT_EQ(got[i], 0.0f) << "dx[" << i << "] (m=0)";
    EXPECT_TRUE(std::isnan(got[n * kk]) && std::isnan(got[n * kk + 1])) << "dx written past n*k";
    expect_all_nan(get(dw), "dw (m=0)");
    expect_all_nan(get(db), "db (m=0)");
  }
  {  // k = 0: y = b in every row; db accumulates the column sums of dy; dw, dx empty
    const index_t n = 3;
    V y = nans(n * m + 2);
    k::dense_forward<Space>(n, 0, m, nans(2), nans(2), make(b), y);
    const Vec got = get(y);
    for (index_t r = 0; r < n; ++r)
      for (index_t j = 0; j < m; ++j) EXPECT_EQ(got[r * m + j], b[j]) << "y row " << r;
    EXPECT_TRUE(std::isnan(got[n * m]) && std::isnan(got[n * m + 1])) << "y written past n*m";
    const Vec dy = rand_vec(n * m, 36);
    V dx = nans(2), dw = nans(2), db = make(db0);
    k::dense_backward<Space>(n, 0, m, nans(2), nans(2), make(dy), dx, dw, db, ones(n));
    DVec dbr = dbl(db0);
    const DVec dyd = dbl(dy);
    ref::dense_backward<double>(n, 0, m, nullptr, nullptr, dyd.data(), nullptr, nullptr,
                                dbr.data());
    expect_close(get(db), dbr, n + 1, "db (k=0)");
    expect_all_nan(get(dx), "dx (k=0)");
    expect_all_nan(get(dw), "dw (k=0)");
  }
}

// ===========================================================================
// Convolution
// ===========================================================================
// im2col written out directly: col[(n, oy, ox), (i, j, c)].
Vec im2col_expected(const k::Window& g, const Vec& x) {
  Vec col;
  for (index_t n = 0; n < g.n; ++n)
    for (index_t oy = 0; oy < g.oh; ++oy)
      for (index_t ox = 0; ox < g.ow; ++ox)
        for (index_t i = 0; i < g.kh; ++i)
          for (index_t j = 0; j < g.kw; ++j)
            for (index_t c = 0; c < g.c; ++c) {
              const index_t iy = oy * g.stride - g.pad + i, ix = ox * g.stride - g.pad + j;
              const bool in = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;
              col.push_back(in ? x[((n * g.h + iy) * g.w + ix) * g.c + c] : 0.0f);
            }
  return col;
}

TEST(Conv2d, Im2colAndCol2im) {
  for (const auto& cc : kConvCases) {
    SCOPED_TRACE(describe(cc));
    const auto g = k::conv_window(cc.n, cc.h, cc.w, cc.c, cc.k, cc.stride, cc.pad);
    const index_t kk = g.kh * g.kw * g.c, rows = g.n * g.oh * g.ow, nx = g.n * g.h * g.w * g.c;
    const Vec x = rand_vec(nx, 41);
    V col = nans(rows * kk);
    k::im2col<Space>(g, make(x), col);
    expect_equal(get(col), im2col_expected(g, x), "col");

    // col2im is the adjoint: dx[p] = sum of the dcol entries im2col copied from p.
    const Vec dcol = rand_vec(rows * kk, 42);
    DVec want(nx, 0.0);
    index_t e = 0;
    for (index_t n = 0; n < g.n; ++n)
      for (index_t oy = 0; oy < g.oh; ++oy)
        for (index_t ox = 0; ox < g.ow; ++ox)
          for (index_t i = 0; i < g.kh; ++i)
            for (index_t j = 0; j < g.kw; ++j)
              for (index_t c = 0; c < g.c; ++c, ++e) {
                const index_t iy = oy * g.stride - g.pad + i, ix = ox * g.stride - g.pad + j;
                if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
                  want[((n * g.h + iy) * g.w + ix) * g.c + c] += dcol[e];
              }
    V dx = nans(nx);
    k::col2im<Space>(g, make(dcol), dx);
    expect_close(get(dx), want, g.kh * g.kw, "dx");
  }
}

TEST(Conv2d, ForwardMatchesReference) {
  for (const auto& cc : kConvCases) {
    SCOPED_TRACE(describe(cc));
    const auto g = k::conv_window(cc.n, cc.h, cc.w, cc.c, cc.k, cc.stride, cc.pad);
    const index_t kk = g.kh * g.kw * g.c, rows = g.n * g.oh * g.ow, f = cc.f;
    const Vec x = rand_vec(g.n * g.h * g.w * g.c, 51), wt = rand_vec(kk * f, 52),
              b = rand_vec(f, 53);
    V col = nans(rows * kk), y = nans(rows * f);
    k::conv2d_forward<Space>(g, f, make(x), make(wt), make(b), col, y);
    DVec yr(rows * f);
    const DVec xd = dbl(x), wd = dbl(wt), bd = dbl(b);
    ref::conv2d_forward<double>(g, f, xd.data(), wd.data(), bd.data(), yr.data());
    expect_close(get(y), yr, kk + 1, "y");
    expect_equal(get(col), im2col_expected(g, x), "col (kept for backward)");
  }
}

TEST(Conv2d, ReferenceBackwardMatchesFiniteDifferences) {
  for (const auto& cc : kConvCases) {
    SCOPED_TRACE(describe(cc));
    const auto g = k::conv_window(cc.n, cc.h, cc.w, cc.c, cc.k, cc.stride, cc.pad);
    const index_t kk = g.kh * g.kw * g.c, rows = g.n * g.oh * g.ow, f = cc.f;
    const index_t nx = g.n * g.h * g.w * g.c;
    DVec x = dbl(rand_vec(nx, 61)), wt = dbl(rand_vec(kk * f, 62)), b = dbl(rand_vec(f, 63));
    const DVec r = dbl(rand_vec(rows * f, 64));
    auto loss = [&] {
      DVec y(rows * f);
      ref::conv2d_forward<double>(g, f, x.data(), wt.data(), b.data(), y.data());
      return dot(y, r);
    };
    DVec dx(nx, std::nan("")), dw(kk * f, 0.0), db(f, 0.0);
    ref::conv2d_backward<double>(g, f, x.data(), wt.data(), r.data(), dx.data(), dw.data(),
                                 db.data());
    expect_fd(dx, fd_grad(x, loss), "dx");
    expect_fd(dw, fd_grad(wt, loss), "dw");
    expect_fd(db, fd_grad(b, loss), "db");
  }
}

// One convolution case's random inputs and the double reference's gradients
// (param gradients start from dw0/db0: the kernels add to them).
struct ConvBackwardCase {
  k::Window g;
  index_t kk, rows, f, nx;
  Vec x, wt, b, dy, dw0, db0;
  DVec dxr, dwr, dbr;
  ConvBackwardCase(const ConvCase& cc, unsigned seed)
      : g(k::conv_window(cc.n, cc.h, cc.w, cc.c, cc.k, cc.stride, cc.pad)),
        kk(g.kh * g.kw * g.c), rows(g.n * g.oh * g.ow), f(cc.f), nx(g.n * g.h * g.w * g.c),
        x(rand_vec(nx, seed)), wt(rand_vec(kk * f, seed + 1)), b(rand_vec(f, seed + 2)),
        dy(rand_vec(rows * f, seed + 3)), dw0(rand_vec(kk * f, seed + 4, 0.5f, 1.5f)),
        db0(rand_vec(f, seed + 5, 0.5f, 1.5f)), dxr(nx, std::nan("")), dwr(dbl(dw0)),
        dbr(dbl(db0)) {
    const DVec xd = dbl(x), wd = dbl(wt), dyd = dbl(dy);
    ref::conv2d_backward<double>(g, f, xd.data(), wd.data(), dyd.data(), dxr.data(), dwr.data(),
                                 dbr.data());
  }
  // y against the reference's forward output (in double)
  void expect_forward(const V& y) const {
    const DVec xd = dbl(x), wd = dbl(wt), bd = dbl(b);
    DVec yr(rows * f);
    ref::conv2d_forward<double>(g, f, xd.data(), wd.data(), bd.data(), yr.data());
    expect_close(get(y), yr, kk + 1, "y");
  }
  void expect_grads(const V& dx, const V& dw, const V& db) const {
    if (dx.data() != nullptr) expect_close(get(dx), dxr, g.kh * g.kw * f, "dx");
    expect_close(get(dw), dwr, rows + 1, "dw");
    expect_close(get(db), dbr, rows + 1, "db");
  }
};

TEST(Conv2d, BackwardMatchesReferenceAddsToParamGradsOverwritesDx) {
  for (const auto& cc : kConvCases) {
    SCOPED_TRACE(describe(cc));
    const ConvBackwardCase t(cc, 71);
    const V wv = make(t.wt), dyv = make(t.dy);
    V col = nans(t.rows * t.kk), y = nans(t.rows * t.f);
    k::conv2d_forward<Space>(t.g, t.f, make(t.x), wv, make(t.b), col, y);

    V dcol = nans(t.rows * t.kk), dx = nans(t.nx), dw = make(t.dw0), db = make(t.db0);
    k::conv2d_backward<Space>(t.g, t.f, col, wv, dyv, dcol, dx, dw, db, ones(t.rows));
    t.expect_grads(dx, dw, db);

    // Without dx: dcol is not touched, parameter gradients still accumulate.
    V dcol2 = nans(t.rows * t.kk), dw2 = make(t.dw0), db2 = make(t.db0);
    k::conv2d_backward<Space>(t.g, t.f, col, wv, dyv, dcol2, V(), dw2, db2, ones(t.rows));
    t.expect_grads(V(), dw2, db2);
    expect_all_nan(get(dcol2), "dcol (no dx)");
  }
}

// The row-folded form (stride 1): same results as the reference, forward and
// backward (the input gradient as the transposed convolution where it fits, on
// the whole batch and a sample at a time), for every stride-1 case, with outputs
// and workspaces pre-filled with NaN; every workspace element is written.
TEST(Conv2d, RowFoldedFormMatchesReference) {
  int tried = 0, transposed = 0;
  for (const auto& cc : kConvCases) {
    if (cc.stride != 1) continue;
    ++tried;
    SCOPED_TRACE(describe(cc));
    const ConvBackwardCase t(cc, 95);
    V ws = nans(k::im2row_len(t.g)), y = nans(t.rows * t.f);
    k::conv2d_forward_rows<Space>(t.g, t.f, make(t.x), make(t.wt), make(t.b), ws, y);
    for (float v : get(ws)) ASSERT_FALSE(std::isnan(v)) << "im2row left an element unwritten";
    t.expect_forward(y);

    // dx as the transposed convolution where it fits (dcol holds
    // transposed_dx_len), else through col2im.
    const index_t tlen = k::transposed_dx_len<Space>(t.g, t.f);
    transposed += tlen > 0;
    V dcol = nans(std::max(t.rows * t.kk, tlen)), dx = nans(t.nx), dw = make(t.dw0),
      db = make(t.db0);
    k::conv2d_backward_rows<Space>(t.g, t.f, ws, make(t.wt), make(t.dy), dcol, dx, dw, db,
                                   ones(t.rows));
    t.expect_grads(dx, dw, db);
    if (tlen == 0 || t.g.n < 2) continue;
    // The same batch one sample at a time, as a layer runs it in chunks: the
    // second call reuses the flipped weights the first left in dcol's head.
    k::Window one = t.g;
    one.n = 1;
    const index_t pix = t.g.oh * t.g.ow, in1 = t.nx / t.g.n;
    V ws1 = nans(k::im2row_len(one)), dcol1 = nans(k::transposed_dx_len<Space>(one, t.f));
    V dx2 = nans(t.nx), dw2 = make(t.dw0), db2 = make(t.db0);
    for (index_t n = 0; n < t.g.n; ++n) {
      const Vec dyn(t.dy.begin() + n * pix * t.f, t.dy.begin() + (n + 1) * pix * t.f);
      V yn = nans(pix * t.f);
      k::conv2d_forward_rows<Space>(one, t.f, make(Vec(t.x.begin() + n * in1,
                                                         t.x.begin() + (n + 1) * in1)),
                                    make(t.wt), make(t.b), ws1, yn);
      k::conv2d_backward_rows<Space>(one, t.f, ws1, make(t.wt), make(dyn), dcol1,
                                     V(dx2.data() + n * in1, in1), dw2, db2, ones(pix), n == 0);
    }
    t.expect_grads(dx2, dw2, db2);
  }
  EXPECT_GE(tried, 3);
  if (k::detail::host_space<Space>) {
    EXPECT_GE(transposed, 2);
  }
  const auto strided = k::conv_window(1, 7, 7, 2, 3, 2, 1);
  V big = nans(4096);
  EXPECT_THROW(k::conv2d_forward_rows<Space>(strided, 2, big, big, big, big, big), asgd::Error);
}

// The direct form (filters in vectors of 8 or 16, first layers): the reference's
// forward output and parameter gradients, added to what the gradients held,
// for odd sizes, strides, padding wider than the kernel, 8 and 40 filters (a
// block of 32 and one of 8), pixel rows of odd length and rows and tap counts
// that the wide blocks (2 or 4 pixels, 3 or 6 taps) leave a rest of; every padded
// workspace element is written. It refuses other filter counts by name.
TEST(Conv2d, DirectFormMatchesReference) {
  const ConvCase cases[] = {
      {2, 7, 5, 1, 8, 5, 1, 2},   // lenet's conv1 in small: one channel, 5x5, pad 2
      {3, 9, 8, 3, 40, 3, 2, 1},  // stride 2, 32 + 8 filters
      {1, 6, 7, 2, 16, 1, 1, 0},  // 1x1, odd row length
      {2, 3, 4, 3, 8, 2, 1, 2},   // pad >= kernel: windows wholly in the padding
      {2, 8, 8, 3, 32, 5, 3, 1},  // stride > 2, some pixels in no window
      {1, 5, 11, 1, 32, 3, 1, 1},  // 11 pixels a row, 9 taps: rests after the wide blocks
  };
  for (const auto& cc : cases) {
    SCOPED_TRACE(describe(cc));
    const ConvBackwardCase t(cc, 97);
    ASSERT_TRUE(k::direct_fits<Space>(t.g, t.f));
    V xp = nans(k::direct_pad_len(t.g)), y = nans(t.rows * t.f);
    k::conv2d_forward_direct<Space>(t.g, t.f, make(t.x), make(t.wt), make(t.b), xp, y);
    for (float v : get(xp)) ASSERT_FALSE(std::isnan(v)) << "the padded input left an element unwritten";
    t.expect_forward(y);

    V part = nans(k::direct_part_len(t.g, t.f)), dw = make(t.dw0), db = make(t.db0);
    k::conv2d_backward_direct<Space>(t.g, t.f, xp, make(t.dy), part, dw, db);
    t.expect_grads(V(), dw, db);
  }
  // where it pays: always at lenet's conv1 (5 taps a kernel row); at
  // cifar10-18pct's (15 taps) only on cores whose adders are not the FMA units
  EXPECT_TRUE(k::direct_pays(k::conv_window(64, 28, 28, 1, 5, 1, 2)));
#if defined(__x86_64__)
  EXPECT_EQ(k::direct_pays(k::conv_window(64, 32, 32, 3, 5, 1, 2)), !__builtin_cpu_is("intel"));
#endif
  const auto g = k::conv_window(1, 5, 5, 1, 3, 1, 1);
  EXPECT_FALSE(k::direct_fits<Space>(g, 12));
  V big = nans(4096);
  try {
    k::conv2d_forward_direct<Space>(g, 12, big, big, big, big, big);
    ADD_FAILURE() << "12 filters accepted";
  } catch (const asgd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("12 filters, not a multiple of 8"), std::string::npos) << e.what();
  }
  EXPECT_THROW(k::conv2d_backward_direct<Space>(g, 8, big, nans(3), big, big, big), asgd::Error);  // dy short
}

TEST(Conv2d, ZeroSizes) {
  const index_t f = 4;
  {  // n = 0
    const auto g = k::conv_window(0, 7, 5, 3, 3, 2, 1);
    const index_t kk = g.kh * g.kw * g.c;
    const Vec dw0 = rand_vec(kk * f, 81, 0.5f, 1.5f), db0 = rand_vec(f, 82, 0.5f, 1.5f);
    V col = nans(3), y = nans(3);
    k::conv2d_forward<Space>(g, f, nans(3), make(rand_vec(kk * f, 83)), nans(f), col, y);
    expect_all_nan(get(col), "col (n=0)");
    expect_all_nan(get(y), "y (n=0)");
    V dcol = nans(3), dx = nans(3), dw = make(dw0), db = make(db0);
    k::conv2d_backward<Space>(g, f, nans(3), make(rand_vec(kk * f, 83)), nans(3), dcol, dx, dw,
                              db, ones(3));
    expect_all_nan(get(dcol), "dcol (n=0)");
    expect_all_nan(get(dx), "dx (n=0)");
    expect_equal(get(dw), dw0, "dw (n=0)");
    expect_equal(get(db), db0, "db (n=0)");
    V col2 = nans(3), dx2 = nans(3);
    k::im2col<Space>(g, nans(3), col2);
    k::col2im<Space>(g, nans(3), dx2);
    expect_all_nan(get(col2), "im2col col (n=0)");
    expect_all_nan(get(dx2), "col2im dx (n=0)");
  }
  {  // f = 0 filters: no outputs; dx is a sum over nothing, so zero
    const auto g = k::conv_window(2, 7, 5, 3, 3, 2, 1);
    const index_t kk = g.kh * g.kw * g.c, rows = g.n * g.oh * g.ow, nx = g.n * g.h * g.w * g.c;
    V y = nans(3);
    k::conv2d_forward<Space>(g, 0, make(rand_vec(nx, 84)), nans(2), nans(2), nans(rows * kk), y);
    expect_all_nan(get(y), "y (f=0)");
    V dx = nans(nx + 2), dw = nans(2), db = nans(2);
    k::conv2d_backward<Space>(g, 0, nans(rows * kk), nans(2), nans(2), nans(rows * kk), dx, dw,
                              db, ones(rows));
    const Vec got = get(dx);
    for (index_t i = 0; i < nx; ++i) EXPECT_EQ(got[i], 0.0f) << "dx[" << i << "] (f=0)";
    EXPECT_TRUE(std::isnan(got[nx]) && std::isnan(got[nx + 1])) << "dx written past the end";
    expect_all_nan(get(dw), "dw (f=0)");
    expect_all_nan(get(db), "db (f=0)");
  }
}

// ===========================================================================
// Pooling
// ===========================================================================
TEST(MaxPool, ForwardMatchesReferenceAndArgmaxIsInWindow) {
  for (const auto& pc : kPoolCases) {
    SCOPED_TRACE(describe(pc));
    const auto g = k::pool_window(pc.n, pc.h, pc.w, pc.c, pc.k, pc.stride);
    const index_t nx = g.n * g.h * g.w * g.c, ny = g.n * g.oh * g.ow * g.c;
    const Vec x = distinct_vec(nx, 91);
    V y = nans(ny);
    IV am = make_i(IVec(static_cast<std::size_t>(ny), kSentinel));
    k::maxpool_forward<Space>(g, make(x), y, am);
    Vec want(ny);
    ref::maxpool_forward<float>(g, x.data(), want.data());
    const Vec got = get(y);
    expect_equal(got, want, "y");  // a maximum is exact
    const IVec at = get_i(am);
    for (index_t n = 0; n < g.n; ++n)
      for (index_t oy = 0; oy < g.oh; ++oy)
        for (index_t ox = 0; ox < g.ow; ++ox)
          for (index_t c = 0; c < g.c; ++c) {
            const index_t o = ((n * g.oh + oy) * g.ow + ox) * g.c + c;
            const index_t iy = at[o] / g.w, ix = at[o] % g.w;
            ASSERT_GE(at[o], 0) << "argmax[" << o << "]";
            EXPECT_TRUE(iy >= oy * g.stride && iy < oy * g.stride + g.kh && iy < g.h &&
                        ix >= ox * g.stride && ix < ox * g.stride + g.kw && ix < g.w)
                << "argmax[" << o << "] = " << at[o] << " outside its window";
            EXPECT_EQ(x[((n * g.h + iy) * g.w + ix) * g.c + c], got[o]) << "argmax[" << o << "]";
          }
  }
}

TEST(MaxPool, ReferenceBackwardMatchesFiniteDifferences) {
  for (const auto& pc : kPoolCases) {
    SCOPED_TRACE(describe(pc));
    const auto g = k::pool_window(pc.n, pc.h, pc.w, pc.c, pc.k, pc.stride);
    const index_t nx = g.n * g.h * g.w * g.c, ny = g.n * g.oh * g.ow * g.c;
    DVec x = dbl(distinct_vec(nx, 101));  // distinct: the argmax is stable under +-h
    const DVec r = dbl(rand_vec(ny, 102));
    auto loss = [&] {
      DVec y(ny);
      ref::maxpool_forward<double>(g, x.data(), y.data());
      return dot(y, r);
    };
    DVec dx(nx, std::nan(""));
    ref::maxpool_backward<double>(g, x.data(), r.data(), dx.data());
    expect_fd(dx, fd_grad(x, loss), "dx");
  }
}

TEST(MaxPool, BackwardMatchesReference) {
  for (const auto& pc : kPoolCases) {
    SCOPED_TRACE(describe(pc));
    const auto g = k::pool_window(pc.n, pc.h, pc.w, pc.c, pc.k, pc.stride);
    const index_t nx = g.n * g.h * g.w * g.c, ny = g.n * g.oh * g.ow * g.c;
    // Distinct values, then all-equal values (ties: both take the first maximum).
    for (const Vec& x : {distinct_vec(nx, 111), Vec(static_cast<std::size_t>(nx), 0.25f)}) {
      const Vec dy = rand_vec(ny, 112);
      V y = nans(ny), dx = nans(nx);
      IV am = make_i(IVec(static_cast<std::size_t>(ny), kSentinel));
      k::maxpool_forward<Space>(g, make(x), y, am);
      k::maxpool_backward<Space>(g, am, make(dy), dx);
      const DVec xd = dbl(x), dyd = dbl(dy);
      DVec dxr(nx, std::nan(""));
      ref::maxpool_backward<double>(g, xd.data(), dyd.data(), dxr.data());
      expect_close(get(dx), dxr, g.kh * g.kw, "dx");
    }
  }
}

TEST(AvgPool, ForwardMatchesReference) {
  for (const auto& pc : kPoolCases) {
    SCOPED_TRACE(describe(pc));
    const auto g = k::pool_window(pc.n, pc.h, pc.w, pc.c, pc.k, pc.stride);
    const index_t nx = g.n * g.h * g.w * g.c, ny = g.n * g.oh * g.ow * g.c;
    const Vec x = rand_vec(nx, 121);
    V y = nans(ny);
    k::avgpool_forward<Space>(g, make(x), y);
    DVec yr(ny);
    const DVec xd = dbl(x);
    ref::avgpool_forward<double>(g, xd.data(), yr.data());
    expect_close(get(y), yr, g.kh * g.kw + 1, "y");
  }
}

TEST(AvgPool, ReferenceBackwardMatchesFiniteDifferences) {
  for (const auto& pc : kPoolCases) {
    SCOPED_TRACE(describe(pc));
    const auto g = k::pool_window(pc.n, pc.h, pc.w, pc.c, pc.k, pc.stride);
    const index_t nx = g.n * g.h * g.w * g.c, ny = g.n * g.oh * g.ow * g.c;
    DVec x = dbl(rand_vec(nx, 131));
    const DVec r = dbl(rand_vec(ny, 132));
    auto loss = [&] {
      DVec y(ny);
      ref::avgpool_forward<double>(g, x.data(), y.data());
      return dot(y, r);
    };
    DVec dx(nx, std::nan(""));
    ref::avgpool_backward<double>(g, r.data(), dx.data());
    expect_fd(dx, fd_grad(x, loss), "dx");
  }
}

TEST(AvgPool, BackwardMatchesReference) {
  for (const auto& pc : kPoolCases) {
    SCOPED_TRACE(describe(pc));
    const auto g = k::pool_window(pc.n, pc.h, pc.w, pc.c, pc.k, pc.stride);
    const index_t nx = g.n * g.h * g.w * g.c, ny = g.n * g.oh * g.ow * g.c;
    const Vec dy = rand_vec(ny, 141);
    V dx = nans(nx);
    k::avgpool_backward<Space>(g, make(dy), dx);
    const DVec dyd = dbl(dy);
    DVec dxr(nx, std::nan(""));
    ref::avgpool_backward<double>(g, dyd.data(), dxr.data());
    expect_close(get(dx), dxr, 2 * g.kh * g.kw, "dx");
  }
}

TEST(Pooling, ZeroSizes) {
  const auto g = k::pool_window(0, 7, 5, 3, 3, 2);
  V y = nans(3), dx = nans(3), y2 = nans(3), dx2 = nans(3);
  IV am = make_i(IVec(3, kSentinel));
  k::maxpool_forward<Space>(g, nans(3), y, am);
  k::maxpool_backward<Space>(g, am, nans(3), dx);
  k::avgpool_forward<Space>(g, nans(3), y2);
  k::avgpool_backward<Space>(g, nans(3), dx2);
  expect_all_nan(get(y), "maxpool y");
  expect_all_nan(get(dx), "maxpool dx");
  expect_all_nan(get(y2), "avgpool y");
  expect_all_nan(get(dx2), "avgpool dx");
  for (auto a : get_i(am)) EXPECT_EQ(a, kSentinel) << "argmax written";
}

// ===========================================================================
// Local response normalisation
// ===========================================================================
TEST(Lrn, ForwardMatchesReference) {
  for (const auto& p : lrn_cases()) {
    SCOPED_TRACE(describe(p));
    const index_t total = p.n * p.h * p.w * p.c;
    const index_t win = p.cross_map ? p.size : p.size * p.size;
    const Vec x = rand_vec(total, 151);
    V denom = nans(total), y = nans(total);
    k::lrn_forward<Space>(p, make(x), denom, y);
    const DVec xd = dbl(x);
    DVec yr(total), dr(total);
    ref::lrn_forward<double>(p, xd.data(), yr.data());
    // denom written out here (not via elem::lrn_window, which the reference uses and the
    // kernel follows): centred window, clipped at the edges.
    const double scale = double(p.alpha) / double(win);
    const index_t half = p.size / 2;
    for (index_t b = 0; b < p.n; ++b)
      for (index_t iy = 0; iy < p.h; ++iy)
        for (index_t ix = 0; ix < p.w; ++ix)
          for (index_t ch = 0; ch < p.c; ++ch) {
            double s = 0;
            for (index_t yy = iy - half; yy <= iy + half; ++yy)
              for (index_t xx = ix - half; xx <= ix + half; ++xx)
                for (index_t cc = ch - half; cc <= ch + half; ++cc) {
                  const bool same_pixel = yy == iy && xx == ix, same_map = cc == ch;
                  if (p.cross_map ? !same_pixel : !same_map) continue;
                  if (yy < 0 || yy >= p.h || xx < 0 || xx >= p.w || cc < 0 || cc >= p.c) continue;
                  const double v = xd[((b * p.h + yy) * p.w + xx) * p.c + cc];
                  s += v * v;
                }
            dr[((b * p.h + iy) * p.w + ix) * p.c + ch] = double(p.k) + scale * s;
          }
    expect_close(get(denom), dr, win + 2, "denom");
    expect_close(get(y), yr, win + 4, "y");
  }
  // The default (small) parameters as well.
  k::LrnParams p;
  p.n = 3;
  p.h = 7;
  p.w = 5;
  p.c = 3;
  const index_t total = p.n * p.h * p.w * p.c;
  const Vec x = rand_vec(total, 152, -3.0f, 3.0f);
  V denom = nans(total), y = nans(total);
  k::lrn_forward<Space>(p, make(x), denom, y);
  const DVec xd = dbl(x);
  DVec yr(total);
  ref::lrn_forward<double>(p, xd.data(), yr.data());
  expect_close(get(y), yr, p.size * p.size + 4, "y (default params)");
}

TEST(Lrn, ReferenceBackwardMatchesFiniteDifferences) {
  for (const auto& p : lrn_cases()) {
    SCOPED_TRACE(describe(p));
    const index_t total = p.n * p.h * p.w * p.c;
    DVec x = dbl(rand_vec(total, 161));
    const DVec r = dbl(rand_vec(total, 162));
    auto loss = [&] {
      DVec y(total);
      ref::lrn_forward<double>(p, x.data(), y.data());
      return dot(y, r);
    };
    DVec dx(total, std::nan(""));
    ref::lrn_backward<double>(p, x.data(), r.data(), dx.data());
    expect_fd(dx, fd_grad(x, loss), "dx");
  }
}

TEST(Lrn, BackwardMatchesReference) {
  for (const auto& p : lrn_cases()) {
    SCOPED_TRACE(describe(p));
    const index_t total = p.n * p.h * p.w * p.c;
    const index_t win = p.cross_map ? p.size : p.size * p.size;
    const Vec x = rand_vec(total, 171), dy = rand_vec(total, 172);
    const V xv = make(x);
    V denom = nans(total), y = nans(total), t = nans(total), dx = nans(total);
    k::lrn_forward<Space>(p, xv, denom, y);
    k::lrn_backward<Space>(p, xv, y, denom, make(dy), t, dx);
    const DVec xd = dbl(x), dyd = dbl(dy);
    DVec dxr(total, std::nan(""));
    ref::lrn_backward<double>(p, xd.data(), dyd.data(), dxr.data());
    expect_close(get(dx), dxr, 2 * win + 8, "dx");
  }
}

TEST(Lrn, BadSizeThrowsAndZeroSize) {
  k::LrnParams p;
  p.n = 1;
  p.h = 3;
  p.w = 3;
  p.c = 4;
  for (index_t size : {0, 4, -3}) {
    p.size = size;
    const std::string s = "size " + std::to_string(size);
    expect_error([&] { k::lrn_forward<Space>(p, nans(36), nans(36), nans(36)); }, {s});
    expect_error(
        [&] {
          k::lrn_backward<Space>(p, nans(36), nans(36), nans(36), nans(36), nans(36), nans(36));
        },
        {s});
  }
  for (bool cross : {false, true}) {
    p.n = 0;
    p.size = 3;
    p.cross_map = cross;
    V denom = nans(3), y = nans(3), t = nans(3), dx = nans(3);
    k::lrn_forward<Space>(p, nans(3), denom, y);
    k::lrn_backward<Space>(p, nans(3), nans(3), nans(3), nans(3), t, dx);
    expect_all_nan(get(denom), "denom (n=0)");
    expect_all_nan(get(y), "y (n=0)");
    expect_all_nan(get(t), "t (n=0)");
    expect_all_nan(get(dx), "dx (n=0)");
  }
}

// ===========================================================================
// ReLU
// ===========================================================================
TEST(Relu, ForwardBackwardMatchReference) {
  const index_t len = 3 * 7 * 5 * 3;
  const Vec x = rand_away_from_zero(len, 181, 0.1f, 1.0f), dy = rand_vec(len, 182);
  V y = nans(len), dx = nans(len);
  k::relu_forward<Space>(len, make(x), y);
  Vec yr(len);
  ref::relu_forward<float>(len, x.data(), yr.data());
  const Vec yk = get(y);
  expect_equal(yk, yr, "y");
  k::relu_backward<Space>(len, y, make(dy), dx);
  Vec dxr(len);
  ref::relu_backward<float>(len, yr.data(), dy.data(), dxr.data());
  expect_equal(get(dx), dxr, "dx");
  // In place (dx == dy).
  V inplace = make(dy);
  k::relu_backward<Space>(len, y, inplace, inplace);
  expect_equal(get(inplace), dxr, "dx (in place)");
  // Both signs occurred.
  EXPECT_GT(std::count(yk.begin(), yk.end(), 0.0f), len / 4);
  EXPECT_LT(std::count(yk.begin(), yk.end(), 0.0f), 3 * len / 4);
}

TEST(Relu, ReferenceBackwardMatchesFiniteDifferences) {
  const index_t len = 200;
  DVec x = dbl(rand_away_from_zero(len, 191, 0.1f, 1.0f));  // away from the kink
  const DVec r = dbl(rand_vec(len, 192));
  auto loss = [&] {
    DVec y(len);
    ref::relu_forward<double>(len, x.data(), y.data());
    return dot(y, r);
  };
  DVec y(len), dx(len, std::nan(""));
  ref::relu_forward<double>(len, x.data(), y.data());
  ref::relu_backward<double>(len, y.data(), r.data(), dx.data());
  expect_fd(dx, fd_grad(x, loss), "dx");
}

TEST(Relu, ZeroSize) {
  V y = nans(3), dx = nans(3);
  k::relu_forward<Space>(0, nans(3), y);
  k::relu_backward<Space>(0, nans(3), nans(3), dx);
  expect_all_nan(get(y), "y");
  expect_all_nan(get(dx), "dx");
}

// ===========================================================================
// Dropout
// ===========================================================================
TEST(Dropout, DeterministicRateScaleAndReference) {
  const index_t len = 100000;
  const Vec x = rand_away_from_zero(len, 201, 0.1f, 1.0f);
  const V xv = make(x);
  for (float p : {0.5f, 0.3f, 0.8f}) {
    SCOPED_TRACE("p = " + std::to_string(p));
    V s1 = nans(len), y1 = nans(len), s2 = nans(len), y2 = nans(len), s3 = nans(len),
      y3 = nans(len);
    k::dropout_forward<Space>(len, p, 1234, xv, s1, y1);
    k::dropout_forward<Space>(len, p, 1234, xv, s2, y2);
    k::dropout_forward<Space>(len, p, 4321, xv, s3, y3);
    const Vec a = get(y1), sa = get(s1);
    expect_equal(get(y2), a, "y (same seed)");
    expect_equal(get(s2), sa, "scale (same seed)");
    const Vec c = get(y3);
    index_t differ = 0;
    for (index_t i = 0; i < len; ++i) differ += (a[i] == 0.0f) != (c[i] == 0.0f);
    EXPECT_GT(differ, len / 10) << "another seed gives another mask";

    const float keep = 1.0f / (1.0f - p);
    index_t zeros = 0;
    for (index_t i = 0; i < len; ++i) {
      if (sa[i] == 0.0f) {
        ++zeros;
        EXPECT_EQ(a[i], 0.0f) << i;
      } else {
        ASSERT_EQ(sa[i], keep) << "scale[" << i << "]";
        ASSERT_EQ(a[i], x[i] * keep) << "y[" << i << "]";
      }
    }
    // Binomial: sd = sqrt(p(1-p)/len) <= 0.0016; 0.01 is > 6 sd.
    EXPECT_NEAR(static_cast<double>(zeros) / len, p, 0.01);

    const DVec xd = dbl(x);
    DVec yr(len);
    ref::dropout_forward<double>(len, static_cast<double>(p), 1234, xd.data(), yr.data());
    expect_close(a, yr, 2, "y vs reference");

    // Backward uses the same mask and scale.
    const Vec dy = rand_away_from_zero(len, 202, 0.1f, 1.0f);
    V dx = nans(len);
    k::dropout_backward<Space>(len, s1, make(dy), dx);
    const Vec dxk = get(dx);
    for (index_t i = 0; i < len; ++i) {
      ASSERT_EQ(dxk[i] == 0.0f, a[i] == 0.0f) << "mask differs at " << i;
      ASSERT_EQ(dxk[i], dy[i] * sa[i]) << "dx[" << i << "]";
    }
  }
}

TEST(Dropout, RateZeroKeepsEverything) {
  const index_t len = 1000;
  const Vec x = rand_vec(len, 211);
  V s = nans(len), y = nans(len);
  k::dropout_forward<Space>(len, 0.0f, 7, make(x), s, y);
  expect_equal(get(y), x, "y");
  expect_equal(get(s), Vec(len, 1.0f), "scale");
}

TEST(Dropout, BadRateThrowsAndZeroSize) {
  for (float p : {-0.1f, 1.0f, 1.5f, std::numeric_limits<float>::quiet_NaN()}) {
    V s = nans(10), y = nans(10);
    expect_error([&] { k::dropout_forward<Space>(10, p, 1, nans(10), s, y); }, {"dropout"});
    expect_all_nan(get(y), "y after a bad rate");
  }
  V s = nans(3), y = nans(3), dx = nans(3);
  k::dropout_forward<Space>(0, 0.5f, 1, nans(3), s, y);
  k::dropout_backward<Space>(0, nans(3), nans(3), dx);
  expect_all_nan(get(s), "scale (len 0)");
  expect_all_nan(get(y), "y (len 0)");
  expect_all_nan(get(dx), "dx (len 0)");
}

// ===========================================================================
// Softmax cross-entropy
// ===========================================================================
TEST(SoftmaxXent, MatchesReference) {
  const index_t n = 5, m = 7;
  const Vec z = rand_vec(n * m, 221, -3.0f, 3.0f);
  const IVec labels = rand_labels(n, m, 222);
  V dz = nans(n * m);
  const auto sum = k::softmax_xent<Space>(n, m, make(z), make_i(labels), 1.0f / n, dz);
  const DVec zd = dbl(z);
  DVec dzr(n * m, std::nan(""));
  index_t wrong = -1;
  const double mean = ref::softmax_xent<double>(n, m, zd.data(), labels.data(), dzr.data(), &wrong);
  // The kernel sums in double; only z - zmax is formed in float.
  EXPECT_NEAR(sum.loss, mean * n, kEpsF * m * n * std::max(1.0, std::abs(mean * n)) * kFactor);
  EXPECT_EQ(sum.wrong, wrong);
  expect_close(get(dz), dzr, m, "dz");

  // Without a gradient view.
  const auto sum2 = k::softmax_xent<Space>(n, m, make(z), make_i(labels), 1.0f / n, V());
  EXPECT_EQ(sum2.loss, sum.loss);
  EXPECT_EQ(sum2.wrong, sum.wrong);
}

TEST(SoftmaxXent, ReferenceGradientMatchesFiniteDifferences) {
  const index_t n = 5, m = 7;
  DVec z = dbl(rand_vec(n * m, 231, -3.0f, 3.0f));
  const IVec labels = rand_labels(n, m, 232);
  index_t wrong = 0;
  auto loss = [&] {  // mean loss
    return ref::softmax_xent<double>(n, m, z.data(), labels.data(), nullptr, &wrong);
  };
  DVec dz(n * m, std::nan(""));
  ref::softmax_xent<double>(n, m, z.data(), labels.data(), dz.data(), &wrong);
  expect_fd(dz, fd_grad(z, loss), "dz");
}

TEST(SoftmaxXent, LargeLogitsAreStable) {
  const index_t m = 3;
  const Vec z = {1e4f, 0.0f, -1e4f,   // label 0: loss 0
                 1e4f, 0.0f, -1e4f,   // label 1: loss 1e4
                 1e4f, 0.0f, -1e4f,   // label 2: loss 2e4
                 1e4f, 1e4f, 1e4f};   // all equal: loss log 3
  const IVec labels = {0, 1, 2, 1};
  const index_t n = 4;
  V dz = nans(n * m);
  const auto sum = k::softmax_xent<Space>(n, m, make(z), make_i(labels), 1.0f, dz);
  ASSERT_TRUE(std::isfinite(sum.loss));
  EXPECT_NEAR(sum.loss, 0.0 + 1e4 + 2e4 + std::log(3.0), 1e-6 * 3e4);
  const Vec g = get(dz);
  for (index_t r = 0; r < n; ++r) {
    double rowsum = 0;
    for (index_t j = 0; j < m; ++j) {
      ASSERT_TRUE(std::isfinite(g[r * m + j])) << "dz[" << r * m + j << "]";
      rowsum += g[r * m + j];
    }
    EXPECT_NEAR(rowsum, 0.0, 1e-6) << "row " << r;
  }
  EXPECT_NEAR(g[0], 0.0f, 1e-6f);
  EXPECT_NEAR(g[3 + 1], -1.0f, 1e-6f);
  EXPECT_NEAR(g[3 + 0], 1.0f, 1e-6f);
  EXPECT_NEAR(g[9 + 1], 1.0f / 3 - 1, 1e-6f);
  EXPECT_EQ(sum.wrong, 3);  // rows 1, 2 and the tie row (argmax = first = 0)
}

TEST(SoftmaxXent, WrongCountUsesArgmax) {
  const index_t n = 6, m = 4;
  // Row r has its maximum at column r % m; ties resolve to the first maximum.
  Vec z(n * m, 0.0f);
  for (index_t r = 0; r < n; ++r) z[r * m + r % m] = 2.0f;
  z[5 * m + 3] = 2.0f;                         // row 5: tie between 1 and 3 -> argmax 1
  const IVec labels = {0, 2, 2, 3, 0, 3};      // wrong: rows 1 and 5
  const auto sum = k::softmax_xent<Space>(n, m, make(z), make_i(labels), 1.0f, V());
  EXPECT_EQ(sum.wrong, 2);
  index_t wrong = -1;
  const DVec zd = dbl(z);
  ref::softmax_xent<double>(n, m, zd.data(), labels.data(), nullptr, &wrong);
  EXPECT_EQ(wrong, 2);
}

TEST(SoftmaxXent, ZeroRowsAndZeroClasses) {
  V dz = nans(3);
  const auto sum = k::softmax_xent<Space>(0, 7, nans(3), make_i(IVec(3, 0)), 1.0f, dz);
  EXPECT_EQ(sum.loss, 0.0);
  EXPECT_EQ(sum.wrong, 0);
  expect_all_nan(get(dz), "dz (n=0)");
  index_t wrong = -1;
  EXPECT_EQ(ref::softmax_xent<double>(0, 7, nullptr, nullptr, nullptr, &wrong), 0.0);
  EXPECT_EQ(wrong, 0);
  expect_error([] { k::softmax_xent<Space>(2, 0, nans(1), make_i(IVec(2, 0)), 1.0f, V()); },
               {"zero classes"});
}

// ===========================================================================
// SGD
// ===========================================================================
TEST(Sgd, MatchesCudaConvnetUpdateExactly) {
  const index_t len = 1001;
  const float lr = 0.01f, momentum = 0.9f, wd = 0.004f;
  Vec w = rand_vec(len, 241), inc = rand_vec(len, 242, -0.1f, 0.1f);
  const V wv = make(w), incv = make(inc);
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const Vec g = rand_vec(len, 243 + step);
    k::sgd_update<Space>(len, lr, momentum, wd, make(g), incv, wv);
    ref::sgd_update<float>(len, lr, momentum, wd, g.data(), inc.data(), w.data());
    // Same float expression on both sides: bit-identical.
    expect_equal(get(incv), inc, "inc");
    expect_equal(get(wv), w, "w");
  }
  // Spelled out once more for one element.
  const float w0 = 0.5f, i0 = 0.25f, g0 = -0.75f;
  V w1 = make({w0}), i1 = make({i0});
  k::sgd_update<Space>(1, lr, momentum, wd, make({g0}), i1, w1);
  const float v = momentum * i0 - lr * (g0 + wd * w0);
  EXPECT_EQ(get(i1)[0], v);
  EXPECT_EQ(get(w1)[0], w0 + v);

  V wz = nans(3), iz = nans(3);
  k::sgd_update<Space>(0, lr, momentum, wd, nans(3), iz, wz);
  expect_all_nan(get(wz), "w (len 0)");
  expect_all_nan(get(iz), "inc (len 0)");
}

// The last of several gradients summed in the update's pass: the same bits as
// adding it to the sum first (f*g2 rounded, then added) and updating.
TEST(Sgd, SumOfTheLastGradientInTheUpdatesPassMatchesTwoPasses) {
  const index_t len = 777;
  const float lr = 0.02f, momentum = 0.9f, wd = 0.0005f, f = 0.7f, scale = 0.5f;
  const Vec acc = rand_vec(len, 251), g2 = rand_vec(len, 252), w = rand_vec(len, 253),
            inc = rand_vec(len, 254, -0.1f, 0.1f);
  Vec sum(acc.size());
  for (std::size_t i = 0; i < acc.size(); ++i) {
    const float fg = f * g2[i];
    sum[i] = acc[i] + fg;
  }
  const V w1 = make(w), i1 = make(inc), w2 = make(w), i2 = make(inc);
  k::sgd_update<Space>(len, lr, momentum, wd, make(sum), i1, w1, scale);
  k::sgd_update_sum<Space>(len, lr, momentum, wd, make(acc), f, make(g2), i2, w2, scale);
  expect_equal(get(i2), get(i1), "inc");
  expect_equal(get(w2), get(w1), "w");
  expect_error([] { k::sgd_update_sum<Space>(10, 0.1f, 0.9f, 0.0f, nans(10), 1.0f, nans(8), nans(10), nans(10)); },
               {"sgd_update_sum", "g2 has 8", "needs 10"});
}

// ===========================================================================
// Entry points reject views that are too short, naming the extents
// ===========================================================================
TEST(EntryPoints, ShortViewsThrowWithExtents) {
  {
    const index_t n = 3, kk = 7, m = 5;
    expect_error([&] { k::dense_forward<Space>(n, kk, m, nans(20), nans(35), nans(5), nans(15)); },
                 {"dense_forward", "x has 20", "needs 21"});
    expect_error([&] { k::dense_forward<Space>(n, kk, m, nans(21), nans(35), nans(5), nans(14)); },
                 {"dense_forward", "y has 14", "needs 15"});
    expect_error([&] { k::dense_forward<Space>(n, kk, m, nans(21), nans(34), nans(5), nans(15)); },
                 {"w has 34", "needs 35"});
    expect_error([&] { k::dense_forward<Space>(n, kk, m, nans(21), nans(35), nans(4), nans(15)); },
                 {"b has 4", "needs 5"});
    expect_error(
        [&] {
          k::dense_backward<Space>(n, kk, m, nans(21), nans(35), nans(15), nans(20), nans(35),
                                   nans(5), ones(3));
        },
        {"dense_backward", "dx has 20", "needs 21"});
    expect_error(
        [&] {
          k::dense_backward<Space>(n, kk, m, nans(21), nans(35), nans(15), nans(21), nans(34),
                                   nans(5), ones(3));
        },
        {"dense_backward", "dw has 34", "needs 35"});
    expect_error(
        [&] {
          k::dense_backward<Space>(n, kk, m, nans(21), nans(35), nans(15), V(), nans(35), nans(5),
                                   ones(2));
        },
        {"dense_backward", "ones has 2", "needs 3"});
  }
  {
    const auto g = k::conv_window(2, 7, 5, 3, 3, 2, 1);  // oh 4, ow 3, K 27, rows 24
    const index_t f = 4, nx = 2 * 7 * 5 * 3;
    expect_error([&] { k::im2col<Space>(g, nans(nx), nans(24 * 27 - 1)); },
                 {"im2col", "col has 647", "needs 648"});
    expect_error([&] { k::col2im<Space>(g, nans(24 * 27), nans(nx - 1)); },
                 {"col2im", "dx has 209", "needs 210"});
    expect_error(
        [&] { k::conv2d_forward<Space>(g, f, nans(nx - 1), nans(108), nans(4), nans(648), nans(96)); },
        {"x has 209", "needs 210"});
    expect_error(
        [&] { k::conv2d_forward<Space>(g, f, nans(nx), nans(107), nans(4), nans(648), nans(96)); },
        {"conv2d_forward", "wt has 107", "needs 108"});
    expect_error(
        [&] { k::conv2d_forward<Space>(g, f, nans(nx), nans(108), nans(4), nans(648), nans(95)); },
        {"conv2d_forward", "y has 95", "needs 96"});
    expect_error(
        [&] {
          k::conv2d_backward<Space>(g, f, nans(648), nans(108), nans(96), nans(647), nans(nx),
                                    nans(108), nans(4), ones(24));
        },
        {"conv2d_backward", "dcol has 647", "needs 648"});
    expect_error(
        [&] {
          k::conv2d_backward<Space>(g, f, nans(648), nans(108), nans(96), nans(648), nans(nx),
                                    nans(108), nans(3), ones(24));
        },
        {"conv2d_backward", "db has 3", "needs 4"});
    expect_error(
        [&] {
          k::conv2d_backward<Space>(g, f, nans(648), nans(108), nans(96), nans(648), nans(nx - 1),
                                    nans(108), nans(4), ones(24));
        },
        {"dx has 209", "needs 210"});
    expect_error(  // no filters: dx is still zeroed, so still checked
        [&] {
          k::conv2d_backward<Space>(g, 0, nans(648), nans(0), nans(0), nans(648), nans(nx - 1),
                                    nans(0), nans(0), ones(24));
        },
        {"conv2d_backward", "dx has 209", "needs 210"});
  }
  {
    const auto g = k::pool_window(2, 8, 6, 3, 3, 2);  // oh 4, ow 3: 72 outputs, 288 inputs
    expect_error([&] { k::maxpool_forward<Space>(g, nans(288), nans(72), make_i(IVec(71))); },
                 {"maxpool_forward", "argmax has 71", "needs 72"});
    expect_error([&] { k::maxpool_forward<Space>(g, nans(287), nans(72), make_i(IVec(72))); },
                 {"maxpool_forward", "x has 287", "needs 288"});
    expect_error([&] { k::maxpool_backward<Space>(g, make_i(IVec(72)), nans(72), nans(287)); },
                 {"maxpool_backward", "dx has 287", "needs 288"});
    expect_error([&] { k::avgpool_forward<Space>(g, nans(288), nans(71)); },
                 {"avgpool_forward", "y has 71", "needs 72"});
    expect_error([&] { k::avgpool_backward<Space>(g, nans(71), nans(288)); },
                 {"avgpool_backward", "dy has 71", "needs 72"});
  }
  {
    k::LrnParams p;
    p.n = 2;
    p.h = 3;
    p.w = 5;
    p.c = 4;  // 120 elements
    expect_error([&] { k::lrn_forward<Space>(p, nans(120), nans(119), nans(120)); },
                 {"lrn_forward", "denom has 119", "needs 120"});
    expect_error(
        [&] {
          k::lrn_backward<Space>(p, nans(120), nans(120), nans(120), nans(120), nans(119),
                                 nans(120));
        },
        {"lrn_backward", "t has 119", "needs 120"});
    expect_error(
        [&] {
          k::lrn_backward<Space>(p, nans(120), nans(120), nans(120), nans(120), nans(120),
                                 nans(119));
        },
        {"lrn_backward", "dx has 119", "needs 120"});
  }
  expect_error([] { k::relu_forward<Space>(10, nans(10), nans(9)); },
               {"relu_forward", "y has 9", "needs 10"});
  expect_error([] { k::relu_backward<Space>(10, nans(10), nans(9), nans(10)); },
               {"relu_backward", "dy has 9", "needs 10"});
  expect_error([] { k::dropout_forward<Space>(10, 0.5f, 1, nans(10), nans(9), nans(10)); },
               {"dropout_forward", "scale has 9", "needs 10"});
  expect_error([] { k::dropout_backward<Space>(10, nans(10), nans(10), nans(9)); },
               {"dropout_backward", "dx has 9", "needs 10"});
  expect_error([] { k::softmax_xent<Space>(3, 4, nans(12), make_i(IVec(2)), 1.0f, V()); },
               {"softmax_xent", "labels has 2", "needs 3"});
  expect_error([] { k::softmax_xent<Space>(3, 4, nans(12), make_i(IVec(3)), 1.0f, nans(11)); },
               {"softmax_xent", "dlogits has 11", "needs 12"});
  expect_error([] { k::softmax_xent<Space>(3, 4, nans(11), make_i(IVec(3)), 1.0f, V()); },
               {"softmax_xent", "logits has 11", "needs 12"});
  expect_error([] { k::sgd_update<Space>(10, 0.1f, 0.9f, 0.0f, nans(10), nans(9), nans(10)); },
               {"sgd_update", "inc has 9", "needs 10"});
}

}  // namespace
