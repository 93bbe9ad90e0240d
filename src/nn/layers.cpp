// The Kokkos layers of nn::Model (see layers.hpp): convolution, dense,
// pooling, LRN, ReLU and dropout over the kernels of src/kernels, and their
// initial weights.
#include "nn/layers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "kernels/activation.hpp"
#include "kernels/conv.hpp"
#include "kernels/conv_direct.hpp"
#include "kernels/conv_rows.hpp"
#include "kernels/dense.hpp"
#include "kernels/lrn.hpp"
#include "kernels/pool.hpp"

namespace asgd::nn::detail {

namespace {

namespace k = asgd::kernels;

// Box-Muller on 53-bit uniforms from mt19937_64, whose output sequence the
// standard fixes, so initial weights are identical on every platform.
class NormalRng {
 public:
  explicit NormalRng(std::uint64_t seed) : gen_(seed) {}
  double uniform() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = 1.0 - uniform(), u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2 * std::numbers::pi * u2);
    has_spare_ = true;
    return r * std::cos(2 * std::numbers::pi * u2);
  }

 private:
  std::mt19937_64 gen_;
  double spare_ = 0;
  bool has_spare_ = false;
};

void fill_weights(const Init& init, std::uint64_t seed, index_t fan_in, index_t fan_out,
                  real_t* w, index_t nw, real_t* b, index_t nb) {
  NormalRng rng(seed);
  if (init.kind == "zero") {
    std::fill(w, w + nw, real_t(0));
  } else if (init.kind == "normal" || init.kind == "he") {
    const double std = init.kind == "he" ? std::sqrt(2.0 / static_cast<double>(fan_in)) : init.std;
    for (index_t i = 0; i < nw; ++i) w[i] = static_cast<real_t>(rng.normal() * std);
  } else if (init.kind == "xavier") {
    const double lim = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
    for (index_t i = 0; i < nw; ++i) w[i] = static_cast<real_t>((2 * rng.uniform() - 1) * lim);
  } else {
    throw Error(fmt::format("unknown init '{}' (known: he, normal, xavier, zero)", init.kind));
  }
  std::fill(b, b + nb, static_cast<real_t>(init.bias));
}

class Conv final : public Layer {
 public:
  explicit Conv(const LayerSpec& s)
      : Layer(s), f_(s.units),
        win_(k::conv_window(0, s.in.h, s.in.w, s.in.c, s.k, s.stride, s.pad)) {}
  std::string describe() const override {
    return fmt::format("conv {}x{} s{} p{} -> {}", win_.kh, win_.kw, win_.stride, win_.pad, f_);
  }
  index_t k_len() const { return win_.kh * win_.kw * win_.c; }
  void bind(const View& p, const View& g) override {
    w_ = slice(p, 0, k_len() * f_);
    b_ = slice(p, k_len() * f_, f_);
    dw_ = slice(g, 0, k_len() * f_);
    db_ = slice(g, k_len() * f_, f_);
  }
  void init(std::uint64_t seed, real_t* host) const override {
    fill_weights(spec_.init, seed, k_len(), win_.kh * win_.kw * f_, host, k_len() * f_,
                 host + k_len() * f_, f_);
  }
  // The im2col matrix of a whole batch is tens of MB; on the host it is built
  // and consumed in chunks of samples that fit in cache (about 1 MiB of col),
  // recomputed in the backward pass. On a device the whole batch is one chunk.
  void reserve(index_t batch) override {
    const index_t per_sample = win_.oh * win_.ow * k_len();
    const bool host = Kokkos::SpaceAccessibility<Kokkos::HostSpace, Space::memory_space>::accessible;
    chunk_ = host ? std::clamp<index_t>((index_t(1) << 18) / std::max<index_t>(per_sample, 1), 1,
                                        batch)
                  : batch;
    // On a multi-threaded host (OpenMP) each chunk's GEMMs are cut into
    // kGemmBlocks row blocks, one per thread at a time: a chunk of kGemmBlocks
    // cache-sized pieces keeps each block near the one-core size. A constant
    // (not the thread count), so results do not depend on the threads. With
    // the one-core chunk (5 samples in lenet's conv4) two threads had nothing
    // to share: conv4 forward 16.1 ms at 1 thread, 18.6 ms at 2.
#if defined(KOKKOS_ENABLE_OPENMP)
    if constexpr (k::detail::parallel_host<Space>)
      chunk_ = std::min<index_t>(batch, chunk_ * k::detail::kGemmBlocks);
#endif
    // Direct (kernels/conv_direct.hpp) where the GEMM forms would be thin: few
    // taps per kernel row and no input gradient (the first layer), where this
    // CPU runs it faster; the whole batch at once, its padded input the only
    // workspace.
    direct_ = !need_dx_ && k::direct_fits<Space>(win_, f_) && k::direct_pays(win_);
    if (direct_) {
      k::Window wb = win_;
      wb.n = chunk_ = batch;
      col_ = View("asgd::conv::padded", k::direct_pad_len(wb));
      part_ = View("asgd::conv::part", k::direct_part_len(wb, f_));
      return;
    }
    const index_t rows = chunk_ * win_.oh * win_.ow;
    // Row-folded (k::im2row) where it pays: stride 1 on the host, and enough
    // output pixels per sample that one GEMM per sample and kernel row is big.
    rows_path_ = host && win_.stride == 1 && win_.kh > 1 && win_.oh * win_.ow >= 128;
#if defined(KOKKOS_ENABLE_OPENMP)
    // On threads, a narrow kernel row (lenet's conv1: 5 taps of 1 channel)
    // makes the row-folded GEMMs too thin to share (inner dimension 5 forward,
    // 5 rows of weight gradient backward); im2col's one GEMM per chunk, with
    // the weight gradient's long sum split (host_gemm), shares well.
    if constexpr (k::detail::parallel_host<Space>)
      if (win_.kw * win_.c < 16) rows_path_ = false;
#endif
    k::Window wc = win_;
    wc.n = chunk_;
    col_ = View("asgd::conv::col", rows_path_ ? k::im2row_len(wc) : rows * k_len());
    // dcol: dx's workspace, the im2col-shaped matrix, or on the host where the
    // row-folded form runs the transposed convolution's (kernels/conv_rows.hpp;
    // the flipped weights and dy's im2row rows: 84% of dcol in lenet's conv4)
    const index_t tlen = rows_path_ ? k::transposed_dx_len<Space>(wc, f_) : 0;
    if (need_dx_) dcol_ = View("asgd::conv::dcol", tlen > 0 ? tlen : rows * k_len());
    ones_ = View("asgd::conv::ones", rows);
    Kokkos::deep_copy(ones_, real_t(1));
  }
  void forward(index_t n, const View& x, const View& y, const Context&) override {
    for (index_t s0 = 0; s0 < n; s0 += chunk_) {
      const k::Window g = chunk(s0, n);
      const View xs = at(x, s0, in_size(), g.n), ys = at(y, s0, out_size(), g.n);
      if (direct_)
        k::conv2d_forward_direct<Space>(g, f_, xs, w_, b_, col_, ys);
      else if (rows_path_)
        k::conv2d_forward_rows<Space>(g, f_, xs, w_, b_, col_, ys);
      else
        k::conv2d_forward<Space>(g, f_, xs, w_, b_, col_, ys);
    }
  }
  void backward(index_t n, const View& x, const View&, const View& dy, const View& dx) override {
    for (index_t s0 = 0; s0 < n; s0 += chunk_) {
      const k::Window g = chunk(s0, n);
      const View xs = at(x, s0, in_size(), g.n);
      const View dys = at(dy, s0, out_size(), g.n);
      const View dxs = dx.data() ? at(dx, s0, in_size(), g.n) : View();
      if (direct_) {  // col_ holds this batch's padded input (one chunk)
        k::conv2d_backward_direct<Space>(g, f_, col_, dys, part_, dw_, db_);
      } else if (rows_path_) {
        if (n > chunk_) k::im2row<Space>(g, xs, col_);  // else col_ still holds this batch
        // the flipped weights of the transposed input gradient: once a pass
        k::conv2d_backward_rows<Space>(g, f_, col_, w_, dys, dcol_, dxs, dw_, db_, ones_,
                                       s0 == 0);
      } else {
        if (n > chunk_) k::im2col<Space>(g, xs, col_);
        k::conv2d_backward<Space>(g, f_, col_, w_, dys, dcol_, dxs, dw_, db_, ones_);
      }
    }
  }
  double flops_forward(index_t n) const override {
    return 2.0 * static_cast<double>(n * win_.oh * win_.ow * k_len() * f_);
  }
  double flops_backward(index_t n, bool with_dx) const override {
    return flops_forward(n) * (with_dx ? 2 : 1);
  }
  void set_need_dx(bool v) { need_dx_ = v; }

 private:
  k::Window chunk(index_t s0, index_t n) const {
    k::Window g = win_;
    g.n = std::min(chunk_, n - s0);
    return g;
  }
  static View at(const View& v, index_t sample, index_t sample_size, index_t count) {
    return View(v.data() + sample * sample_size, count * sample_size);
  }

  index_t chunk_ = 1;
  bool rows_path_ = false, direct_ = false;
  index_t f_;
  k::Window win_;
  bool need_dx_ = true;
  View w_, b_, dw_, db_, col_, dcol_, ones_, part_;
};

class Dense final : public Layer {
 public:
  explicit Dense(const LayerSpec& s) : Layer(s), m_(s.units) {}
  std::string describe() const override { return fmt::format("dense {} -> {}", in_size(), m_); }
  void bind(const View& p, const View& g) override {
    const index_t nw = in_size() * m_;
    w_ = slice(p, 0, nw);
    b_ = slice(p, nw, m_);
    dw_ = slice(g, 0, nw);
    db_ = slice(g, nw, m_);
  }
  void init(std::uint64_t seed, real_t* host) const override {
    // Drawn in [K, M] order (the layout before 2026-11) and stored [M, K], so
    // a seed gives the same network as it always did.
    const index_t k = in_size(), nw = k * m_;
    std::vector<real_t> km(static_cast<std::size_t>(nw));
    fill_weights(spec_.init, seed, k, m_, km.data(), nw, host + nw, m_);
    for (index_t i = 0; i < k; ++i)
      for (index_t j = 0; j < m_; ++j) host[j * k + i] = km[static_cast<std::size_t>(i * m_ + j)];
  }
  void reserve(index_t batch) override {
    ones_ = View("asgd::dense::ones", batch);
    Kokkos::deep_copy(ones_, real_t(1));
  }
  void forward(index_t n, const View& x, const View& y, const Context&) override {
    k::dense_forward<Space>(n, in_size(), m_, x, w_, b_, y);
  }
  void backward(index_t n, const View& x, const View&, const View& dy, const View& dx) override {
    k::dense_backward<Space>(n, in_size(), m_, x, w_, dy, dx, dw_, db_, ones_);
  }
  double flops_forward(index_t n) const override {
    return 2.0 * static_cast<double>(n * in_size() * m_);
  }
  double flops_backward(index_t n, bool with_dx) const override {
    return flops_forward(n) * (with_dx ? 2 : 1);
  }

 private:
  index_t m_;
  View w_, b_, dw_, db_, ones_;
};

class Pool final : public Layer {
 public:
  Pool(const LayerSpec& s, bool max)
      : Layer(s), max_(max), win_(k::pool_window(0, s.in.h, s.in.w, s.in.c, s.k, s.stride)) {}
  std::string describe() const override {
    return fmt::format("{} {}x{} s{}", kind(), win_.kh, win_.kw, win_.stride);
  }
  void reserve(index_t batch) override {
    if (max_) argmax_ = IView("asgd::maxpool::argmax", batch * out_size());
  }
  void forward(index_t n, const View& x, const View& y, const Context&) override {
    if (max_)
      k::maxpool_forward<Space>(window_of(n), x, y, argmax_);
    else
      k::avgpool_forward<Space>(window_of(n), x, y);
  }
  void backward(index_t n, const View&, const View&, const View& dy, const View& dx) override {
    if (dx.data() == nullptr) return;
    if (max_)
      k::maxpool_backward<Space>(window_of(n), argmax_, dy, dx);
    else
      k::avgpool_backward<Space>(window_of(n), dy, dx);
  }
  double flops_forward(index_t n) const override {
    return static_cast<double>(n * out_size() * win_.kh * win_.kw);
  }

 private:
  k::Window window_of(index_t n) const {  // the window geometry for n samples
    k::Window g = win_;
    g.n = n;
    return g;
  }

  bool max_;
  k::Window win_;
  IView argmax_;
};

class Lrn final : public Layer {
 public:
  explicit Lrn(const LayerSpec& s) : Layer(s) {
    p_.size = s.size;
    p_.alpha = s.alpha;
    p_.beta = s.beta;
    p_.k = s.k_const;
    p_.cross_map = s.cross_map;
    p_.h = s.in.h;
    p_.w = s.in.w;
    p_.c = s.in.c;
  }
  std::string describe() const override {
    return fmt::format("lrn {} size {} a={} b={} k={}", p_.cross_map ? "cross-map" : "same-map",
                       p_.size, p_.alpha, p_.beta, p_.k);
  }
  void reserve(index_t batch) override {
    denom_ = View("asgd::lrn::denom", batch * in_size());
    t_ = View("asgd::lrn::t", batch * in_size());
  }
  void forward(index_t n, const View& x, const View& y, const Context&) override {
    k::LrnParams p = p_;
    p.n = n;
    k::lrn_forward<Space>(p, x, denom_, y);
  }
  void backward(index_t n, const View& x, const View& y, const View& dy, const View& dx) override {
    if (dx.data() == nullptr) return;
    k::LrnParams p = p_;
    p.n = n;
    k::lrn_backward<Space>(p, x, y, denom_, dy, t_, dx);
  }
  double flops_forward(index_t n) const override {
    const index_t win = p_.cross_map ? p_.size : p_.size * p_.size;
    return static_cast<double>(n * in_size() * (2 * win + 4));
  }

 private:
  k::LrnParams p_;
  View denom_, t_;
};

class Relu final : public Layer {
 public:
  using Layer::Layer;
  void forward(index_t n, const View& x, const View& y, const Context&) override {
    k::relu_forward<Space>(n * in_size(), x, y);
  }
  void backward(index_t n, const View&, const View& y, const View& dy, const View& dx) override {
    if (dx.data() != nullptr) k::relu_backward<Space>(n * in_size(), y, dy, dx);
  }
  double flops_forward(index_t n) const override { return static_cast<double>(n * in_size()); }
};

class Dropout final : public Layer {
 public:
  explicit Dropout(const LayerSpec& s) : Layer(s), p_(s.p) {}
  std::string describe() const override { return fmt::format("dropout {}", p_); }
  void reserve(index_t batch) override { scale_ = View("asgd::dropout::scale", batch * in_size()); }
  void forward(index_t n, const View& x, const View& y, const Context& ctx) override {
    const index_t len = n * in_size();
    if (ctx.train) {
      k::dropout_forward<Space>(len, p_, ctx.seed, x, scale_, y);
    } else {
      Kokkos::deep_copy(slice(y, 0, len), slice(x, 0, len));
    }
  }
  void backward(index_t n, const View&, const View&, const View& dy, const View& dx) override {
    if (dx.data() != nullptr) k::dropout_backward<Space>(n * in_size(), scale_, dy, dx);
  }

 private:
  real_t p_;
  View scale_;
};

}  // namespace

std::unique_ptr<Layer> make_layer(const LayerSpec& l) {
  switch (layer_kind(l)) {
    case LayerKind::conv: return std::make_unique<Conv>(l);
    case LayerKind::dense: return std::make_unique<Dense>(l);
    case LayerKind::maxpool: return std::make_unique<Pool>(l, true);
    case LayerKind::avgpool: return std::make_unique<Pool>(l, false);
    case LayerKind::lrn: return std::make_unique<Lrn>(l);
    case LayerKind::relu: return std::make_unique<Relu>(l);
    case LayerKind::dropout: return std::make_unique<Dropout>(l);
  }
  return nullptr;
}

void skip_input_gradient(Layer& first) {
  if (auto* c = dynamic_cast<Conv*>(&first)) c->set_need_dx(false);
}

}  // namespace asgd::nn::detail
