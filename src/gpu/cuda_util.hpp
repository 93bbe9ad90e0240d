#pragma once
// What the host files of the CUDA path (net.cpp, layers.cpp, device.cpp)
// share, private to src/gpu: status checks that throw asgd::Error, device
// buffers and cuDNN descriptors as RAII, the int conversions cuDNN and cuBLAS
// need, and the tensor descriptor forms the net uses.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <fmt/format.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <string>

#include "common/error.hpp"
#include "common/types.hpp"
#include "nn/spec.hpp"

namespace asgd::gpu::detail {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(fmt::format("CUDA {}: {}", what, cudaGetErrorString(e)));
}
inline void check(cudnnStatus_t e, const char* what) {
  if (e != CUDNN_STATUS_SUCCESS) throw Error(fmt::format("cuDNN {}: {}", what, cudnnGetErrorString(e)));
}
inline void check(cublasStatus_t e, const char* what) {
  if (e != CUBLAS_STATUS_SUCCESS)
    throw Error(fmt::format("cuBLAS {}: {}", what, cublasGetStatusString(e)));
}
// After our own kernel launches.
inline void check_launch(const char* what) { check(cudaGetLastError(), what); }

inline bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::string(v) == "1";
}

inline double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <class T>
class DevBuf {
 public:
  DevBuf() = default;
  explicit DevBuf(std::size_t n) { resize(n); }
  ~DevBuf() { release(); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  DevBuf(DevBuf&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  void resize(std::size_t n) {
    release();
    if (n == 0) return;
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, n * sizeof(T));
    if (e != cudaSuccess)
      throw Error(fmt::format("CUDA cudaMalloc of {:.1f} MiB: {}",
                              static_cast<double>(n * sizeof(T)) / (1 << 20), cudaGetErrorString(e)));
    p_ = static_cast<T*>(p);
    n_ = n;
  }
  T* get() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  void release() {
    if (p_ != nullptr) cudaFree(p_);
    p_ = nullptr;
    n_ = 0;
  }
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

// RAII for cuDNN descriptors.
template <class D, cudnnStatus_t (*Create)(D*), cudnnStatus_t (*Destroy)(D)>
class Desc {
 public:
  Desc() { check(Create(&d_), "create descriptor"); }
  ~Desc() { Destroy(d_); }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  operator D() const { return d_; }  // NOLINT: used as the cuDNN handle type

 private:
  D d_{};
};
using TensorDesc = Desc<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc = Desc<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc = Desc<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                      cudnnDestroyConvolutionDescriptor>;
using PoolDesc = Desc<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor>;
using LrnDesc = Desc<cudnnLRNDescriptor_t, cudnnCreateLRNDescriptor, cudnnDestroyLRNDescriptor>;
using ActDesc = Desc<cudnnActivationDescriptor_t, cudnnCreateActivationDescriptor,
                     cudnnDestroyActivationDescriptor>;

inline int to_int(index_t v, const char* what) {
  if (v < 0 || v > INT_MAX) throw Error(fmt::format("GPU: {} = {} does not fit cuDNN/cuBLAS's int", what, v));
  return static_cast<int>(v);
}

inline void set_nhwc(cudnnTensorDescriptor_t d, index_t n, nn::Shape s) {
  check(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, to_int(n, "batch"),
                                   to_int(s.c, "channels"), to_int(s.h, "height"),
                                   to_int(s.w, "width")),
        "cudnnSetTensor4dDescriptor");
}
// n rows of `cols` values (dense activations, softmax input, elementwise).
inline void set_rows(cudnnTensorDescriptor_t d, index_t n, index_t cols) {
  check(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, to_int(n, "batch"),
                                   to_int(cols, "row length"), 1, 1),
        "cudnnSetTensor4dDescriptor");
}

// The alpha and beta scalars of cuDNN and cuBLAS calls.
inline constexpr float kOne = 1.0f, kZero = 0.0f;

}  // namespace asgd::gpu::detail
