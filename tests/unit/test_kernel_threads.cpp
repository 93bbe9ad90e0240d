// The kernels on a parallel host backend (Kokkos' OpenMP) against
// Kokkos::Serial (in the same binary), for every family, forward and backward,
// at the layer shapes of lenet and cifar10-18pct (small batches) and at odd
// shapes, and against themselves at another thread count:
//  * Pointwise and window kernels (pooling, LRN, ReLU, dropout), the
//    per-sample row-folded convolution forward and the direct convolution
//    (forward, and its gradients summed over samples in sample order) give
//    Serial's bits exactly: no kernel splits a sum over threads (col2im and pooling backward gather over
//    outputs, the loss sums per-row values in row order).
//  * Outputs that pass through a GEMM are within 1e-4 of Serial (relative to
//    max(1, |value|); sums of up to 6272 products here): on
//    OpenMP a GEMM is cut into a fixed number of blocks of rows, columns or
//    the inner dimension (kernels/common.hpp: detail::host_gemm), one BLAS
//    call each, and OpenBLAS's result for an element depends on the shape of
//    the call it is in and on the split sum (measured: at most 2.9e-5, in
//    weight gradients summed over 6272 products). Each cut of detail::gemm
//    is also tested alone, and whole models (lenet, cifar10-18pct: 3 SGD steps)
//    join the digest.
//  * Every output is bit-identical for any thread count: with
//    ASGD_THREADS_DIGEST=FILE the first run writes a digest of every output
//    there and later runs (other OMP_NUM_THREADS) must match it; tools/test.sh
//    runs this binary with 1 thread, then 2.
// On a Serial-only Kokkos (Debian's) the default space is Serial: skipped.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/kernels.hpp"
#include "nn/model.hpp"

namespace {

using asgd::index_t;
using asgd::real_t;
namespace k = asgd::kernels;
using Vec = std::vector<float>;
using Out = std::map<std::string, Vec>;

// One BLAS thread, as asgd sets on an OpenMP build (common/blas_env.cpp): the
// kernels split GEMMs over Kokkos' threads themselves.
const bool kOneBlasThread = [] {
  using Set = void (*)(int);
  if (auto set = reinterpret_cast<Set>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(1);
  return true;
}();

Vec rand_vec(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  Vec v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

template <class S>
struct On {
  using V = k::View1<S>;
  using IV = k::IView1<S>;
  static V make(const Vec& h) {
    V v("v", h.size());
    auto m = Kokkos::create_mirror_view(v);
    for (std::size_t i = 0; i < h.size(); ++i) m(i) = h[i];
    Kokkos::deep_copy(v, m);
    return v;
  }
  static V fill(std::size_t n, float x) { return make(Vec(n, x)); }
  static Vec get(const V& v) {
    auto m = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
    return Vec(m.data(), m.data() + m.extent(0));
  }
  static Vec get_i(const IV& v) {
    auto m = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
    Vec out(m.extent(0));
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(m(i));
    return out;
  }

  // Convolution (both forms where stride 1), then max and average pooling of
  // its output, LRN, ReLU, dropout, a dense layer, the loss and the update.
  static Out run(const k::Window& g, index_t f, unsigned seed) {
    Out o;
    const index_t kk = g.kh * g.kw * g.c, rows = g.n * g.oh * g.ow, nx = g.n * g.h * g.w * g.c;
    const Vec x = rand_vec(nx, seed), wt = rand_vec(kk * f, seed + 1), b = rand_vec(f, seed + 2),
              dy = rand_vec(rows * f, seed + 3);
    {
      V col = fill(rows * kk, 0), y = fill(rows * f, 0);
      k::conv2d_forward<S>(g, f, make(x), make(wt), make(b), col, y);
      o["conv.y"] = get(y);
      V dcol = fill(rows * kk, 0), dx = fill(nx, 0), dw = fill(kk * f, 0.5f), db = fill(f, 0.25f);
      k::conv2d_backward<S>(g, f, col, make(wt), make(dy), dcol, dx, dw, db, fill(rows, 1));
      o["conv.dx"] = get(dx);
      o["conv.dw"] = get(dw);
      o["conv.db"] = get(db);
    }
    if (g.stride == 1) {
      V ws = fill(k::im2row_len(g), 0), y = fill(rows * f, 0);
      k::conv2d_forward_rows<S>(g, f, make(x), make(wt), make(b), ws, y);
      o["rows.y"] = get(y);
      V dcol = fill(rows * kk, 0), dx = fill(nx, 0), dw = fill(kk * f, 0.5f), db = fill(f, 0.25f);
      k::conv2d_backward_rows<S>(g, f, ws, make(wt), make(dy), dcol, dx, dw, db, fill(rows, 1));
      o["rows.dx"] = get(dx);
      o["rows.dw"] = get(dw);
      o["rows.db"] = get(db);
    }
    if (f % 8 == 0) {  // the direct form (filters in 8s), at every shape that has them
      V xp = fill(k::direct_pad_len(g), 0), y = fill(rows * f, 0);
      k::conv2d_forward_direct<S>(g, f, make(x), make(wt), make(b), xp, y);
      o["direct.y"] = get(y);
      V part = fill(k::direct_part_len(g, f), 0), dw = fill(kk * f, 0.5f), db = fill(f, 0.25f);
      k::conv2d_backward_direct<S>(g, f, xp, make(dy), part, dw, db);
      o["direct.dw"] = get(dw);
      o["direct.db"] = get(db);
    }
    // pooling, 3x3 stride 2 (overlapping, clipped windows) on the conv output shape
    const auto p = k::pool_window(g.n, g.oh, g.ow, f, 3, 2);
    const index_t np = p.n * p.h * p.w * p.c, npy = p.n * p.oh * p.ow * p.c;
    const Vec px = rand_vec(np, seed + 4), pdy = rand_vec(npy, seed + 5),
              xdy = rand_vec(np, seed + 10);
    {
      V y = fill(npy, 0), dx = fill(np, 0);
      IV am("argmax", npy);
      k::maxpool_forward<S>(p, make(px), y, am);
      k::maxpool_backward<S>(p, am, make(pdy), dx);
      o["maxpool.y"] = get(y);
      o["maxpool.argmax"] = get_i(am);
      o["maxpool.dx"] = get(dx);
      V ay = fill(npy, 0), adx = fill(np, 0);
      k::avgpool_forward<S>(p, make(px), ay);
      k::avgpool_backward<S>(p, make(pdy), adx);
      o["avgpool.y"] = get(ay);
      o["avgpool.dx"] = get(adx);
    }
    for (bool cross : {false, true}) {
      k::LrnParams lp;
      lp.n = p.n, lp.h = p.h, lp.w = p.w, lp.c = p.c, lp.size = 3, lp.cross_map = cross;
      V denom = fill(np, 0), y = fill(np, 0), t = fill(np, 0), dx = fill(np, 0);
      k::lrn_forward<S>(lp, make(px), denom, y);
      k::lrn_backward<S>(lp, make(px), y, denom, make(xdy), t, dx);
      const std::string tag = cross ? "lrn.cross." : "lrn.same.";
      o[tag + "y"] = get(y);
      o[tag + "dx"] = get(dx);
    }
    {
      V y = fill(np, 0), dx = fill(np, 0), sc = fill(np, 0), dy2 = fill(np, 0);
      k::relu_forward<S>(np, make(px), y);
      k::relu_backward<S>(np, y, make(xdy), dx);
      k::dropout_forward<S>(np, real_t(0.5), seed, make(px), sc, dy2);
      o["relu.y"] = get(y);
      o["relu.dx"] = get(dx);
      o["dropout.y"] = get(dy2);
    }
    // dense: the pooled map -> 10 and -> 37 outputs
    for (index_t m : {index_t(10), index_t(37)}) {
      const index_t kin = p.h * p.w * p.c;
      const Vec w = rand_vec(kin * m, seed + 6), db0(m, 0.125f), ddy = rand_vec(p.n * m, seed + 7);
      V y = fill(p.n * m, 0), dx = fill(p.n * kin, 0), dw = fill(kin * m, 0.5f), db = make(db0);
      k::dense_forward<S>(p.n, kin, m, make(px), make(w), make(rand_vec(m, seed + 9)), y);
      k::dense_backward<S>(p.n, kin, m, make(px), make(w), make(ddy), dx, dw, db, fill(p.n, 1));
      const std::string tag = "dense" + std::to_string(m) + ".";
      o[tag + "y"] = get(y);
      o[tag + "dx"] = get(dx);
      o[tag + "dw"] = get(dw);
      o[tag + "db"] = get(db);
      // the loss over these logits
      std::vector<std::int32_t> lab(p.n);
      for (index_t r = 0; r < p.n; ++r) lab[r] = static_cast<std::int32_t>((r * 7 + seed) % m);
      IV labels("labels", p.n);
      auto hl = Kokkos::create_mirror_view(labels);
      for (index_t r = 0; r < p.n; ++r) hl(r) = lab[r];
      Kokkos::deep_copy(labels, hl);
      V dl = fill(p.n * m, 0);
      const k::LossSum ls = k::softmax_xent<S>(p.n, m, y, labels, real_t(1) / p.n, dl);
      o[tag + "xent.dlogits"] = get(dl);
      o[tag + "xent.loss"] = Vec{static_cast<float>(ls.loss)};
      o[tag + "xent.wrong"] = Vec{static_cast<float>(ls.wrong)};
      // the update rule on the dense weights
      V inc = make(rand_vec(kin * m, seed + 8)), wv = make(w);
      k::sgd_update<S>(kin * m, real_t(0.01), real_t(0.9), real_t(5e-4), dw, inc, wv, real_t(0.5));
      o[tag + "update.w"] = get(wv);
      o[tag + "update.inc"] = get(inc);
    }
    return o;
  }

  // detail::gemm on each path of a parallel host's cut (kernels/common.hpp:
  // host_gemm): one call below 1 MFLOP, the inner dimension split (a long k,
  // a small C), C's rows cut (m >= n), C's columns cut (n > m); each with the
  // four transpose combinations, alpha 1.5 and beta 0.5 on a random C.
  static Out gemms() {
    struct Case {
      const char* name;
      index_t m, n, k;
    };
    Out o;
    unsigned seed = 500;
    for (const Case& c : {Case{"one", 5, 6, 7}, Case{"ksplit", 13, 11, 5000},
                          Case{"rows", 300, 40, 50}, Case{"cols", 30, 301, 70}}) {
      for (const char* op : {"NN", "NT", "TN", "TT"}) {
        const char ta[2] = {op[0], 0}, tb[2] = {op[1], 0};
        const bool at = op[0] == 'T', bt = op[1] == 'T';
        V a = make(rand_vec(c.m * c.k, seed++)), b = make(rand_vec(c.k * c.n, seed++)),
          cc = make(rand_vec(c.m * c.n, seed++));
        k::detail::gemm<S>(ta, tb, real_t(1.5), k::View2<S>(a.data(), at ? c.k : c.m, at ? c.m : c.k),
                           k::View2<S>(b.data(), bt ? c.n : c.k, bt ? c.k : c.n), real_t(0.5),
                           k::View2<S>(cc.data(), c.m, c.n));
        o[std::string("gemm.") + c.name + "." + op] = get(cc);
      }
    }
    return o;
  }
};


// Whole models on the default space: lenet and cifar10-18pct (every layer kind
// but dropout), 3 SGD steps with momentum at batch 24 on hashed inputs (the
// chunked convolutions run several chunks, the convolutions' transposed input
// gradient and the GEMM cuts all take part); the losses and the final
// parameters, for the digest.
Out model_steps() {
  Out o;
  for (const std::string name : {"lenet", "cifar10-18pct"}) {
    const asgd::nn::Shape in = name == "lenet" ? asgd::nn::Shape{28, 28, 1} : asgd::nn::Shape{32, 32, 3};
    const index_t batch = 24;
    asgd::nn::Model m = asgd::nn::make_model(name, in, 10);
    m.finalize(batch);
    m.init(5);
    using Space = Kokkos::DefaultExecutionSpace;
    k::View1<Space> x("x", batch * in.size()), inc("inc", m.n_params());
    k::IView1<Space> labels("labels", batch);
    Kokkos::parallel_for(
        "test::fill", Kokkos::RangePolicy<Space>(0, x.extent(0)), KOKKOS_LAMBDA(index_t i) {
          x(i) = k::hash_uniform(9, static_cast<std::uint64_t>(i));
          if (i < batch) labels(i) = static_cast<std::int32_t>(i % 10);
        });
    Vec losses;
    for (int step = 0; step < 3; ++step) {
      m.zero_grads();
      const auto sum = m.forward_backward(batch, x, labels, {true, 3}, true);
      losses.push_back(static_cast<float>(sum.loss));
      k::sgd_update<Space>(m.n_params(), real_t(0.01), real_t(0.9), real_t(5e-4), m.grads(), inc,
                           m.params());
    }
    o["model." + name + ".loss"] = losses;
    o["model." + name + ".params"] = On<Space>::get(m.params());
  }
  return o;
}

bool exact_family(const std::string& name) {
  for (const char* p : {"maxpool.", "avgpool.", "lrn.", "relu.", "dropout.", "rows.y", "direct."})
    if (name.rfind(p, 0) == 0) return true;
  return false;
}

// exact: bits must match; otherwise |got - want| <= tol * max(1, |want|).
void expect_same(const Out& want_all, const Out& got_all, bool exact_only, double tol) {
  ASSERT_EQ(want_all.size(), got_all.size());
  for (const auto& [name, want] : want_all) {
    const Vec& got = got_all.at(name);
    ASSERT_EQ(got.size(), want.size()) << name;
    const bool exact = exact_only || exact_family(name) || name.find(".xent.wrong") != std::string::npos;
    std::size_t diff = 0, first = 0;
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (std::memcmp(&got[i], &want[i], sizeof(float)) == 0) continue;
      const double rel = std::abs(double(got[i]) - double(want[i])) / std::max(1.0, std::abs(double(want[i])));
      worst = std::max(worst, rel);
      if ((exact || !(rel <= tol)) && diff++ == 0) first = i;
    }
    EXPECT_EQ(diff, 0u) << name << (exact ? " (exact)" : " (tolerance)") << ": " << diff << " of "
                        << got.size() << " elements differ; first at " << first << ": "
                        << (diff ? got[first] : 0.f) << " vs " << (diff ? want[first] : 0.f)
                        << "; worst relative " << worst;
  }
}

// FNV-1a 64 of each output's bytes, one line per output.
std::string digest(const Out& o) {
  std::ostringstream s;
  for (const auto& [name, v] : o) {
    std::uint64_t h = 1469598103934665603ull;
    const auto* p = reinterpret_cast<const unsigned char*>(v.data());
    for (std::size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
    s << name << ' ' << v.size() << ' ' << std::hex << h << std::dec << '\n';
  }
  return s.str();
}

using Par = Kokkos::DefaultExecutionSpace;

struct Shape {
  const char* what;
  k::Window g;
  index_t f;
};

const std::vector<Shape>& shapes() {
  static const std::vector<Shape> s = {
      {"lenet conv1 (28x28x1 -> 32, 5x5 pad 2), batch 8", k::conv_window(8, 28, 28, 1, 5, 1, 2), 32},
      {"lenet conv4 (14x14x32 -> 64, 5x5 pad 2), batch 8", k::conv_window(8, 14, 14, 32, 5, 1, 2), 64},
      {"cifar10-18pct conv5 (16x16x32 -> 32), batch 5", k::conv_window(5, 16, 16, 32, 5, 1, 2), 32},
      {"odd: 9x7x3 -> 5, 3x3 stride 2 pad 1, batch 3", k::conv_window(3, 9, 7, 3, 3, 2, 1), 5},
      {"odd: 11x13x2 -> 7, 4x4 pad 0, batch 7", k::conv_window(7, 11, 13, 2, 4, 1, 0), 7},
  };
  return s;
}

TEST(KernelThreads, EveryKernelMatchesSerial) {
  if (std::is_same_v<Par, Kokkos::Serial>)
    GTEST_SKIP() << "Kokkos' default space is Serial (no parallel host backend in this build)";
  std::printf("default space %s, %d threads\n", Par::name(), Par().concurrency());
  unsigned seed = 11;
  std::string all;
  for (const Shape& s : shapes()) {
    SCOPED_TRACE(s.what);
    const Out serial = On<Kokkos::Serial>::run(s.g, s.f, seed);
    const Out par = On<Par>::run(s.g, s.f, seed);
    expect_same(serial, par, false, 1e-4);
    all += std::string("# ") + s.what + "\n" + digest(par);
    seed += 100;
  }
  {
    SCOPED_TRACE("detail::gemm, every cut");
    const Out par = On<Par>::gemms();
    expect_same(On<Kokkos::Serial>::gemms(), par, false, 1e-4);
    all += "# detail::gemm\n" + digest(par);
  }
  {
    SCOPED_TRACE("whole models");
    const Out models = model_steps();
    for (const auto& [name, v] : models)
      for (float f : v) ASSERT_TRUE(std::isfinite(f)) << name;
    all += "# models, 3 steps\n" + digest(models);
  }
  // the same bits at any thread count (ASGD_THREADS_DIGEST: tools/test.sh)
  if (const char* path = std::getenv("ASGD_THREADS_DIGEST")) {
    std::ifstream in(path);
    if (!in) {
      std::ofstream(path) << all;
      std::printf("wrote the digest of every output to %s (%d threads)\n", path, Par().concurrency());
    } else {
      std::stringstream had;
      had << in.rdbuf();
      EXPECT_EQ(had.str(), all) << "outputs differ from those of the run that wrote " << path;
      std::printf("every output bit-identical to the digest in %s (%d threads now)\n", path,
                  Par().concurrency());
    }
  }
}

TEST(KernelThreads, RepeatedRunsIdentical) {
  // The same parallel run twice: no result depends on which thread ran what.
  const Shape& s = shapes()[1];
  const Out a = On<Par>::run(s.g, s.f, 3), b = On<Par>::run(s.g, s.f, 3);
  expect_same(a, b, true, 0);
}

}  // namespace
