#pragma once
// Layers and a sequential model with ONE flat, contiguous parameter buffer and
// ONE flat gradient buffer: what a parameter server shards and MPI ships.
// Activations are NHWC, one flat buffer per layer output, sized for the
// largest batch given to reserve().
#include <Kokkos_Core.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/types.hpp"
#include "kernels/kernels.hpp"
#include "nn/spec.hpp"

namespace asgd::nn {

using Space = Kokkos::DefaultExecutionSpace;
using View = kernels::View1<Space>;
using IView = kernels::IView1<Space>;
using HostView = Kokkos::View<real_t*, Kokkos::LayoutRight, Kokkos::HostSpace>;

// How a layer's weights start: "normal" (std), "he" (std = sqrt(2/fan_in)),
// "xavier" (uniform, limit sqrt(6/(fan_in+fan_out))), "zero". Biases are set
// to bias.
struct Init {
  std::string kind = "he";
  double std = 0.01;
  double bias = 0;
};

struct Context {
  bool train = true;
  std::uint64_t seed = 0;  // dropout masks for this step
};

class Layer {
 public:
  Layer(std::string name, Shape in) : name_(std::move(name)), in_(in), out_(in) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  virtual std::string kind() const = 0;
  Shape in_shape() const { return in_; }
  Shape out_shape() const { return out_; }
  virtual index_t n_params() const { return 0; }
  // params and grads: this layer's slices of the model's flat buffers.
  virtual void bind(const View& /*params*/, const View& /*grads*/) {}
  // Writes this layer's initial parameters into host (length n_params()).
  virtual void init(std::uint64_t /*seed*/, real_t* /*host*/) const {}
  // Workspaces for up to batch samples; called once, before any pass.
  virtual void reserve(index_t /*batch*/) {}
  virtual void forward(index_t n, const View& x, const View& y, const Context& ctx) = 0;
  // dx.data() == nullptr: no input gradient wanted (first layer).
  virtual void backward(index_t n, const View& x, const View& y, const View& dy,
                        const View& dx) = 0;
  // Forward floating-point operations for n samples (multiply-add = 2).
  virtual double flops_forward(index_t /*n*/) const { return 0; }
  // Backward flops; with_dx false when no input gradient is computed.
  virtual double flops_backward(index_t n, bool /*with_dx*/) const { return flops_forward(n); }
  virtual std::string describe() const { return kind(); }
  // This layer as plain data (kind, shapes, window, hyper-parameters).
  virtual LayerSpec spec() const { return {kind(), name_, in_, out_}; }

 protected:
  std::string name_;
  Shape in_, out_;
};

class Model {
 public:
  Model(std::string name, Shape input, std::int32_t classes);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  Model(Model&&) = default;

  // Builders (the zoo uses these). Each takes the current output shape as input.
  Model& conv(index_t filters, index_t k, index_t stride, index_t pad, Init init = {});
  Model& maxpool(index_t k, index_t stride);
  Model& avgpool(index_t k, index_t stride);
  Model& lrn(index_t size, real_t alpha, real_t beta, real_t k, bool cross_map);
  Model& relu();
  Model& dropout(real_t p);
  Model& dense(index_t outputs, Init init = {});

  // Allocates the flat buffers and activations for batches up to max_batch.
  void finalize(index_t max_batch);

  const std::string& name() const { return name_; }
  Shape input_shape() const { return input_; }
  std::int32_t classes() const { return classes_; }
  index_t n_params() const { return n_params_; }
  index_t max_batch() const { return max_batch_; }
  const View& params() const { return params_; }
  const View& grads() const { return grads_; }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  // Output of layer i from the last forward pass (max_batch * out size).
  const View& activation(std::size_t i) const { return acts_.at(i); }

  // Keeps the gradient in `memory` (n_params() floats, e.g. a shared-memory
  // window a parameter server reads) instead of the model's own buffer.
  void use_grad_memory(real_t* memory);

  // Deterministic initialisation from seed, written to params().
  void init(std::uint64_t seed);
  void zero_grads();

  // Forward over n samples (x: n * input size, labels: n); when backward,
  // ADDs the gradient of the MEAN loss over the n samples to grads().
  kernels::LossSum forward_backward(index_t n, const View& x, const IView& labels,
                                    const Context& ctx, bool backward);

  double flops_per_sample_train() const;  // forward + backward
  double flops_per_sample_forward() const;
  // The architecture and parameter layout as plain data (after finalize()).
  ModelSpec spec() const;
  // A table: layer, kind, output shape, parameters.
  std::string summary() const;

 private:
  Shape out_shape() const;
  std::string next_name(const std::string& kind) const;

  std::string name_;
  Shape input_;
  std::int32_t classes_;
  std::vector<std::unique_ptr<Layer>> layers_;
  index_t n_params_ = 0, max_batch_ = 0;
  View params_, grads_;
  std::vector<View> acts_;      // output of each layer
  View grad_a_, grad_b_;        // ping-pong activation gradients
  View dlogits_;
};

// The zoo: "mlp", "lenet", "cifar10-18pct", "alexnet". Throws asgd::Error for
// an unknown name (listing the known ones) or an input the model cannot take.
Model make_model(const std::string& name, Shape input, std::int32_t classes);
std::vector<std::string> model_names();

}  // namespace asgd::nn
