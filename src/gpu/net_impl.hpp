#pragma once
// gpu::Net's state (Net::Impl), private to src/gpu: the handles, the flat
// buffers and activations, and the layers with their cuDNN descriptors.
// layers.cpp builds the layers and runs their passes; net.cpp is the Net
// interface over them (staging, the step, the update).
#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "gpu/cuda_util.hpp"
#include "gpu/gpu.hpp"
#include "nn/spec.hpp"

namespace asgd::gpu {

namespace detail {

// How a layer runs: cuDNN / cuBLAS, or our own kernels (kernels.cu) where
// cuDNN cannot express it (ceil-mode pools, same-map LRN).
enum class Mode { conv, dense, pool_cudnn, maxpool_own, avgpool_own, lrn_cudnn, lrn_own, relu, dropout };

struct ConvAlgos {
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  std::size_t workspace = 0;
};

struct GpuLayer {
  nn::LayerSpec s;
  Mode mode = Mode::relu;
  bool need_dx = true;
  TensorDesc xd, yd, bias_d;  // re-set for each batch size
  TensorDesc rows_d;          // conv output as (N*OH*OW, F, 1, 1) rows: for the bias ops
  FilterDesc fd;
  ConvDesc cd;
  PoolDesc pd;
  LrnDesc ld;
  ActDesc ad;
  std::map<index_t, ConvAlgos> algos;  // per batch size
  DevBuf<float> wt, dwt;               // conv: transposed weights and their gradient
  DevBuf<float> aux, t;                // lrn denominators + workspace; dropout scales
  DevBuf<std::int32_t> argmax;
  index_t k_len() const { return s.k * s.k * s.in.c; }
};

}  // namespace detail

struct Net::Impl {
  using GpuLayer = detail::GpuLayer;
  template <class T>
  using DevBuf = detail::DevBuf<T>;

  nn::ModelSpec spec;
  index_t max_batch = 0;
  DeviceInfo info;
  cudaStream_t stream = nullptr;
  cudnnHandle_t dnn = nullptr;
  cublasHandle_t blas = nullptr;
  bool tf32 = false;
  std::deque<GpuLayer> layers;  // deque: layers hold descriptors and never move
  DevBuf<float> params, grads, inc, fetched;
  std::vector<DevBuf<float>> acts;
  DevBuf<float> grad_a, grad_b, dlogits, probs, x;
  DevBuf<float> ones;  // 1s, as many as a bias gradient sums rows (bias_grad)
  DevBuf<std::int32_t> labels, row_wrong;
  DevBuf<double> row_loss;
  DevBuf<unsigned char> workspace;
  detail::TensorDesc logits_d;
  std::vector<double> host_loss;
  std::vector<std::int32_t> host_wrong;
  std::vector<void*> pinned;
  double staging = 0;

  ~Impl() {
    if (stream) cudaStreamSynchronize(stream);  // nothing of ours may still be running
    for (void* p : pinned) cudaHostUnregister(p);
    if (blas) cublasDestroy(blas);
    if (dnn) cudnnDestroy(dnn);
    if (stream) cudaStreamDestroy(stream);
  }

  // net.cpp
  void ensure_workspace(std::size_t bytes);
  // A blocking copy of `floats` values (either way: unified addressing); a
  // staging copy's time is added to `staging`.
  void copy(void* dst, const void* src, std::size_t floats, const char* what, bool staging_copy);

  // layers.cpp: the layers of `spec` for batches up to max_batch, with the
  // activations and the step's buffers.
  void build();
  void forward(GpuLayer& L, index_t n, const float* in, float* out, bool train, std::uint64_t seed);
  // dx == nullptr: no input gradient wanted.
  void backward(GpuLayer& L, index_t n, const float* in, const float* out, const float* dy, float* dx);
  void bias_grad(const float* dy, index_t rows, index_t f, float* db);
  void conv_forward(GpuLayer& L, index_t n, const float* in, float* out);
  void dense_forward(GpuLayer& L, index_t n, const float* in, float* out);
  void conv_backward(GpuLayer& L, index_t n, const float* in, const float* dy, float* dx);
  void dense_backward(GpuLayer& L, index_t n, const float* in, const float* dy, float* dx);

 private:
  // layers.cpp
  void set_up(GpuLayer& L);  // mode, descriptors and buffers of one layer
  void set_up_conv(GpuLayer& L);
  void set_up_pool(GpuLayer& L, bool max);
  void set_up_lrn(GpuLayer& L);
  void allocate_step_buffers(index_t widest);
  static void describe(GpuLayer& L, index_t n);
  const detail::ConvAlgos& conv_algos(GpuLayer& L, index_t n);
  float* w(const GpuLayer& L) const { return params.get() + L.s.offset; }
  float* b(const GpuLayer& L) const { return params.get() + L.s.offset + L.s.n_params - L.s.units; }
  float* dw(const GpuLayer& L) const { return grads.get() + L.s.offset; }
  float* db(const GpuLayer& L) const { return grads.get() + L.s.offset + L.s.n_params - L.s.units; }
};

}  // namespace asgd::gpu
