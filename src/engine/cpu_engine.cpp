// The CPU engine: the Kokkos nn::Model, doing what the trainers did with it
// (the same kernels in the same order, so results are bit-identical). With
// Kokkos' host spaces the host mirrors are the views themselves: no copies.
#include <KokkosBlas1_axpby.hpp>
#include <Kokkos_Core.hpp>

#include "engine/engines.hpp"
#include "kernels/update.hpp"
#include "nn/model.hpp"

namespace asgd::engine {

namespace {

using HostUnmanaged = Kokkos::View<real_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
using ConstHostUnmanaged =
    Kokkos::View<const real_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;

class CpuEngine final : public Engine {
 public:
  CpuEngine(const nn::ModelSpec& spec, index_t max_batch) : model_(spec) {
    model_.finalize(max_batch);
    spec_ = model_.spec();
    x_ = nn::View("asgd::engine::x", max_batch * spec_.input.size());
    y_ = nn::IView("asgd::engine::y", max_batch);
    xh_ = Kokkos::create_mirror_view(x_);
    yh_ = Kokkos::create_mirror_view(y_);
    inc_ = nn::View("asgd::engine::inc", model_.n_params());
  }

  const std::string& device() const override { return device_; }
  std::string describe() const override { return "cpu"; }
  const nn::ModelSpec& spec() const override { return spec_; }
  index_t max_batch() const override { return model_.max_batch(); }
  std::string summary() const override { return model_.summary(); }
  double flops_per_sample_train() const override { return model_.flops_per_sample_train(); }

  void init(std::uint64_t seed) override { model_.init(seed); }
  real_t* params() override { return model_.params().data(); }
  real_t* grads() override { return model_.grads().data(); }
  void use_grad_memory(real_t* memory) override { model_.use_grad_memory(memory); }
  bool read_params_from(real_t* memory) override {
    model_.use_param_memory(memory);
    return true;
  }
  void params_changed() override {}
  void params_to_host() override { Kokkos::fence(); }
  void grads_ready() override {}
  bool set_direct(bool) override { return false; }
  real_t* transfer_params() override { return params(); }
  real_t* transfer_grads() override { return grads(); }
  void pin_host_buffers() override {}
  double staging_s() const override { return 0; }

  real_t* batch_x() override { return xh_.data(); }
  std::int32_t* batch_labels() override { return yh_.data(); }
  Loss forward_backward(index_t n, bool train, std::uint64_t seed, bool backward) override {
    Kokkos::deep_copy(x_, xh_);
    Kokkos::deep_copy(y_, yh_);
    const auto s = model_.forward_backward(n, x_, y_, nn::Context{train, seed}, backward);
    return {s.loss, s.wrong};
  }
  void zero_grads() override { model_.zero_grads(); }
  void sgd_update(real_t lr, real_t momentum, real_t weight_decay, real_t grad_scale) override {
    kernels::sgd_update<nn::Space>(model_.n_params(), lr, momentum, weight_decay, model_.grads(),
                                   inc_, model_.params(), grad_scale);
  }
  void set_momentum(const real_t* host) override {
    Kokkos::deep_copy(inc_, ConstHostUnmanaged(host, static_cast<std::size_t>(n_params())));
  }
  void get_momentum(real_t* host) override {
    Kokkos::deep_copy(HostUnmanaged(host, static_cast<std::size_t>(n_params())), inc_);
  }
  void keep_fetched() override {
    if (fetched_.data() == nullptr) fetched_ = nn::View("asgd::engine::fetched", n_params());
    Kokkos::deep_copy(fetched_, model_.params());
  }
  void delta_to_grads() override {  // grads = params + (-1) fetched, as the learners did
    Kokkos::deep_copy(model_.grads(), model_.params());
    KokkosBlas::axpy(real_t(-1), fetched_, model_.grads());
  }
  void synchronize() override { Kokkos::fence(); }

 private:
  const std::string device_ = "cpu";
  nn::Model model_;
  nn::ModelSpec spec_;
  nn::View x_, inc_, fetched_;
  nn::IView y_;
  nn::View::HostMirror xh_;
  nn::IView::HostMirror yh_;
};

}  // namespace

std::unique_ptr<Engine> make_cpu_engine(const nn::ModelSpec& spec, index_t max_batch) {
  return std::make_unique<CpuEngine>(spec, max_batch);
}

}  // namespace asgd::engine
