// The native CUDA path (see gpu.hpp): gpu::Net over its state (Net::Impl in
// net_impl.hpp). Host code: cuDNN, cuBLAS and the CUDA runtime through their C
// APIs; the layers (and the layout notes) are in layers.cpp, the kernels of
// our own in kernels.cu, the devices in device.cpp.
#include <fmt/format.h>

#include <chrono>
#include <string>
#include <vector>

#include "gpu/kernels.cuh"
#include "gpu/net_impl.hpp"

namespace asgd::gpu {

using namespace detail;  // NOLINT(google-build-using-namespace): src/gpu's own helpers

void Net::Impl::ensure_workspace(std::size_t bytes) {
  if (bytes > workspace.size()) {
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    workspace.resize(bytes);
  }
}

void Net::Impl::copy(void* dst, const void* src, std::size_t floats, const char* what, bool staging_copy) {
  const auto t0 = std::chrono::steady_clock::now();
  check(cudaMemcpyAsync(dst, src, floats * sizeof(float), cudaMemcpyDefault, stream), what);
  check(cudaStreamSynchronize(stream), what);
  if (staging_copy) staging += since(t0);
}

Net::Net(const nn::ModelSpec& spec, index_t max_batch, int device) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  if (max_batch < 1) throw Error(fmt::format("GPU: batch {} < 1", max_batch));
  const int n = device_count();
  if (device < 0 || device >= n)
    throw Error(fmt::format("GPU: device {} does not exist ({} visible)", device, n));
  check(cudaSetDevice(device), "cudaSetDevice");
  m.spec = spec;
  m.max_batch = max_batch;
  m.info = device_info(device);
  m.tf32 = env_on("ASGD_CUDA_TF32");
  check(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudnnCreate(&m.dnn), "cudnnCreate");
  check(cudnnSetStream(m.dnn, m.stream), "cudnnSetStream");
  check(cublasCreate(&m.blas), "cublasCreate");
  check(cublasSetStream(m.blas, m.stream), "cublasSetStream");
  check(cublasSetMathMode(m.blas, m.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
        "cublasSetMathMode");
  const auto np = static_cast<std::size_t>(spec.n_params);
  m.params.resize(np);
  m.grads.resize(np);
  m.inc.resize(np);
  check(cudaMemsetAsync(m.inc.get(), 0, np * sizeof(float), m.stream), "cudaMemset");
  check(cudaMemsetAsync(m.grads.get(), 0, np * sizeof(float), m.stream), "cudaMemset");
  m.build();
  check(cudaStreamSynchronize(m.stream), "cudaStreamSynchronize");
}

Net::~Net() = default;

const DeviceInfo& Net::device() const { return impl_->info; }
index_t Net::n_params() const { return impl_->spec.n_params; }
index_t Net::max_batch() const { return impl_->max_batch; }
double Net::staging_s() const { return impl_->staging; }
real_t* Net::device_params() { return impl_->params.get(); }
real_t* Net::device_grads() { return impl_->grads.get(); }

void Net::set_params(const real_t* host) {
  impl_->copy(impl_->params.get(), host, impl_->params.size(), "copy weights to the GPU", true);
}
void Net::get_params(real_t* host) {
  impl_->copy(host, impl_->params.get(), impl_->params.size(), "copy weights from the GPU", true);
}
void Net::get_grads(real_t* host) {
  impl_->copy(host, impl_->grads.get(), impl_->grads.size(), "copy gradient from the GPU", true);
}
void Net::set_momentum(const real_t* host) {
  impl_->copy(impl_->inc.get(), host, impl_->inc.size(), "copy momentum to the GPU", false);
}
void Net::get_momentum(real_t* host) {
  impl_->copy(host, impl_->inc.get(), impl_->inc.size(), "copy momentum from the GPU", false);
}

bool Net::pin(void* host, std::size_t bytes) {
  if (host == nullptr || bytes == 0) return false;
  if (cudaHostRegister(host, bytes, cudaHostRegisterDefault) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  impl_->pinned.push_back(host);
  return true;
}

void Net::zero_grads() {
  check(cudaMemsetAsync(impl_->grads.get(), 0, impl_->grads.size() * sizeof(float), impl_->stream),
        "cudaMemsetAsync (gradient)");
}

Loss Net::forward_backward(index_t n, const real_t* x, const std::int32_t* labels, bool train,
                           std::uint64_t seed, bool backward) {
  Impl& m = *impl_;
  if (n < 0 || n > m.max_batch)
    throw Error(fmt::format("GPU model {}: batch {} outside [0, {}]", m.spec.name, n, m.max_batch));
  if (n == 0) return {};
  const auto in_floats = static_cast<std::size_t>(n * m.spec.input.size());
  check(cudaMemcpyAsync(m.x.get(), x, in_floats * sizeof(float), cudaMemcpyDefault, m.stream),
        "copy batch to the GPU");
  check(cudaMemcpyAsync(m.labels.get(), labels, static_cast<std::size_t>(n) * sizeof(std::int32_t),
                        cudaMemcpyDefault, m.stream),
        "copy labels to the GPU");
  const std::size_t nl = m.layers.size();
  for (std::size_t i = 0; i < nl; ++i)
    m.forward(m.layers[i], n, i == 0 ? m.x.get() : m.acts[i - 1].get(), m.acts[i].get(), train, seed);

  const int classes = m.spec.classes;
  set_rows(m.logits_d, n, classes);
  check(cudnnSoftmaxForward(m.dnn, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE, &kOne,
                            m.logits_d, m.acts.back().get(), &kZero, m.logits_d, m.probs.get()),
        "cudnnSoftmaxForward");
  kern::softmax_xent(m.stream, n, classes, m.acts.back().get(), m.probs.get(), m.labels.get(),
                     1.0f / static_cast<float>(n), backward ? m.dlogits.get() : nullptr,
                     m.row_loss.get(), m.row_wrong.get());
  check_launch("softmax_xent");
  if (backward) {
    const float* dy = m.dlogits.get();
    for (std::size_t i = nl; i-- > 0;) {
      float* dx = i == 0 ? nullptr : (dy == m.grad_a.get() ? m.grad_b.get() : m.grad_a.get());
      m.backward(m.layers[i], n, i == 0 ? m.x.get() : m.acts[i - 1].get(), m.acts[i].get(), dy, dx);
      dy = dx;
    }
  }
  check(cudaMemcpyAsync(m.host_loss.data(), m.row_loss.get(), static_cast<std::size_t>(n) * sizeof(double),
                        cudaMemcpyDeviceToHost, m.stream),
        "copy loss from the GPU");
  check(cudaMemcpyAsync(m.host_wrong.data(), m.row_wrong.get(),
                        static_cast<std::size_t>(n) * sizeof(std::int32_t), cudaMemcpyDeviceToHost,
                        m.stream),
        "copy loss from the GPU");
  check(cudaStreamSynchronize(m.stream), "forward/backward");
  Loss out;
  for (index_t r = 0; r < n; ++r) {
    out.loss += m.host_loss[static_cast<std::size_t>(r)];
    out.wrong += m.host_wrong[static_cast<std::size_t>(r)];
  }
  return out;
}

void Net::sgd_update(real_t lr, real_t momentum, real_t weight_decay, real_t grad_scale) {
  Impl& m = *impl_;
  kern::sgd_update(m.stream, m.spec.n_params, lr, momentum, weight_decay, grad_scale, m.grads.get(),
                   m.inc.get(), m.params.get());
  check_launch("sgd_update");
}

void Net::keep_fetched() {
  Impl& m = *impl_;
  if (m.fetched.size() == 0) m.fetched.resize(m.params.size());
  check(cudaMemcpyAsync(m.fetched.get(), m.params.get(), m.params.size() * sizeof(float),
                        cudaMemcpyDeviceToDevice, m.stream),
        "copy fetched weights");
}

void Net::delta_to_grads() {
  Impl& m = *impl_;
  if (m.fetched.size() == 0) throw Error("GPU: delta_to_grads() before keep_fetched()");
  kern::subtract(m.stream, m.spec.n_params, m.params.get(), m.fetched.get(), m.grads.get());
  check_launch("delta");
}

std::vector<real_t> Net::activation(std::size_t i, index_t n) {
  Impl& m = *impl_;
  if (n < 0 || n > m.max_batch)
    throw Error(fmt::format("GPU model {}: batch {} outside [0, {}]", m.spec.name, n, m.max_batch));
  const auto len = static_cast<std::size_t>(n * m.spec.layers.at(i).out.size());
  std::vector<real_t> out(len);
  m.copy(out.data(), m.acts.at(i).get(), len, "copy activation from the GPU", false);
  return out;
}

void Net::synchronize() { check(cudaStreamSynchronize(impl_->stream), "cudaStreamSynchronize"); }

}  // namespace asgd::gpu
