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
#include "kernels/common.hpp"
#include "kernels/loss.hpp"
#include "kernels/update.hpp"
#include "nn/spec.hpp"
#include "nn/zoo.hpp"

namespace asgd::nn {

using Space = Kokkos::DefaultExecutionSpace;
using View = kernels::View1<Space>;
using IView = kernels::IView1<Space>;
using HostView = Kokkos::View<real_t*, Kokkos::LayoutRight, Kokkos::HostSpace>;

struct Context {
  bool train = true;
  std::uint64_t seed = 0;  // dropout masks for this step
};

// One layer, built from its plain description (nn::SpecBuilder fills in the
// shapes and parameter count).
class Layer {
 public:
  explicit Layer(LayerSpec spec) : spec_(std::move(spec)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return spec_.name; }
  const std::string& kind() const { return spec_.kind; }
  Shape in_shape() const { return spec_.in; }
  Shape out_shape() const { return spec_.out; }
  index_t n_params() const { return spec_.n_params; }
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
  // This layer as plain data (kind, shapes, window, hyper-parameters, layout).
  const LayerSpec& spec() const { return spec_; }

 protected:
  index_t in_size() const { return spec_.in.size(); }
  index_t out_size() const { return spec_.out.size(); }

  LayerSpec spec_;
};

class Model {
 public:
  // The model a spec describes (nn::model_spec, or one built with
  // nn::SpecBuilder); the spec is checked (and its layout filled in) again.
  explicit Model(const ModelSpec& spec);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  Model(Model&&) = default;

  // Allocates the flat buffers and activations for batches up to max_batch.
  void finalize(index_t max_batch);

  const std::string& name() const { return spec_.name; }
  Shape input_shape() const { return spec_.input; }
  std::int32_t classes() const { return spec_.classes; }
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
  // Reads the weights from `memory` (n_params() floats that nothing changes
  // while this model computes, e.g. the servers' shared-memory windows)
  // instead of the model's own buffer; nullptr: back to its own buffer, which
  // first takes the weights that memory holds.
  void use_param_memory(real_t* memory);

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
  void bind_layers();  // each layer's slice of params_ and grads_

  ModelSpec spec_;  // as built (n_params once finalized)
  std::vector<std::unique_ptr<Layer>> layers_;
  index_t n_params_ = 0, max_batch_ = 0;
  View params_, grads_;
  View own_params_;             // the model's own weights (params_ unless use_param_memory)
  std::vector<View> acts_;      // output of each layer
  View grad_a_, grad_b_;        // ping-pong activation gradients
  View dlogits_;
};

// The zoo model (nn::model_spec, nn::model_names in nn/zoo.hpp) as a Kokkos
// model. Throws asgd::Error for an unknown name (listing the known ones) or an
// input the model cannot take.
Model make_model(const std::string& name, Shape input, std::int32_t classes);

}  // namespace asgd::nn
