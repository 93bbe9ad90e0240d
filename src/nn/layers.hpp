#pragma once
// The layers nn::Model is made of (layers.cpp), private to src/nn: one class
// per nn::LayerKind over the Kokkos kernels, reached through nn::Layer.
#include <memory>
#include <utility>

#include "nn/model.hpp"

namespace asgd::nn::detail {

// Values [offset, offset + len) of v.
inline View slice(const View& v, index_t offset, index_t len) {
  return Kokkos::subview(v, std::make_pair(offset, offset + len));
}

// The layer a checked spec describes.
std::unique_ptr<Layer> make_layer(const LayerSpec& l);

// The model's first layer computes no input gradient (a convolution then
// allocates no input-gradient workspace); call before reserve().
void skip_input_gradient(Layer& first);

}  // namespace asgd::nn::detail
