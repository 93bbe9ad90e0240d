// nn::Model: the sequential model over one flat parameter and one flat
// gradient buffer; its layers are in layers.cpp.
#include "nn/model.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.hpp"
#include "kernels/elementwise.hpp"
#include "nn/layers.hpp"

namespace asgd::nn {

namespace {

using detail::slice;

// Each layer's init seed mixes the model seed with the layer index (the
// dropout hash's counter stream: splitmix64 of seed + layer * golden gamma).
std::uint64_t layer_seed(std::uint64_t seed, std::size_t layer) {
  return kernels::elem::counter_hash(seed, layer);
}

ModelSpec checked(const ModelSpec& spec) {
  SpecBuilder b(spec.name, spec.input, spec.classes);
  for (const auto& l : spec.layers) b.add(l);
  ModelSpec s = b.spec();
  s.n_params = 0;  // set by finalize()
  return s;
}
}  // namespace

Model::Model(const ModelSpec& spec) : spec_(checked(spec)) {
  for (const auto& l : spec_.layers) layers_.push_back(detail::make_layer(l));
}

void Model::finalize(index_t max_batch) {
  if (layers_.empty()) throw Error(fmt::format("model {}: no layers", name()));
  const Shape out = layers_.empty() ? input_shape() : layers_.back()->out_shape();
  if (out.size() != classes())
    throw Error(fmt::format("model {}: output {} does not match {} classes", name(),
                            shape_str(out), classes()));
  if (max_batch < 1) throw Error(fmt::format("model {}: batch {} < 1", name(), max_batch));
  max_batch_ = max_batch;
  n_params_ = 0;
  for (const auto& l : layers_) n_params_ += l->n_params();
  spec_.n_params = n_params_;
  params_ = own_params_ = View("asgd::params", n_params_);
  grads_ = View("asgd::grads", n_params_);
  detail::skip_input_gradient(*layers_.front());
  index_t widest = input_shape().size();
  acts_.clear();
  bind_layers();
  for (auto& l : layers_) {
    l->reserve(max_batch);
    acts_.emplace_back("asgd::activation", max_batch * l->out_shape().size());
    widest = std::max(widest, l->out_shape().size());
  }
  grad_a_ = View("asgd::grad_a", max_batch * widest);
  grad_b_ = View("asgd::grad_b", max_batch * widest);
  dlogits_ = View("asgd::dlogits", max_batch * classes());
}

void Model::bind_layers() {
  index_t off = 0;
  for (auto& l : layers_) {
    l->bind(slice(params_, off, l->n_params()), slice(grads_, off, l->n_params()));
    off += l->n_params();
  }
}

void Model::use_grad_memory(real_t* memory) {
  grads_ = View(memory, n_params_);
  bind_layers();
}

void Model::use_param_memory(real_t* memory) {
  if (memory != nullptr) {
    params_ = View(memory, n_params_);
  } else {
    if (params_.data() != own_params_.data()) Kokkos::deep_copy(own_params_, params_);
    params_ = own_params_;
  }
  bind_layers();
}

void Model::init(std::uint64_t seed) {
  auto host = Kokkos::create_mirror_view(params_);
  index_t off = 0;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->init(layer_seed(seed, i), host.data() + off);
    off += layers_[i]->n_params();
  }
  Kokkos::deep_copy(params_, host);
}

void Model::zero_grads() { Kokkos::deep_copy(grads_, real_t(0)); }

kernels::LossSum Model::forward_backward(index_t n, const View& x, const IView& labels,
                                         const Context& ctx, bool backward) {
  if (n < 0 || n > max_batch_)
    throw Error(fmt::format("model {}: batch {} outside [0, {}]", name(), n, max_batch_));
  if (static_cast<index_t>(x.extent(0)) < n * input_shape().size())
    throw Error(fmt::format("model {}: input has {} values, batch {} needs {}", name(),
                            x.extent(0), n, n * input_shape().size()));
  const std::size_t nl = layers_.size();
  for (std::size_t i = 0; i < nl; ++i) layers_[i]->forward(n, i == 0 ? x : acts_[i - 1], acts_[i], ctx);
  View dlogits = backward ? dlogits_ : View();
  auto sum = kernels::softmax_xent<Space>(n, classes(), acts_.back(), labels,
                                          n > 0 ? real_t(1) / static_cast<real_t>(n) : real_t(0),
                                          dlogits);
  if (!backward) return sum;
  View dy = dlogits_;
  for (std::size_t i = nl; i-- > 0;) {
    View dx = i == 0 ? View() : (dy.data() == grad_a_.data() ? grad_b_ : grad_a_);
    layers_[i]->backward(n, i == 0 ? x : acts_[i - 1], acts_[i], dy, dx);
    dy = dx;
  }
  return sum;
}

ModelSpec Model::spec() const {
  ModelSpec m{name(), input_shape(), classes(), n_params_, {}};
  index_t off = 0;
  for (const auto& l : layers_) {
    LayerSpec s = l->spec();
    s.offset = off;
    s.n_params = l->n_params();
    off += s.n_params;
    m.layers.push_back(std::move(s));
  }
  return m;
}

double Model::flops_per_sample_forward() const {
  double f = 0;
  for (const auto& l : layers_) f += l->flops_forward(1);
  return f;
}

double Model::flops_per_sample_train() const {
  double f = 0;
  for (std::size_t i = 0; i < layers_.size(); ++i)
    f += layers_[i]->flops_forward(1) + layers_[i]->flops_backward(1, i != 0);
  return f;
}

std::string Model::summary() const {
  std::string s = fmt::format("model {} (input {}, {} classes)\n", name(),
                              shape_str(input_shape()), classes());
  s += fmt::format("  {:<10} {:<36} {:>12} {:>12}\n", "layer", "kind", "output", "params");
  for (const auto& l : layers_)
    s += fmt::format("  {:<10} {:<36} {:>12} {:>12}\n", l->name(), l->describe(),
                     shape_str(l->out_shape()), l->n_params());
  s += fmt::format("  total parameters {}, {:.1f} MFLOP per sample (forward + backward)",
                   n_params_, flops_per_sample_train() / 1e6);
  return s;
}

Model make_model(const std::string& name, Shape in, std::int32_t classes) {
  return Model(model_spec(name, in, classes));
}

}  // namespace asgd::nn
