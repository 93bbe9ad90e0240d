#pragma once
// The model zoo as plain data: each model's architecture, shapes and flat
// parameter layout (nn::ModelSpec) without Kokkos, so the configuration can
// count parameters and list models without linking the layers. nn::make_model
// builds the Kokkos model from these specs and the CUDA path builds its net
// from them: the list of models is here and only here.
#include <cstdint>
#include <string>
#include <vector>

#include "common/types.hpp"
#include "nn/spec.hpp"

namespace asgd::nn {

// "HxWxC"
std::string shape_str(Shape s);

// LayerSpec::kind as an enum; throws asgd::Error for an unknown kind.
LayerKind layer_kind(const LayerSpec& l);

// Appends layers to a ModelSpec: names (kind and position, dense layers "fc"),
// shapes, parameter counts and offsets, and the checks each layer makes of
// its input (asgd::Error naming the layer). Each takes the current output as
// its input.
class SpecBuilder {
 public:
  // Throws for an empty input or classes < 1.
  SpecBuilder(std::string name, Shape input, std::int32_t classes);

  SpecBuilder& conv(index_t filters, index_t k, index_t stride, index_t pad, Init init = {});
  SpecBuilder& maxpool(index_t k, index_t stride);
  SpecBuilder& avgpool(index_t k, index_t stride);
  SpecBuilder& lrn(index_t size, real_t alpha, real_t beta, real_t k, bool cross_map);
  SpecBuilder& relu();
  SpecBuilder& dropout(real_t p);
  SpecBuilder& dense(index_t outputs, Init init = {});
  // Appends an already described layer (its kind's builder with its fields).
  SpecBuilder& add(const LayerSpec& l);

  const ModelSpec& spec() const { return s_; }
  Shape out_shape() const { return s_.layers.empty() ? s_.input : s_.layers.back().out; }

 private:
  LayerSpec& push(const std::string& kind, const std::string& prefix);
  SpecBuilder& pool(const std::string& kind, index_t k, index_t stride);

  ModelSpec s_;
};

// "mlp", "lenet", "cifar10-18pct", "alexnet".
std::vector<std::string> model_names();

// The zoo model `name` for per-sample `input` and `classes`. Throws
// asgd::Error for an unknown name (listing the known ones) or an input the
// model cannot take.
ModelSpec model_spec(const std::string& name, Shape input, std::int32_t classes);

}  // namespace asgd::nn
