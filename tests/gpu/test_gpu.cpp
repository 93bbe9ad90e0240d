// The native CUDA path against the CPU path: every layer kind forward and
// backward (through small models, so each layer's input gradient is checked
// through the gradient of the layer before it), the update rule, the n_sync
// delta, and a short training run whose loss curve must follow the CPU's.
//
// The CPU Kokkos model is itself checked against the plain references and
// finite differences (tests/unit/test_kernels.cpp, test_model.cpp), so it is
// the reference here: same weights, same inputs, same dropout masks.
//
// Without a CUDA device (or in a build without CUDA) main() prints why and
// exits 77, which ctest reports as skipped, never as passed.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gpu/gpu.hpp"
#include "nn/model.hpp"

namespace {

using asgd::index_t;
using asgd::real_t;
using asgd::nn::Model;
using asgd::nn::SpecBuilder;
using asgd::nn::Shape;

std::vector<real_t> host(const asgd::nn::View& v, index_t len = -1) {
  std::vector<real_t> out(len < 0 ? v.extent(0) : static_cast<std::size_t>(len));
  Kokkos::deep_copy(Kokkos::View<real_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(out.data(), out.size()),
                    Kokkos::subview(v, std::make_pair<std::size_t, std::size_t>(0, out.size())));
  return out;
}

// max |a - b| relative to max |b| (the reference), with a floor for all-zero tensors.
double rel_err(const std::vector<real_t>& a, const std::vector<real_t>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0, scale = 1e-6;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

// Float tolerance for values that are sums of `reduction` products (the
// longest reduction in the model): rounding grows about like its square root;
// about 80 float epsilons per sqrt(term), room for cuDNN's Winograd and FFT
// algorithms, whose rounding differs from a plain dot product.
double tolerance(index_t reduction) { return 1e-5 * std::sqrt(static_cast<double>(reduction)) + 1e-6; }

struct Batch {
  std::vector<real_t> x;
  std::vector<std::int32_t> y;
};

Batch random_batch(Shape in, index_t n, std::int32_t classes, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Batch b;
  b.x.resize(static_cast<std::size_t>(n * in.size()));
  for (auto& v : b.x) v = nd(gen);
  b.y.resize(static_cast<std::size_t>(n));
  for (auto& v : b.y) v = static_cast<std::int32_t>(gen() % static_cast<unsigned>(classes));
  return b;
}

// One forward + backward on both paths from the same weights; compares loss,
// errors, every activation and the whole gradient.
void compare_step(Model& m, index_t n, index_t reduction, bool train, unsigned seed) {
  const int dev = asgd::gpu::pick_device(0);
  asgd::gpu::Net net(m.spec(), m.max_batch(), dev);
  Kokkos::fence();
  net.set_params(m.params().data());
  const Batch b = random_batch(m.input_shape(), n, m.classes(), seed);

  asgd::nn::View x("x", b.x.size());
  asgd::nn::IView y("y", b.y.size());
  Kokkos::deep_copy(x, Kokkos::View<const real_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(b.x.data(), b.x.size()));
  Kokkos::deep_copy(y, Kokkos::View<const std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(b.y.data(), b.y.size()));
  m.zero_grads();
  const auto cpu = m.forward_backward(n, x, y, asgd::nn::Context{train, 77}, train);
  net.zero_grads();
  const auto gpu = net.forward_backward(n, b.x.data(), b.y.data(), train, 77, train);

  const double tol = tolerance(reduction);
  EXPECT_NEAR(gpu.loss, cpu.loss, tol * std::max(1.0, std::abs(cpu.loss))) << m.name();
  EXPECT_LE(std::abs(gpu.wrong - cpu.wrong), 1) << "argmax near-ties may differ at most once";
  for (std::size_t i = 0; i < m.layers().size(); ++i) {
    const auto ref = host(m.activation(i), n * m.layers()[i]->out_shape().size());
    EXPECT_LT(rel_err(net.activation(i, n), ref), tol)
        << m.name() << ": activation of " << m.layers()[i]->name() << " (" << m.layers()[i]->describe() << ")";
  }
  if (!train) return;
  std::vector<real_t> g(static_cast<std::size_t>(m.n_params()));
  net.get_grads(g.data());
  const auto ref = host(m.grads());
  for (const auto& l : m.spec().layers) {
    if (l.n_params == 0) continue;
    const std::vector<real_t> a(g.begin() + l.offset, g.begin() + l.offset + l.n_params);
    const std::vector<real_t> r(ref.begin() + l.offset, ref.begin() + l.offset + l.n_params);
    EXPECT_LT(rel_err(a, r), tol * 4) << m.name() << ": gradient of " << l.name;
  }
}

Model build(const std::string& name, Shape in,
            const std::function<void(SpecBuilder&)>& layers, index_t batch = 8) {
  SpecBuilder b(name, in, 10);
  layers(b);
  Model m(b.spec());
  m.finalize(batch);
  m.init(5);
  return m;
}

TEST(GpuLayers, ConvFirstAndDense) {
  Model m = build("conv-first", {9, 9, 3}, [](SpecBuilder& mm) { mm.conv(8, 3, 1, 1).relu().dense(10); });
  compare_step(m, 8, 9 * 9 * 8, true, 1);
}

TEST(GpuLayers, ConvStridePadInputGradient) {
  Model m = build("conv-stride", {11, 11, 3}, [](SpecBuilder& mm) {
    mm.conv(4, 3, 1, 1).conv(6, 5, 2, 2).dense(10);
  });
  compare_step(m, 8, 11 * 11 * 6, true, 2);
}

TEST(GpuLayers, MaxPoolTilingUsesCudnn) {
  Model m = build("maxpool-2-2", {8, 8, 2}, [](SpecBuilder& mm) { mm.conv(4, 3, 1, 1).relu().maxpool(2, 2).dense(10); });
  compare_step(m, 8, 8 * 8 * 4, true, 3);
}

TEST(GpuLayers, MaxPoolCeilModeOwnKernel) {
  Model m = build("maxpool-3-2", {8, 8, 2}, [](SpecBuilder& mm) { mm.conv(4, 3, 1, 1).maxpool(3, 2).dense(10); });
  compare_step(m, 8, 8 * 8 * 4, true, 4);
}

TEST(GpuLayers, AvgPoolBothPaths) {
  Model a = build("avgpool-2-2", {8, 8, 2}, [](SpecBuilder& mm) { mm.conv(4, 3, 1, 1).avgpool(2, 2).dense(10); });
  compare_step(a, 8, 8 * 8 * 4, true, 5);
  Model b = build("avgpool-3-2", {8, 8, 2}, [](SpecBuilder& mm) { mm.conv(4, 3, 1, 1).avgpool(3, 2).dense(10); });
  compare_step(b, 8, 8 * 8 * 4, true, 6);
}

TEST(GpuLayers, LrnSameMapOwnKernel) {
  Model m = build("lrn-same", {8, 8, 2}, [](SpecBuilder& mm) {
    mm.conv(4, 3, 1, 1).lrn(3, 5e-2f, 0.75f, 1.0f, false).dense(10);
  });
  compare_step(m, 8, 8 * 8 * 4, true, 7);
}

TEST(GpuLayers, LrnCrossMapCudnn) {
  Model m = build("lrn-cross", {6, 6, 2}, [](SpecBuilder& mm) {
    mm.conv(8, 3, 1, 1).lrn(5, 1e-1f, 0.75f, 2.0f, true).dense(10);
  });
  compare_step(m, 8, 6 * 6 * 8, true, 8);
}

TEST(GpuLayers, DropoutSameMaskAsCpu) {
  Model m = build("dropout", {4, 4, 3}, [](SpecBuilder& mm) { mm.dense(64).relu().dropout(0.5f).dense(10); });
  compare_step(m, 8, 64, true, 9);
}

TEST(GpuLayers, EvalModeForwardOnly) {
  Model m = build("eval", {4, 4, 3}, [](SpecBuilder& mm) { mm.dense(32).relu().dropout(0.5f).dense(10); });
  compare_step(m, 5, 48, false, 10);  // a batch below the maximum, dropout off
}

TEST(GpuLayers, ZooModelsOneStep) {
  for (const char* name : {"lenet", "cifar10-18pct"}) {
    const Shape in = std::string(name) == "lenet" ? Shape{28, 28, 1} : Shape{32, 32, 3};
    Model m = asgd::nn::make_model(name, in, 10);
    m.finalize(4);
    m.init(3);
    compare_step(m, 4, 7 * 7 * 64 * 4, true, 11);
  }
}

TEST(GpuUpdate, SgdAndNsyncDeltaMatchCpu) {
  Model m = build("update", {4, 4, 1}, [](SpecBuilder& mm) { mm.dense(16).relu().dense(10); });
  asgd::gpu::Net net(m.spec(), m.max_batch(), asgd::gpu::pick_device(0));
  Kokkos::fence();
  net.set_params(m.params().data());
  net.keep_fetched();
  const auto before = host(m.params());
  const Batch b = random_batch(m.input_shape(), 8, 10, 12);
  asgd::nn::View x("x", b.x.size());
  asgd::nn::IView y("y", b.y.size());
  Kokkos::deep_copy(x, Kokkos::View<const real_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(b.x.data(), b.x.size()));
  Kokkos::deep_copy(y, Kokkos::View<const std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(b.y.data(), b.y.size()));
  asgd::nn::View inc("inc", m.n_params());
  for (int step = 0; step < 3; ++step) {
    m.zero_grads();
    m.forward_backward(8, x, y, asgd::nn::Context{true, 0}, true);
    asgd::kernels::sgd_update<asgd::nn::Space>(m.n_params(), 0.1f, 0.9f, 5e-4f, m.grads(), inc, m.params());
    net.zero_grads();
    net.forward_backward(8, b.x.data(), b.y.data(), true, 0, true);
    net.sgd_update(0.1f, 0.9f, 5e-4f);
  }
  std::vector<real_t> w(static_cast<std::size_t>(m.n_params()));
  net.get_params(w.data());
  const auto ref = host(m.params());
  EXPECT_LT(rel_err(w, ref), 1e-5);
  net.delta_to_grads();
  std::vector<real_t> delta(w.size()), want(w.size());
  net.get_grads(delta.data());
  for (std::size_t i = 0; i < w.size(); ++i) want[i] = w[i] - before[i];
  EXPECT_LT(rel_err(delta, want), 1e-6);
  EXPECT_GT(net.staging_s(), 0.0);
}

// 40 SGD steps of cifar10-18pct (momentum, weight decay) on both paths from
// the same start: the losses must follow each other step by step (within
// 2e-3 relative: rounding differences grow a little with every step).
TEST(GpuTraining, LossCurveFollowsCpu) {
  Model m = asgd::nn::make_model("cifar10-18pct", {32, 32, 3}, 10);
  m.finalize(16);
  m.init(21);
  asgd::gpu::Net net(m.spec(), 16, asgd::gpu::pick_device(0));
  Kokkos::fence();
  net.set_params(m.params().data());
  asgd::nn::View inc("inc", m.n_params());
  asgd::nn::View x("x", 16 * m.input_shape().size());
  asgd::nn::IView y("y", 16);
  double worst = 0;
  for (int step = 0; step < 40; ++step) {
    // a small fixed pool of batches, so the loss really falls
    const Batch b = random_batch(m.input_shape(), 16, 10, 100 + step % 4);
    Kokkos::deep_copy(x, Kokkos::View<const real_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(b.x.data(), b.x.size()));
    Kokkos::deep_copy(y, Kokkos::View<const std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(b.y.data(), b.y.size()));
    m.zero_grads();
    const auto c = m.forward_backward(16, x, y, asgd::nn::Context{true, 0}, true);
    asgd::kernels::sgd_update<asgd::nn::Space>(m.n_params(), 0.01f, 0.9f, 5e-4f, m.grads(), inc, m.params());
    net.zero_grads();
    const auto g = net.forward_backward(16, b.x.data(), b.y.data(), true, 0, true);
    net.sgd_update(0.01f, 0.9f, 5e-4f);
    worst = std::max(worst, std::abs(g.loss - c.loss) / std::max(1.0, std::abs(c.loss)));
  }
  EXPECT_LT(worst, 2e-3) << "largest relative loss difference over 40 steps";
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!asgd::gpu::built_with_cuda()) {
    std::puts("GPU tests skipped: this build has no CUDA (configure with --preset cuda)");
    return 77;
  }
  if (asgd::gpu::device_count() == 0) {
    std::puts("GPU tests skipped: no CUDA device visible on this machine");
    return 77;
  }
  std::printf("GPU tests on %s\n", asgd::gpu::device_info(asgd::gpu::pick_device(0)).describe().c_str());
  Kokkos::initialize(argc, argv);
  const int rc = RUN_ALL_TESTS();
  Kokkos::finalize();
  return rc;
}
