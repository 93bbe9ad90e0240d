// The engine interface (src/engine): the CPU engine does bit for bit what
// driving nn::Model directly does (forward-backward, the update with its own
// momentum, the n_sync delta); a CUDA engine in a CPU-only build is refused
// with the message that says how to build with CUDA.
#include <gtest/gtest.h>

#include <KokkosBlas1_axpby.hpp>
#include <cstring>
#include <vector>

#include "common/error.hpp"
#include "engine/engine.hpp"
#include "gpu/gpu.hpp"
#include "kernels/activation.hpp"
#include "kernels/update.hpp"
#include "nn/model.hpp"

using asgd::index_t;
using asgd::real_t;
namespace nn = asgd::nn;

namespace {

std::vector<real_t> host(const real_t* p, index_t n) { return {p, p + n}; }
std::vector<real_t> host(const nn::View& v) { return host(v.data(), v.extent(0)); }

bool same_bits(const std::vector<real_t>& a, const std::vector<real_t>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(real_t)) == 0;
}

void fill_batch(real_t* x, std::int32_t* y, index_t n, index_t size, std::uint64_t seed) {
  for (index_t i = 0; i < n * size; ++i)
    x[i] = asgd::kernels::hash_uniform(seed, static_cast<std::uint64_t>(i)) - real_t(0.5);
  for (index_t i = 0; i < n; ++i) y[i] = static_cast<std::int32_t>((i * 7 + seed) % 10);
}

}  // namespace

TEST(Engine, CpuEngineMatchesTheModelBitForBit) {
  const nn::ModelSpec spec = nn::model_spec("cifar10-18pct", {32, 32, 3}, 10);
  const index_t batch = 8, size = spec.input.size();
  auto eng = asgd::engine::make_engine("cpu", spec, batch);
  EXPECT_EQ(eng->device(), "cpu");
  EXPECT_EQ(eng->n_params(), 89578);
  nn::Model m(spec);
  m.finalize(batch);
  eng->init(7);
  m.init(7);
  ASSERT_TRUE(same_bits(host(eng->params(), eng->n_params()), host(m.params())));

  nn::View x("x", batch * size), inc("inc", m.n_params()), fetched("fetched", m.n_params());
  nn::IView y("y", batch);
  eng->keep_fetched();
  Kokkos::deep_copy(fetched, m.params());
  for (int step = 0; step < 3; ++step) {  // n_sync-like local steps with dropout-free layers
    fill_batch(eng->batch_x(), eng->batch_labels(), batch, size, 11 + step);
    fill_batch(x.data(), y.data(), batch, size, 11 + step);
    eng->zero_grads();
    m.zero_grads();
    const auto a = eng->forward_backward(batch, true, 5 + step, true);
    const auto b = m.forward_backward(batch, x, y, nn::Context{true, 5u + step}, true);
    EXPECT_EQ(a.loss, b.loss);
    EXPECT_EQ(a.wrong, b.wrong);
    ASSERT_TRUE(same_bits(host(eng->grads(), eng->n_params()), host(m.grads())));
    eng->sgd_update(0.01f, 0.9f, 5e-4f);
    asgd::kernels::sgd_update<nn::Space>(m.n_params(), 0.01f, 0.9f, 5e-4f, m.grads(), inc,
                                         m.params());
    ASSERT_TRUE(same_bits(host(eng->params(), eng->n_params()), host(m.params())));
  }
  eng->delta_to_grads();
  Kokkos::deep_copy(m.grads(), m.params());
  KokkosBlas::axpy(real_t(-1), fetched, m.grads());
  EXPECT_TRUE(same_bits(host(eng->grads(), eng->n_params()), host(m.grads())));

  std::vector<real_t> mom(static_cast<std::size_t>(eng->n_params()));
  eng->get_momentum(mom.data());
  EXPECT_TRUE(same_bits(mom, host(inc)));
  eng->set_momentum(mom.data());
  eng->synchronize();
  eng->grads_ready();
  EXPECT_EQ(eng->transfer_params(), eng->params());
  EXPECT_FALSE(eng->set_direct(true));
  EXPECT_EQ(eng->staging_s(), 0.0);
}

TEST(Engine, GradientMemoryAndEvaluation) {
  const nn::ModelSpec spec = nn::model_spec("mlp", {8, 8, 1}, 10);
  auto eng = asgd::engine::make_engine("cpu", spec, 4);
  eng->init(3);
  std::vector<real_t> window(static_cast<std::size_t>(eng->n_params()), real_t(0));
  eng->use_grad_memory(window.data());
  EXPECT_EQ(eng->grads(), window.data());
  fill_batch(eng->batch_x(), eng->batch_labels(), 4, 64, 2);
  const auto eval = eng->forward_backward(4, false, 0, false);
  EXPECT_GT(eval.loss, 0);
  const auto train = eng->forward_backward(4, true, 1, true);
  EXPECT_EQ(train.loss, eval.loss);  // no dropout in the mlp
  real_t norm = 0;
  for (real_t g : window) norm += g * g;
  EXPECT_GT(norm, 0);
}

TEST(Engine, WeightsReadInPlaceGiveTheSameGradientAndComeBack) {
  const nn::ModelSpec spec = nn::model_spec("mlp", {8, 8, 1}, 10);
  auto own = asgd::engine::make_engine("cpu", spec, 4);
  auto shared = asgd::engine::make_engine("cpu", spec, 4);
  own->init(3);
  shared->init(99);  // other weights of its own: the window's must be the ones read
  const auto n = static_cast<std::size_t>(own->n_params());
  std::vector<real_t> window(own->params(), own->params() + n);
  ASSERT_TRUE(shared->read_params_from(window.data()));
  EXPECT_EQ(shared->params(), window.data());
  for (auto* e : {own.get(), shared.get()}) {
    fill_batch(e->batch_x(), e->batch_labels(), 4, 64, 2);
    e->zero_grads();
    e->forward_backward(4, true, 1, true);
  }
  EXPECT_EQ(std::vector<real_t>(shared->grads(), shared->grads() + n),
            std::vector<real_t>(own->grads(), own->grads() + n));
  // the window changes (a server's update): the next pass reads the change
  window[0] += real_t(0.5);
  EXPECT_EQ(shared->params()[0], window[0]);
  // back to its own buffer, which takes the window's weights; the window is then left alone
  ASSERT_TRUE(shared->read_params_from(nullptr));
  EXPECT_NE(shared->params(), window.data());
  EXPECT_EQ(std::vector<real_t>(shared->params(), shared->params() + n), window);
  shared->params()[1] += real_t(1);
  EXPECT_NE(shared->params()[1], window[1]);
}

TEST(Engine, DeviceNamesAndCudaInACpuBuild) {
  const nn::ModelSpec spec = nn::model_spec("mlp", {8, 8, 1}, 10);
  EXPECT_THROW(asgd::engine::make_engine("tpu", spec, 4), asgd::Error);
  if (asgd::gpu::built_with_cuda()) GTEST_SKIP() << "a CUDA build";
  try {
    asgd::engine::make_engine("cuda", spec, 4);
    FAIL() << "no error";
  } catch (const asgd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cmake --preset cuda"), std::string::npos) << e.what();
  }
}
