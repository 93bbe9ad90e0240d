// The native CUDA path (see gpu.hpp). Host code: cuDNN, cuBLAS and the CUDA
// runtime through their C APIs; the few kernels of our own live in kernels.cu.
//
// Layout notes. Activations are NHWC as on the CPU, so cuDNN gets NHWC tensor
// descriptors. The flat parameter buffer keeps the CPU layout: conv weights
// [KH*KW*C, F] (F innermost) which no cuDNN filter format matches, so each
// conv keeps a transposed copy [F, KH*KW*C] (cuDNN's NHWC/KRSC filter)
// refreshed by one cublasSgeam per forward pass, and its weight gradient is
// transposed back (and accumulated) the same way. Dense weights [M, K] are a
// column-major K x M matrix to cuBLAS: each pass is one SGEMM, no copy.
//
// cuDNN cannot express cuda-convnet's ceil-mode pooling (a clipped last
// window) nor same-map LRN (a spatial window): those layers use our kernels;
// pools whose windows tile the input exactly and cross-map LRN use cuDNN.
// Convolutions run in FP32 (CUDNN_FMA_MATH, no TF32) so results match the CPU
// path; ASGD_CUDA_TF32=1 allows tensor-core TF32 for throughput studies.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <string>

#include "common/error.hpp"
#include "gpu/gpu.hpp"
#include "nn/zoo.hpp"
#include "gpu/kernels.cuh"

namespace asgd::gpu {

namespace {

using nn::LayerSpec;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(fmt::format("CUDA {}: {}", what, cudaGetErrorString(e)));
}
void check(cudnnStatus_t e, const char* what) {
  if (e != CUDNN_STATUS_SUCCESS) throw Error(fmt::format("cuDNN {}: {}", what, cudnnGetErrorString(e)));
}
void check(cublasStatus_t e, const char* what) {
  if (e != CUBLAS_STATUS_SUCCESS)
    throw Error(fmt::format("cuBLAS {}: {}", what, cublasGetStatusString(e)));
}
// After our own kernel launches.
void check_launch(const char* what) { check(cudaGetLastError(), what); }

bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::string(v) == "1";
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

int to_int(index_t v, const char* what) {
  if (v < 0 || v > INT_MAX) throw Error(fmt::format("GPU: {} = {} does not fit cuDNN/cuBLAS's int", what, v));
  return static_cast<int>(v);
}

void set_nhwc(cudnnTensorDescriptor_t d, index_t n, nn::Shape s) {
  check(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, to_int(n, "batch"),
                                   to_int(s.c, "channels"), to_int(s.h, "height"),
                                   to_int(s.w, "width")),
        "cudnnSetTensor4dDescriptor");
}
// n rows of `cols` values (dense activations, softmax input, elementwise).
void set_rows(cudnnTensorDescriptor_t d, index_t n, index_t cols) {
  check(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, to_int(n, "batch"),
                                   to_int(cols, "row length"), 1, 1),
        "cudnnSetTensor4dDescriptor");
}

constexpr std::size_t kWorkspaceCap = std::size_t(1) << 30;  // per-algorithm limit
const float kOne = 1.0f, kZero = 0.0f;

// The first algorithm cuDNN's heuristics rank usable within the workspace
// cap, preferring deterministic ones (repeat runs give the same numbers).
// The entry's `memory` is the algorithm's workspace size for these descriptors.
template <class Perf>
const Perf& first_usable(const Perf* perf, int got, const char* pass, const std::string& layer) {
  for (bool need_deterministic : {true, false})
    for (int i = 0; i < got; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kWorkspaceCap &&
          (!need_deterministic || perf[i].determinism == CUDNN_DETERMINISTIC))
        return perf[i];
  throw Error(fmt::format("cuDNN: no {} algorithm for {} within {} MiB of workspace", pass, layer,
                          kWorkspaceCap >> 20));
}

enum class Mode { conv, dense, pool_cudnn, maxpool_own, avgpool_own, lrn_cudnn, lrn_own, relu, dropout };

struct ConvAlgos {
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  std::size_t workspace = 0;
};

struct GpuLayer {
  LayerSpec s;
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

kern::Pool pool_geom(const LayerSpec& s, index_t n) {
  return {n, s.in.h, s.in.w, s.in.c, s.k, s.k, s.stride, 0, s.out.h, s.out.w};
}
kern::Lrn lrn_geom(const LayerSpec& s, index_t n) {
  return {n, s.in.h, s.in.w, s.in.c, s.size, s.alpha, s.beta, s.k_const, s.cross_map};
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

bool built_with_cuda() { return true; }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // no driver / no device: not an error here
    return 0;
  }
  return n;
}

std::string DeviceInfo::describe() const {
  return fmt::format("cuda:{} {} (sm_{}{}, {} SMs, {:.1f} GiB; CUDA runtime {}, cuDNN {}, cuBLAS {})",
                     index, name, cc_major, cc_minor, multiprocessors, memory_gib, runtime_version,
                     cudnn_version, cublas_version);
}

DeviceInfo device_info(int device) {
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
  DeviceInfo d;
  d.index = device;
  d.name = p.name;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.multiprocessors = p.multiProcessorCount;
  d.memory_gib = static_cast<double>(p.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0);
  int rt = 0;
  cudaRuntimeGetVersion(&rt);
  d.runtime_version = fmt::format("{}.{}", rt / 1000, rt % 1000 / 10);
  const std::size_t dnn = cudnnGetVersion();
  d.cudnn_version = fmt::format("{}.{}.{}", dnn / 10000, dnn % 10000 / 100, dnn % 100);
  int major = 0, minor = 0, patch = 0;
  cublasGetProperty(MAJOR_VERSION, &major);
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  d.cublas_version = fmt::format("{}.{}.{}", major, minor, patch);
  return d;
}

int pick_device(int node_learner_index) {
  const int n = device_count();
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (n == 0)
    throw Error(fmt::format("--device cuda: no CUDA device visible (CUDA_VISIBLE_DEVICES={})",
                            visible ? visible : "unset"));
  if (const char* forced = std::getenv("ASGD_GPU_DEVICE")) {
    char* end = nullptr;
    const long k = std::strtol(forced, &end, 10);
    if (end == forced || *end != '\0' || k < 0 || k >= n)
      throw Error(fmt::format("ASGD_GPU_DEVICE={}: not a device index in [0, {})", forced, n));
    return static_cast<int>(k);
  }
  return std::max(node_learner_index, 0) % n;
}

struct Net::Impl {
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
  DevBuf<std::int32_t> labels, row_wrong;
  DevBuf<double> row_loss;
  DevBuf<unsigned char> workspace;
  TensorDesc logits_d;
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

  void ensure_workspace(std::size_t bytes) {
    if (bytes > workspace.size()) {
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      workspace.resize(bytes);
    }
  }

  // Descriptors of a layer for batch n (host-only calls, cheap): NHWC where
  // cuDNN sees the spatial layout, rows of values elsewhere.
  static void describe(GpuLayer& L, index_t n) {
    if (L.mode == Mode::conv || L.mode == Mode::pool_cudnn || L.mode == Mode::lrn_cudnn) {
      set_nhwc(L.xd, n, L.s.in);
      set_nhwc(L.yd, n, L.s.out);
      // NHWC is rows of F values: the bias ops see it that way (cuDNN's NHWC
      // bias paths are reported far slower than the plain row form).
      if (L.mode == Mode::conv) set_rows(L.rows_d, n * L.s.out.h * L.s.out.w, L.s.units);
    } else {
      set_rows(L.xd, n, L.s.in.size());
      set_rows(L.yd, n, L.s.out.size());
    }
  }

  const ConvAlgos& conv_algos(GpuLayer& L, index_t n) {
    auto it = L.algos.find(n);
    if (it != L.algos.end()) return it->second;
    ConvAlgos a;
    constexpr int kMax = 16;
    int got = 0;
    {
      cudnnConvolutionFwdAlgoPerf_t perf[kMax];
      check(cudnnGetConvolutionForwardAlgorithm_v7(dnn, L.xd, L.fd, L.cd, L.yd, kMax, &got, perf),
            "cudnnGetConvolutionForwardAlgorithm_v7");
      const auto& p = first_usable(perf, got, "forward", L.s.name);
      a.fwd = p.algo;
      a.workspace = std::max(a.workspace, p.memory);
    }
    {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[kMax];
      check(cudnnGetConvolutionBackwardFilterAlgorithm_v7(dnn, L.xd, L.yd, L.cd, L.fd, kMax, &got,
                                                          perf),
            "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
      const auto& p = first_usable(perf, got, "backward-filter", L.s.name);
      a.bwd_filter = p.algo;
      a.workspace = std::max(a.workspace, p.memory);
    }
    if (L.need_dx) {
      cudnnConvolutionBwdDataAlgoPerf_t perf[kMax];
      check(cudnnGetConvolutionBackwardDataAlgorithm_v7(dnn, L.fd, L.yd, L.cd, L.xd, kMax, &got,
                                                        perf),
            "cudnnGetConvolutionBackwardDataAlgorithm_v7");
      const auto& p = first_usable(perf, got, "backward-data", L.s.name);
      a.bwd_data = p.algo;
      a.workspace = std::max(a.workspace, p.memory);
    }
    ensure_workspace(a.workspace);
    return L.algos.emplace(n, a).first->second;
  }

  void build() {
    index_t widest = spec.input.size();
    for (std::size_t i = 0; i < spec.layers.size(); ++i) {
      GpuLayer& L = layers.emplace_back();
      L.s = spec.layers[i];
      const LayerSpec& s = L.s;
      L.need_dx = i != 0;
      widest = std::max(widest, s.out.size());
      if (max_batch * std::max(s.in.size(), s.out.size()) > INT_MAX)
        throw Error(fmt::format("GPU: layer {} at batch {} exceeds 2^31 elements", s.name, max_batch));
      const nn::LayerKind kind = nn::layer_kind(s);  // parsed once, here
      if (kind == nn::LayerKind::conv) {
        L.mode = Mode::conv;
        check(cudnnSetFilter4dDescriptor(L.fd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC,
                                         to_int(s.units, "filters"), to_int(s.in.c, "channels"),
                                         to_int(s.k, "kernel"), to_int(s.k, "kernel")),
              "cudnnSetFilter4dDescriptor");
        check(cudnnSetConvolution2dDescriptor(L.cd, to_int(s.pad, "pad"), to_int(s.pad, "pad"),
                                              to_int(s.stride, "stride"), to_int(s.stride, "stride"),
                                              1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
              "cudnnSetConvolution2dDescriptor");
        check(cudnnSetConvolutionMathType(L.cd, tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH),
              "cudnnSetConvolutionMathType");
        check(cudnnSetTensor4dDescriptor(L.bias_d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1,
                                         to_int(s.units, "filters"), 1, 1),
              "cudnnSetTensor4dDescriptor");
        L.wt.resize(static_cast<std::size_t>(L.k_len() * s.units));
        L.dwt.resize(static_cast<std::size_t>(L.k_len() * s.units));
        // geam reads its B operand (wt itself, scaled by 0): no NaN garbage in it
        check(cudaMemsetAsync(L.wt.get(), 0, L.wt.size() * sizeof(float), stream), "cudaMemsetAsync");
      } else if (kind == nn::LayerKind::dense) {
        L.mode = Mode::dense;
        check(cudnnSetTensor4dDescriptor(L.bias_d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1,
                                         to_int(s.units, "outputs"), 1, 1),
              "cudnnSetTensor4dDescriptor");
      } else if (kind == nn::LayerKind::maxpool || kind == nn::LayerKind::avgpool) {
        const bool max = kind == nn::LayerKind::maxpool;
        const bool tiles = (s.in.h - s.k) % s.stride == 0 && (s.in.w - s.k) % s.stride == 0 &&
                           s.out.h == (s.in.h - s.k) / s.stride + 1 &&
                           s.out.w == (s.in.w - s.k) / s.stride + 1;
        if (tiles) {
          L.mode = Mode::pool_cudnn;
          check(cudnnSetPooling2dDescriptor(
                    L.pd, max ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
                    CUDNN_NOT_PROPAGATE_NAN, to_int(s.k, "pool"), to_int(s.k, "pool"), 0, 0,
                    to_int(s.stride, "stride"), to_int(s.stride, "stride")),
                "cudnnSetPooling2dDescriptor");
        } else {
          L.mode = max ? Mode::maxpool_own : Mode::avgpool_own;
          if (max) L.argmax.resize(static_cast<std::size_t>(max_batch * s.out.size()));
        }
      } else if (kind == nn::LayerKind::lrn) {
        const bool cudnn_can = s.cross_map && s.size >= CUDNN_LRN_MIN_N && s.size <= CUDNN_LRN_MAX_N &&
                               s.k_const >= CUDNN_LRN_MIN_K && s.beta >= CUDNN_LRN_MIN_BETA;
        if (cudnn_can) {
          L.mode = Mode::lrn_cudnn;
          check(cudnnSetLRNDescriptor(L.ld, static_cast<unsigned>(s.size), s.alpha, s.beta, s.k_const),
                "cudnnSetLRNDescriptor");
        } else {
          L.mode = Mode::lrn_own;
          L.aux.resize(static_cast<std::size_t>(max_batch * s.in.size()));
          L.t.resize(static_cast<std::size_t>(max_batch * s.in.size()));
        }
      } else if (kind == nn::LayerKind::relu) {
        L.mode = Mode::relu;
        check(cudnnSetActivationDescriptor(L.ad, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0),
              "cudnnSetActivationDescriptor");
      } else if (kind == nn::LayerKind::dropout) {
        L.mode = Mode::dropout;
        L.aux.resize(static_cast<std::size_t>(max_batch * s.in.size()));
        check(cudaMemsetAsync(L.aux.get(), 0, L.aux.size() * sizeof(float), stream), "cudaMemsetAsync");
      } else {
        throw Error(fmt::format("GPU: layer {} has kind '{}' the CUDA path does not know", s.name, s.kind));
      }
      acts.emplace_back(static_cast<std::size_t>(max_batch * s.out.size()));
    }
    grad_a.resize(static_cast<std::size_t>(max_batch * widest));
    grad_b.resize(static_cast<std::size_t>(max_batch * widest));
    dlogits.resize(static_cast<std::size_t>(max_batch * spec.classes));
    probs.resize(static_cast<std::size_t>(max_batch * spec.classes));
    x.resize(static_cast<std::size_t>(max_batch * spec.input.size()));
    labels.resize(static_cast<std::size_t>(max_batch));
    row_loss.resize(static_cast<std::size_t>(max_batch));
    row_wrong.resize(static_cast<std::size_t>(max_batch));
    host_loss.resize(static_cast<std::size_t>(max_batch));
    host_wrong.resize(static_cast<std::size_t>(max_batch));
    // Algorithms for the training batch now, so the first step is not slower.
    for (auto& L : layers)
      if (L.mode == Mode::conv) {
        describe(L, max_batch);
        conv_algos(L, max_batch);
      }
  }

  float* w(const GpuLayer& L) const { return params.get() + L.s.offset; }
  float* b(const GpuLayer& L) const { return params.get() + L.s.offset + L.s.n_params - L.s.units; }
  float* dw(const GpuLayer& L) const { return grads.get() + L.s.offset; }
  float* db(const GpuLayer& L) const { return grads.get() + L.s.offset + L.s.n_params - L.s.units; }

  void forward(GpuLayer& L, index_t n, const float* in, float* out, bool train, std::uint64_t seed) {
    const LayerSpec& s = L.s;
    describe(L, n);
    switch (L.mode) {
      case Mode::conv: {
        const ConvAlgos& a = conv_algos(L, n);
        const int K = to_int(L.k_len(), "K"), F = to_int(s.units, "F");
        check(cublasSgeam(blas, CUBLAS_OP_T, CUBLAS_OP_N, K, F, &kOne, w(L), F, &kZero, L.wt.get(),
                          K, L.wt.get(), K),
              "cublasSgeam (weights to KRSC)");
        check(cudnnConvolutionForward(dnn, &kOne, L.xd, in, L.fd, L.wt.get(), L.cd, a.fwd,
                                      workspace.get(), workspace.size(), &kZero, L.yd, out),
              "cudnnConvolutionForward");
        check(cudnnAddTensor(dnn, &kOne, L.bias_d, b(L), &kOne, L.rows_d, out), "cudnnAddTensor (bias)");
        break;
      }
      case Mode::dense: {
        const int M = to_int(s.units, "M"), K = to_int(s.in.size(), "K"), N = to_int(n, "batch");
        // y^T (M x N) = W (M x K, stored as K x M) * x^T (K x N)
        check(cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, M, N, K, &kOne, w(L), K, in, K, &kZero,
                          out, M),
              "cublasSgemm (dense forward)");
        check(cudnnAddTensor(dnn, &kOne, L.bias_d, b(L), &kOne, L.yd, out), "cudnnAddTensor (bias)");
        break;
      }
      case Mode::pool_cudnn:
        check(cudnnPoolingForward(dnn, L.pd, &kOne, L.xd, in, &kZero, L.yd, out), "cudnnPoolingForward");
        break;
      case Mode::maxpool_own:
        kern::maxpool_forward(stream, pool_geom(s, n), in, out, L.argmax.get());
        check_launch("maxpool_forward");
        break;
      case Mode::avgpool_own:
        kern::avgpool_forward(stream, pool_geom(s, n), in, out);
        check_launch("avgpool_forward");
        break;
      case Mode::lrn_cudnn:
        check(cudnnLRNCrossChannelForward(dnn, L.ld, CUDNN_LRN_CROSS_CHANNEL_DIM1, &kOne, L.xd, in,
                                          &kZero, L.yd, out),
              "cudnnLRNCrossChannelForward");
        break;
      case Mode::lrn_own:
        kern::lrn_forward(stream, lrn_geom(s, n), in, L.aux.get(), out);
        check_launch("lrn_forward");
        break;
      case Mode::relu:
        check(cudnnActivationForward(dnn, L.ad, &kOne, L.xd, in, &kZero, L.yd, out),
              "cudnnActivationForward");
        break;
      case Mode::dropout:
        if (train) {
          kern::dropout_forward(stream, n * s.in.size(), s.p, seed, in, L.aux.get(), out);
          check_launch("dropout_forward");
        } else {
          check(cudaMemcpyAsync(out, in, static_cast<std::size_t>(n * s.in.size()) * sizeof(float),
                                cudaMemcpyDeviceToDevice, stream),
                "cudaMemcpyAsync (dropout, eval)");
        }
        break;
    }
  }

  // dx == nullptr: no input gradient wanted.
  void backward(GpuLayer& L, index_t n, const float* in, const float* out, const float* dy, float* dx) {
    const LayerSpec& s = L.s;
    describe(L, n);
    switch (L.mode) {
      case Mode::conv: {
        const ConvAlgos& a = conv_algos(L, n);
        const int K = to_int(L.k_len(), "K"), F = to_int(s.units, "F");
        check(cudnnConvolutionBackwardBias(dnn, &kOne, L.rows_d, dy, &kOne, L.bias_d, db(L)),
              "cudnnConvolutionBackwardBias");
        check(cudnnConvolutionBackwardFilter(dnn, &kOne, L.xd, in, L.yd, dy, L.cd, a.bwd_filter,
                                             workspace.get(), workspace.size(), &kZero, L.fd,
                                             L.dwt.get()),
              "cudnnConvolutionBackwardFilter");
        check(cublasSgeam(blas, CUBLAS_OP_T, CUBLAS_OP_N, F, K, &kOne, L.dwt.get(), K, &kOne, dw(L),
                          F, dw(L), F),
              "cublasSgeam (weight gradient to [K, F])");
        if (dx != nullptr)
          check(cudnnConvolutionBackwardData(dnn, &kOne, L.fd, L.wt.get(), L.yd, dy, L.cd, a.bwd_data,
                                             workspace.get(), workspace.size(), &kZero, L.xd, dx),
                "cudnnConvolutionBackwardData");
        break;
      }
      case Mode::dense: {
        const int M = to_int(s.units, "M"), K = to_int(s.in.size(), "K"), N = to_int(n, "batch");
        // dW^T (K x M, the [M, K] buffer) += x^T (K x N) * dy (N x M, stored as M x N)
        check(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, K, M, N, &kOne, in, K, dy, M, &kOne,
                          dw(L), K),
              "cublasSgemm (dense weight gradient)");
        check(cudnnConvolutionBackwardBias(dnn, &kOne, L.yd, dy, &kOne, L.bias_d, db(L)),
              "cudnnConvolutionBackwardBias (dense)");
        if (dx != nullptr)
          // dx^T (K x N) = W^T (K x M, stored so) * dy^T (M x N)
          check(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, K, N, M, &kOne, w(L), K, dy, M, &kZero,
                            dx, K),
                "cublasSgemm (dense input gradient)");
        break;
      }
      case Mode::pool_cudnn:
        if (dx != nullptr)
          check(cudnnPoolingBackward(dnn, L.pd, &kOne, L.yd, out, L.yd, dy, L.xd, in, &kZero, L.xd, dx),
                "cudnnPoolingBackward");
        break;
      case Mode::maxpool_own:
        if (dx != nullptr) {
          kern::maxpool_backward(stream, pool_geom(s, n), L.argmax.get(), dy, dx);
          check_launch("maxpool_backward");
        }
        break;
      case Mode::avgpool_own:
        if (dx != nullptr) {
          kern::avgpool_backward(stream, pool_geom(s, n), dy, dx);
          check_launch("avgpool_backward");
        }
        break;
      case Mode::lrn_cudnn:
        if (dx != nullptr)
          check(cudnnLRNCrossChannelBackward(dnn, L.ld, CUDNN_LRN_CROSS_CHANNEL_DIM1, &kOne, L.yd, out,
                                             L.yd, dy, L.xd, in, &kZero, L.xd, dx),
                "cudnnLRNCrossChannelBackward");
        break;
      case Mode::lrn_own:
        if (dx != nullptr) {
          kern::lrn_backward(stream, lrn_geom(s, n), in, out, L.aux.get(), dy, L.t.get(), dx);
          check_launch("lrn_backward");
        }
        break;
      case Mode::relu:
        if (dx != nullptr)
          check(cudnnActivationBackward(dnn, L.ad, &kOne, L.yd, out, L.yd, dy, L.xd, in, &kZero,
                                        L.xd, dx),
                "cudnnActivationBackward");
        break;
      case Mode::dropout:
        if (dx != nullptr) {
          kern::multiply(stream, n * s.in.size(), dy, L.aux.get(), dx);
          check_launch("dropout_backward");
        }
        break;
    }
  }

  void copy(void* dst, const void* src, std::size_t floats, const char* what, bool staging_copy) {
    const auto t0 = std::chrono::steady_clock::now();
    check(cudaMemcpyAsync(dst, src, floats * sizeof(float), cudaMemcpyDefault, stream), what);
    check(cudaStreamSynchronize(stream), what);
    if (staging_copy) staging += since(t0);
  }
};

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

double sgemm_gflops(int device, int m, int repeats) {
  check(cudaSetDevice(device), "cudaSetDevice");
  const auto len = static_cast<std::size_t>(m) * static_cast<std::size_t>(m);
  DevBuf<float> a(len), b(len), c(len);
  check(cudaMemset(a.get(), 0, len * sizeof(float)), "cudaMemset");
  check(cudaMemset(b.get(), 0, len * sizeof(float)), "cudaMemset");
  cublasHandle_t h = nullptr;
  check(cublasCreate(&h), "cublasCreate");
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  float ms = 0;
  try {
    check(cublasSetMathMode(h, env_on("ASGD_CUDA_TF32") ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
          "cublasSetMathMode");
    for (int i = 0; i < 2; ++i)
      check(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &kOne, a.get(), m, b.get(), m, &kZero,
                        c.get(), m),
            "cublasSgemm");
    check(cudaEventCreate(&e0), "cudaEventCreate");
    check(cudaEventCreate(&e1), "cudaEventCreate");
    check(cudaEventRecord(e0), "cudaEventRecord");
    for (int i = 0; i < repeats; ++i)
      check(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &kOne, a.get(), m, b.get(), m, &kZero,
                        c.get(), m),
            "cublasSgemm");
    check(cudaEventRecord(e1), "cudaEventRecord");
    check(cudaEventSynchronize(e1), "cudaEventSynchronize");
    check(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
  } catch (...) {
    cublasDestroy(h);
    throw;
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cublasDestroy(h);
  return 2.0 * static_cast<double>(m) * m * m * repeats / (static_cast<double>(ms) * 1e-3) / 1e9;
}

}  // namespace asgd::gpu
