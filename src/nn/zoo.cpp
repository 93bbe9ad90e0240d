#include "nn/zoo.hpp"

#include <fmt/format.h>

#include <utility>

#include "common/error.hpp"
#include "kernels/geometry.hpp"  // layering: header only (no Kokkos)

namespace asgd::nn {

namespace k = asgd::kernels;

std::string shape_str(Shape s) { return fmt::format("{}x{}x{}", s.h, s.w, s.c); }

SpecBuilder::SpecBuilder(std::string name, Shape input, std::int32_t classes) {
  if (input.size() < 1 || classes < 1)
    throw Error(fmt::format("model {}: bad input {} or classes {}", name, shape_str(input),
                            classes));
  s_.name = std::move(name);
  s_.input = input;
  s_.classes = classes;
}

LayerSpec& SpecBuilder::push(const std::string& kind, const std::string& prefix) {
  LayerSpec l;
  l.kind = kind;
  l.name = fmt::format("{}{}", prefix, s_.layers.size() + 1);
  l.in = l.out = out_shape();
  l.offset = s_.n_params;
  s_.layers.push_back(std::move(l));
  return s_.layers.back();
}

SpecBuilder& SpecBuilder::conv(index_t filters, index_t kk, index_t stride, index_t pad,
                               Init init) {
  const Shape in = out_shape();
  const std::string name = fmt::format("conv{}", s_.layers.size() + 1);
  if (filters < 1) throw Error(fmt::format("{}: filters must be >= 1, got {}", name, filters));
  const k::Window win = k::conv_window(0, in.h, in.w, in.c, kk, stride, pad);
  LayerSpec& l = push("conv", "conv");
  l.out = {win.oh, win.ow, filters};
  l.units = filters;
  l.k = kk;
  l.stride = stride;
  l.pad = pad;
  l.init = std::move(init);
  l.n_params = win.kh * win.kw * win.c * filters + filters;
  s_.n_params += l.n_params;
  return *this;
}

SpecBuilder& SpecBuilder::pool(const std::string& kind, index_t kk, index_t stride) {
  const Shape in = out_shape();
  const k::Window win = k::pool_window(0, in.h, in.w, in.c, kk, stride);
  LayerSpec& l = push(kind, kind);
  l.out = {win.oh, win.ow, in.c};
  l.k = kk;
  l.stride = stride;
  return *this;
}
SpecBuilder& SpecBuilder::maxpool(index_t kk, index_t stride) {
  return pool("maxpool", kk, stride);
}
SpecBuilder& SpecBuilder::avgpool(index_t kk, index_t stride) {
  return pool("avgpool", kk, stride);
}

SpecBuilder& SpecBuilder::lrn(index_t size, real_t alpha, real_t beta, real_t kk, bool cross_map) {
  k::LrnParams p;
  p.size = size;
  k::check_lrn(p);
  LayerSpec& l = push("lrn", "lrn");
  l.size = size;
  l.alpha = alpha;
  l.beta = beta;
  l.k_const = kk;
  l.cross_map = cross_map;
  return *this;
}

SpecBuilder& SpecBuilder::relu() {
  push("relu", "relu");
  return *this;
}

SpecBuilder& SpecBuilder::dropout(real_t p) {
  const std::string name = fmt::format("dropout{}", s_.layers.size() + 1);
  if (!(p >= 0 && p < 1)) throw Error(fmt::format("{}: dropout rate {} not in [0, 1)", name, p));
  push("dropout", "dropout").p = p;
  return *this;
}

SpecBuilder& SpecBuilder::dense(index_t outputs, Init init) {
  const std::string name = fmt::format("fc{}", s_.layers.size() + 1);
  if (outputs < 1) throw Error(fmt::format("{}: outputs must be >= 1, got {}", name, outputs));
  LayerSpec& l = push("dense", "fc");
  l.out = {1, 1, outputs};
  l.units = outputs;
  l.init = std::move(init);
  l.n_params = l.in.size() * outputs + outputs;
  s_.n_params += l.n_params;
  return *this;
}

LayerKind layer_kind(const LayerSpec& l) {
  static const std::pair<const char*, LayerKind> kinds[] = {
      {"conv", LayerKind::conv},       {"dense", LayerKind::dense}, {"maxpool", LayerKind::maxpool},
      {"avgpool", LayerKind::avgpool}, {"lrn", LayerKind::lrn},     {"relu", LayerKind::relu},
      {"dropout", LayerKind::dropout}};
  for (const auto& [name, kind] : kinds)
    if (l.kind == name) return kind;
  throw Error(fmt::format("{}: unknown layer kind '{}'", l.name, l.kind));
}

SpecBuilder& SpecBuilder::add(const LayerSpec& l) {
  switch (layer_kind(l)) {
    case LayerKind::conv: return conv(l.units, l.k, l.stride, l.pad, l.init);
    case LayerKind::dense: return dense(l.units, l.init);
    case LayerKind::maxpool: return maxpool(l.k, l.stride);
    case LayerKind::avgpool: return avgpool(l.k, l.stride);
    case LayerKind::lrn: return lrn(l.size, l.alpha, l.beta, l.k_const, l.cross_map);
    case LayerKind::relu: return relu();
    case LayerKind::dropout: return dropout(l.p);
  }
  return *this;
}

std::vector<std::string> model_names() { return {"mlp", "lenet", "cifar10-18pct", "alexnet"}; }

ModelSpec model_spec(const std::string& name, Shape in, std::int32_t classes) {
  SpecBuilder m(name, in, classes);
  if (name == "mlp") {
    m.dense(512).relu().dense(256).relu().dense(classes);
  } else if (name == "lenet") {
    // conv, relu, maxpool as the network is written; max and relu commute
    // exactly (values and gradients), so relu runs on the pooled quarter.
    m.conv(32, 5, 1, 2).maxpool(2, 2).relu();
    m.conv(64, 5, 1, 2).maxpool(2, 2).relu();
    m.dense(1024).relu().dense(classes);
  } else if (name == "cifar10-18pct") {
    // cuda-convnet layers-18pct.cfg; rnorm scale 0.00005, pow 0.75. Its initW
    // are 1e-4 (conv1) and 1e-2; cuda-convnet feeds raw 0..255 pixels, we feed
    // pixels / 255, so conv1's std is scaled by 255 to give the same activations.
    const Init conv1{"normal", 1e-4 * 255, 0}, rest{"normal", 1e-2, 0};
    m.conv(32, 5, 1, 2, conv1).maxpool(3, 2).relu().lrn(3, 5e-5f, 0.75f, 1.0f, false);
    m.conv(32, 5, 1, 2, rest).relu().avgpool(3, 2).lrn(3, 5e-5f, 0.75f, 1.0f, false);
    m.conv(64, 5, 1, 2, rest).relu().avgpool(3, 2);
    m.dense(classes, rest);
  } else if (name == "alexnet") {
    // Krizhevsky et al. 2012, one tower (no grouped convolutions), 227x227x3 input.
    const Init conv{"normal", 1e-2, 0}, fc{"normal", 5e-3, 0};
    m.conv(96, 11, 4, 0, conv).relu().lrn(5, 1e-4f, 0.75f, 2.0f, true).maxpool(3, 2);
    m.conv(256, 5, 1, 2, conv).relu().lrn(5, 1e-4f, 0.75f, 2.0f, true).maxpool(3, 2);
    m.conv(384, 3, 1, 1, conv).relu().conv(384, 3, 1, 1, conv).relu();
    m.conv(256, 3, 1, 1, conv).maxpool(3, 2).relu();  // relu after the pool: the same (see lenet)
    m.dense(4096, fc).relu().dropout(0.5f).dense(4096, fc).relu().dropout(0.5f);
    m.dense(classes, fc);
  } else {
    std::string known;
    for (const auto& n : model_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error(fmt::format("unknown model '{}' (known: {})", name, known));
  }
  return m.spec();
}

}  // namespace asgd::nn
