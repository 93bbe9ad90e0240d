// Models: parameter counts of the zoo, one flat buffer, whole-model gradients
// against finite differences, deterministic initialisation, learning.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/error.hpp"
#include "kernels/activation.hpp"
#include "nn/model.hpp"

using asgd::index_t;
using asgd::real_t;
using namespace asgd::nn;

namespace {

std::vector<real_t> host_copy(const View& v) {
  std::vector<real_t> out(v.extent(0));
  Kokkos::deep_copy(Kokkos::View<real_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(out.data(), out.size()), v);
  return out;
}

void set_host(const View& v, const std::vector<real_t>& src) {
  Kokkos::deep_copy(v, Kokkos::View<const real_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(src.data(), src.size()));
}

View filled(index_t n, std::uint64_t seed, real_t scale = 1) {
  View v("x", n);
  auto h = Kokkos::create_mirror_view(v);
  for (index_t i = 0; i < n; ++i) h(i) = scale * (asgd::kernels::hash_uniform(seed, i) - real_t(0.5));
  Kokkos::deep_copy(v, h);
  return v;
}

IView labels(index_t n, int classes) {
  IView y("y", n);
  auto h = Kokkos::create_mirror_view(y);
  for (index_t i = 0; i < n; ++i) h(i) = static_cast<std::int32_t>((i * 7 + 3) % classes);
  Kokkos::deep_copy(y, h);
  return y;
}

}  // namespace

TEST(Zoo, ParameterCountsMatchThePublishedShapes) {
  auto lenet = make_model("lenet", {28, 28, 1}, 10);
  lenet.finalize(2);
  // conv 5x5x1x32 + conv 5x5x32x64 + fc 3136x1024 + fc 1024x10, with biases
  EXPECT_EQ(lenet.n_params(), 832 + 51264 + 3212288 + 10250);
  auto c18 = make_model("cifar10-18pct", {32, 32, 3}, 10);
  c18.finalize(2);
  EXPECT_EQ(c18.n_params(), 89578);  // cuda-convnet layers-18pct
  EXPECT_EQ(c18.layers().back()->in_shape(), (Shape{4, 4, 64}));
  auto alex = make_model("alexnet", {227, 227, 3}, 1000);
  EXPECT_EQ(alex.layers()[0]->out_shape(), (Shape{55, 55, 96}));
  EXPECT_NEAR(lenet.flops_per_sample_train() / 1e6, 82.2, 0.1);
}

TEST(Zoo, UnknownModelAndBadShapesAreErrors) {
  try {
    make_model("resnet", {28, 28, 1}, 10);
    FAIL() << "no error";
  } catch (const asgd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("lenet"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_model("alexnet", {8, 8, 1}, 10), asgd::Error);  // 11x11 stride 4 does not fit
  Model m(SpecBuilder("m", {4, 4, 1}, 3).dense(5).spec());  // output 5 != 3 classes
  EXPECT_THROW(m.finalize(1), asgd::Error);
}

// The zoo as plain data (nn/zoo.hpp, no Kokkos) describes exactly the model
// make_model builds: names, shapes, hyper-parameters, parameter counts, offsets.
TEST(Zoo, SpecsEqualTheBuiltModels) {
  const std::vector<std::pair<Shape, std::int32_t>> inputs = {
      {{28, 28, 1}, 10}, {{32, 32, 3}, 10}, {{227, 227, 3}, 1000}, {{64, 64, 3}, 7}};
  int compared = 0;
  for (const auto& name : model_names())
    for (const auto& [in, classes] : inputs) {
      if (name == "alexnet" && in.h < 64) {
        EXPECT_THROW(model_spec(name, in, classes), asgd::Error) << name;
        continue;
      }
      if (name != "alexnet" && in.h > 64) continue;  // keep it quick
      const ModelSpec s = model_spec(name, in, classes);
      auto m = make_model(name, in, classes);
      m.finalize(1);
      EXPECT_EQ(s, m.spec()) << name << " " << shape_str(in);
      EXPECT_EQ(s.n_params, m.n_params()) << name;
      ++compared;
    }
  EXPECT_GE(compared, 10);
  try {
    model_spec("resnet", {28, 28, 1}, 10);
    FAIL() << "no error";
  } catch (const asgd::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "unknown model 'resnet' (known: mlp, lenet, cifar10-18pct, alexnet)");
  }
  // A spec round-trips through the Kokkos model.
  const ModelSpec c18 = model_spec("cifar10-18pct", {32, 32, 3}, 10);
  Model m(c18);
  m.finalize(1);
  EXPECT_EQ(m.spec(), c18);
}

TEST(Model, FlatBuffersHoldEveryLayer) {
  auto m = make_model("lenet", {28, 28, 1}, 10);
  m.finalize(4);
  index_t sum = 0;
  for (const auto& l : m.layers()) sum += l->n_params();
  EXPECT_EQ(sum, m.n_params());
  EXPECT_EQ(static_cast<index_t>(m.params().extent(0)), m.n_params());
  EXPECT_EQ(static_cast<index_t>(m.grads().extent(0)), m.n_params());
}

TEST(Model, InitialisationIsDeterministicPerSeed) {
  auto a = make_model("cifar10-18pct", {32, 32, 3}, 10);
  auto b = make_model("cifar10-18pct", {32, 32, 3}, 10);
  a.finalize(1);
  b.finalize(1);
  a.init(5);
  b.init(5);
  EXPECT_EQ(host_copy(a.params()), host_copy(b.params()));
  b.init(6);
  EXPECT_NE(host_copy(a.params()), host_copy(b.params()));
}

// Whole-model gradient (every layer kind but dropout) against central
// differences of the mean loss, in float with h = 1e-3 on a small model.
// Central differences of the mean loss against the model's gradient, every
// `step`-th parameter; returns how many were checked.
int expect_gradient_matches_fd(Model& m, index_t n, const View& x, const IView& y, index_t step) {
  m.zero_grads();
  m.forward_backward(n, x, y, {true, 0}, true);
  const auto grad = host_copy(m.grads());
  auto params = host_copy(m.params());
  auto loss_at = [&](const std::vector<real_t>& p) {
    set_host(m.params(), p);
    return m.forward_backward(n, x, y, {false, 0}, false).loss / n;
  };
  const real_t h = 1e-3f;
  int checked = 0;
  for (index_t i = 0; i < m.n_params(); i += step) {
    auto p = params;
    p[i] += h;
    const double up = loss_at(p);
    p[i] -= 2 * h;
    const double down = loss_at(p);
    const double fd = (up - down) / (2 * h);
    EXPECT_NEAR(grad[i], fd, 2e-3 + 0.05 * std::abs(fd)) << "parameter " << i;
    ++checked;
  }
  return checked;
}

TEST(Model, GradientMatchesFiniteDifferences) {
  SpecBuilder b("small", {6, 6, 2}, 3);
  b.conv(4, 3, 1, 1, {"normal", 0.5, 0.1}).relu().maxpool(2, 2).lrn(3, 0.5f, 0.75f, 1.0f, false);
  b.conv(4, 3, 1, 1, {"normal", 0.5, 0.0}).avgpool(3, 2).lrn(3, 0.5f, 0.75f, 2.0f, true);
  b.dense(5, {"normal", 0.5, 0.1}).relu().dense(3, {"normal", 0.5, 0.0});
  Model m(b.spec());
  const index_t n = 3;
  m.finalize(n);
  m.init(11);
  EXPECT_GT(expect_gradient_matches_fd(m, n, filled(n * 72, 3, 2), labels(n, 3), 7), 20);
}

// Convolutions with 16x16 outputs take the row-folded path (k::im2row) on the
// host, and a batch of 7 spans two chunks of samples, so the backward pass
// rebuilds the workspace; the second convolution's input gradient flows into
// the first's weights.
TEST(Model, GradientMatchesFiniteDifferencesOnTheRowFoldedPath) {
  SpecBuilder b("rows", {16, 16, 3}, 3);
  b.conv(8, 5, 1, 2, {"normal", 0.2, 0.1}).relu();
  b.conv(4, 5, 1, 2, {"normal", 0.2, 0.0}).avgpool(4, 4);
  b.dense(3, {"normal", 0.3, 0.0});
  Model m(b.spec());
  const index_t n = 7;
  m.finalize(n);
  m.init(12);
  EXPECT_GT(expect_gradient_matches_fd(m, n, filled(n * 16 * 16 * 3, 5, 3), labels(n, 3), 23),
            40);
}

TEST(Model, SgdReducesTheLossOnAFixedBatch) {
  auto m = make_model("mlp", {8, 8, 1}, 4);
  const index_t n = 16;
  m.finalize(n);
  m.init(1);
  const View x = filled(n * 64, 9, 2);
  const IView y = labels(n, 4);
  View inc("inc", m.n_params());
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    m.zero_grads();
    const auto s = m.forward_backward(n, x, y, {true, 0}, true);
    if (step == 0) first = s.loss / n;
    last = s.loss / n;
    asgd::kernels::sgd_update<Space>(m.n_params(), 0.05f, 0.9f, 0.0f, m.grads(), inc, m.params());
  }
  EXPECT_LT(last, 0.2 * first) << "first " << first << " last " << last;
}

TEST(Model, BatchLargerThanReservedIsAnError) {
  auto m = make_model("mlp", {8, 8, 1}, 4);
  m.finalize(2);
  const View x = filled(3 * 64, 1);
  EXPECT_THROW(m.forward_backward(3, x, labels(3, 4), {false, 0}, false), asgd::Error);
}
