// The CUDA engine: gpu::Net on the learner's GPU, with host staging buffers
// (a host nn::Model for batch 1: the flat parameter and gradient buffers and
// the CPU's deterministic initialisation). In a build without CUDA,
// constructing it throws gpu.hpp's error that says how to build with CUDA.
#include <Kokkos_Core.hpp>
#include <vector>

#include "engine/engines.hpp"
#include "gpu/gpu.hpp"
#include "nn/model.hpp"

namespace asgd::engine {

namespace {

class CudaEngine final : public Engine {
 public:
  CudaEngine(const nn::ModelSpec& spec, index_t max_batch, int node_learner_index)
      : net_(spec, max_batch, gpu::pick_device(node_learner_index)), host_(spec) {
    host_.finalize(1);
    spec_ = host_.spec();
    x_.resize(static_cast<std::size_t>(max_batch * spec_.input.size()));
    y_.resize(static_cast<std::size_t>(max_batch));
    net_.set_params(params());
  }

  const std::string& device() const override { return device_; }
  std::string describe() const override { return net_.device().describe(); }
  const nn::ModelSpec& spec() const override { return spec_; }
  index_t max_batch() const override { return net_.max_batch(); }
  std::string summary() const override { return host_.summary(); }
  double flops_per_sample_train() const override { return host_.flops_per_sample_train(); }

  void init(std::uint64_t seed) override {
    host_.init(seed);
    Kokkos::fence();
    net_.set_params(params());
  }
  real_t* params() override { return host_.params().data(); }
  real_t* grads() override { return host_.grads().data(); }
  void use_grad_memory(real_t* memory) override { host_.use_grad_memory(memory); }
  bool read_params_from(real_t*) override { return false; }  // the device holds its own copy
  void params_changed() override {
    if (!direct_) net_.set_params(params());
  }
  void params_to_host() override { net_.get_params(params()); }
  void grads_ready() override {
    if (!direct_) net_.get_grads(grads());
  }
  bool set_direct(bool want) override { return direct_ = want; }
  real_t* transfer_params() override { return direct_ ? net_.device_params() : params(); }
  real_t* transfer_grads() override { return direct_ ? net_.device_grads() : grads(); }
  void pin_host_buffers() override {
    if (direct_) return;
    const auto bytes = static_cast<std::size_t>(n_params()) * sizeof(real_t);
    net_.pin(params(), bytes);
    net_.pin(grads(), bytes);
  }
  double staging_s() const override { return net_.staging_s(); }

  real_t* batch_x() override { return x_.data(); }
  std::int32_t* batch_labels() override { return y_.data(); }
  Loss forward_backward(index_t n, bool train, std::uint64_t seed, bool backward) override {
    const gpu::Loss s = net_.forward_backward(n, x_.data(), y_.data(), train, seed, backward);
    return {s.loss, s.wrong};
  }
  void zero_grads() override { net_.zero_grads(); }
  void sgd_update(real_t lr, real_t momentum, real_t weight_decay, real_t grad_scale) override {
    net_.sgd_update(lr, momentum, weight_decay, grad_scale);
  }
  void set_momentum(const real_t* host) override { net_.set_momentum(host); }
  void get_momentum(real_t* host) override { net_.get_momentum(host); }
  void keep_fetched() override { net_.keep_fetched(); }
  void delta_to_grads() override { net_.delta_to_grads(); }
  void synchronize() override { net_.synchronize(); }

 private:
  const std::string device_ = "cuda";
  gpu::Net net_;
  nn::Model host_;
  nn::ModelSpec spec_;
  std::vector<real_t> x_;
  std::vector<std::int32_t> y_;
  bool direct_ = false;
};

}  // namespace

std::unique_ptr<Engine> make_cuda_engine(const nn::ModelSpec& spec, index_t max_batch,
                                         int node_learner_index) {
  return std::make_unique<CudaEngine>(spec, max_batch, node_learner_index);
}

}  // namespace asgd::engine
