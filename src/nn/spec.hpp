#pragma once
// A model's architecture as plain data: what a backend other than the Kokkos
// layers (the CUDA path in src/gpu) needs to build the same network over the
// same flat parameter layout. No Kokkos here, so nvcc-compiled code can use it.
#include <cstdint>
#include <string>
#include <vector>

#include "common/types.hpp"

namespace asgd::nn {

// Per-sample shape, H x W x C (activations are NHWC).
struct Shape {
  index_t h = 1, w = 1, c = 1;
  index_t size() const { return h * w * c; }
  bool operator==(const Shape&) const = default;
};

// How a layer's weights start: "normal" (std), "he" (std = sqrt(2/fan_in)),
// "xavier" (uniform, limit sqrt(6/(fan_in+fan_out))), "zero". Biases are set
// to bias.
struct Init {
  std::string kind = "he";
  double std = 0.01;
  double bias = 0;
  bool operator==(const Init&) const = default;
};

// The layer kinds, parsed from LayerSpec::kind once (nn::layer_kind in
// nn/zoo.hpp) where a backend builds its layers.
enum class LayerKind { conv, dense, maxpool, avgpool, lrn, relu, dropout };

// One layer. Parameter layout inside the model's flat buffer, from `offset`:
//   conv:  weights [KH*KW*C, F] (rows (kh, kw, c), F innermost), then bias [F]
//   dense: weights [M, K] (K innermost: each output's weights together), then bias [M]
// Pools use cuda-convnet's ceil mode (windows clipped at the far edge, first
// window at 0, no padding); LRN windows are centred and clipped.
struct LayerSpec {
  std::string kind;  // conv, dense, maxpool, avgpool, lrn, relu, dropout
  std::string name;
  Shape in, out;
  index_t units = 0;                // conv filters / dense outputs
  index_t k = 1, stride = 1, pad = 0;  // conv / pool window
  real_t alpha = 0, beta = 0, k_const = 0;  // lrn
  bool cross_map = false;                   // lrn
  index_t size = 0;                         // lrn window
  real_t p = 0;                             // dropout rate
  Init init;                                // conv / dense weights
  index_t offset = 0, n_params = 0;
  bool operator==(const LayerSpec&) const = default;
};

struct ModelSpec {
  std::string name;
  Shape input;
  std::int32_t classes = 0;
  index_t n_params = 0;
  std::vector<LayerSpec> layers;
  bool operator==(const ModelSpec&) const = default;
};

}  // namespace asgd::nn
