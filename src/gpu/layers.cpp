// The layers of the CUDA net (Net::Impl, net_impl.hpp): building them from
// the spec (mode, cuDNN descriptors, buffers), the algorithms cuDNN picks per
// batch size, and each layer's forward and backward pass.
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
#include <algorithm>
#include <climits>
#include <string>

#include "gpu/kernels.cuh"
#include "gpu/net_impl.hpp"
#include "nn/zoo.hpp"

namespace asgd::gpu {

using namespace detail;  // NOLINT(google-build-using-namespace): src/gpu's own helpers
using nn::LayerSpec;

namespace {

constexpr std::size_t kWorkspaceCap = std::size_t(1) << 30;  // per-algorithm limit

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

// The algorithm of the first usable entry of the ranking `find` returns (one
// of cuDNN's Get*Algorithm_v7 calls, given the count wanted and where to put
// the count got and the entries); workspace grows to that algorithm's need.
template <class Perf, class Find>
auto best_algo(Find find, const char* api, const char* pass, const std::string& layer,
               std::size_t& workspace) {
  constexpr int kMax = 16;
  Perf perf[kMax];
  int got = 0;
  check(find(kMax, &got, perf), api);
  const Perf& p = first_usable(perf, got, pass, layer);
  workspace = std::max(workspace, p.memory);
  return p.algo;
}

kern::Pool pool_geom(const LayerSpec& s, index_t n) {
  return {n, s.in.h, s.in.w, s.in.c, s.k, s.k, s.stride, 0, s.out.h, s.out.w};
}
kern::Lrn lrn_geom(const LayerSpec& s, index_t n) {
  return {n, s.in.h, s.in.w, s.in.c, s.size, s.alpha, s.beta, s.k_const, s.cross_map};
}

}  // namespace

// Descriptors of a layer for batch n (host-only calls, cheap): NHWC where
// cuDNN sees the spatial layout, rows of values elsewhere.
void Net::Impl::describe(GpuLayer& L, index_t n) {
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

const ConvAlgos& Net::Impl::conv_algos(GpuLayer& L, index_t n) {
  auto it = L.algos.find(n);
  if (it != L.algos.end()) return it->second;
  ConvAlgos a;
  a.fwd = best_algo<cudnnConvolutionFwdAlgoPerf_t>(
      [&](int k, int* got, cudnnConvolutionFwdAlgoPerf_t* perf) {
        return cudnnGetConvolutionForwardAlgorithm_v7(dnn, L.xd, L.fd, L.cd, L.yd, k, got, perf);
      },
      "cudnnGetConvolutionForwardAlgorithm_v7", "forward", L.s.name, a.workspace);
  a.bwd_filter = best_algo<cudnnConvolutionBwdFilterAlgoPerf_t>(
      [&](int k, int* got, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
        return cudnnGetConvolutionBackwardFilterAlgorithm_v7(dnn, L.xd, L.yd, L.cd, L.fd, k, got, perf);
      },
      "cudnnGetConvolutionBackwardFilterAlgorithm_v7", "backward-filter", L.s.name, a.workspace);
  if (L.need_dx)
    a.bwd_data = best_algo<cudnnConvolutionBwdDataAlgoPerf_t>(
        [&](int k, int* got, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
          return cudnnGetConvolutionBackwardDataAlgorithm_v7(dnn, L.fd, L.yd, L.cd, L.xd, k, got, perf);
        },
        "cudnnGetConvolutionBackwardDataAlgorithm_v7", "backward-data", L.s.name, a.workspace);
  ensure_workspace(a.workspace);
  return L.algos.emplace(n, a).first->second;
}

void Net::Impl::build() {
  index_t widest = spec.input.size();
  for (std::size_t i = 0; i < spec.layers.size(); ++i) {
    GpuLayer& L = layers.emplace_back();
    L.s = spec.layers[i];
    const LayerSpec& s = L.s;
    L.need_dx = i != 0;
    widest = std::max(widest, s.out.size());
    if (max_batch * std::max(s.in.size(), s.out.size()) > INT_MAX)
      throw Error(fmt::format("GPU: layer {} at batch {} exceeds 2^31 elements", s.name, max_batch));
    set_up(L);
    acts.emplace_back(static_cast<std::size_t>(max_batch * s.out.size()));
  }
  allocate_step_buffers(widest);
  // Algorithms for the training batch now, so the first step is not slower.
  for (auto& L : layers)
    if (L.mode == Mode::conv) {
      describe(L, max_batch);
      conv_algos(L, max_batch);
    }
}

void Net::Impl::set_up(GpuLayer& L) {
  const LayerSpec& s = L.s;
  switch (nn::layer_kind(s)) {  // parsed once, here
    case nn::LayerKind::conv: return set_up_conv(L);
    case nn::LayerKind::dense:
      L.mode = Mode::dense;
      check(cudnnSetTensor4dDescriptor(L.bias_d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1,
                                       to_int(s.units, "outputs"), 1, 1),
            "cudnnSetTensor4dDescriptor");
      return;
    case nn::LayerKind::maxpool: return set_up_pool(L, true);
    case nn::LayerKind::avgpool: return set_up_pool(L, false);
    case nn::LayerKind::lrn: return set_up_lrn(L);
    case nn::LayerKind::relu:
      L.mode = Mode::relu;
      check(cudnnSetActivationDescriptor(L.ad, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0),
            "cudnnSetActivationDescriptor");
      return;
    case nn::LayerKind::dropout:
      L.mode = Mode::dropout;
      L.aux.resize(static_cast<std::size_t>(max_batch * s.in.size()));
      check(cudaMemsetAsync(L.aux.get(), 0, L.aux.size() * sizeof(float), stream), "cudaMemsetAsync");
      return;
  }
  throw Error(fmt::format("GPU: layer {} has kind '{}' the CUDA path does not know", s.name, s.kind));
}

void Net::Impl::set_up_conv(GpuLayer& L) {
  const LayerSpec& s = L.s;
  L.mode = Mode::conv;
  check(cudnnSetFilter4dDescriptor(L.fd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, to_int(s.units, "filters"),
                                   to_int(s.in.c, "channels"), to_int(s.k, "kernel"),
                                   to_int(s.k, "kernel")),
        "cudnnSetFilter4dDescriptor");
  check(cudnnSetConvolution2dDescriptor(L.cd, to_int(s.pad, "pad"), to_int(s.pad, "pad"),
                                        to_int(s.stride, "stride"), to_int(s.stride, "stride"), 1, 1,
                                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
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
}

// cuDNN when the windows tile the input exactly, else our ceil-mode kernels.
void Net::Impl::set_up_pool(GpuLayer& L, bool max) {
  const LayerSpec& s = L.s;
  const bool tiles = (s.in.h - s.k) % s.stride == 0 && (s.in.w - s.k) % s.stride == 0 &&
                     s.out.h == (s.in.h - s.k) / s.stride + 1 && s.out.w == (s.in.w - s.k) / s.stride + 1;
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
}

// cuDNN for the cross-map windows it takes, else our kernels.
void Net::Impl::set_up_lrn(GpuLayer& L) {
  const LayerSpec& s = L.s;
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
}

// The step's buffers: activation gradients (ping-pong, `widest` values a
// sample), logits' gradient and probabilities, the batch, its labels, the
// per-row loss and errors and their host copies, the ones the bias gradients sum with.
void Net::Impl::allocate_step_buffers(index_t widest) {
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
  index_t rows = 1;  // per sample, the most rows a bias gradient sums
  for (const auto& L : layers)
    if (L.mode == Mode::conv) rows = std::max(rows, L.s.out.h * L.s.out.w);
  const std::vector<float> host_ones(static_cast<std::size_t>(max_batch * rows), 1.0f);
  ones.resize(host_ones.size());
  copy(ones.get(), host_ones.data(), host_ones.size(), "copy ones to the GPU", false);
}

// db (f values) += the sum of the rows of dy (rows x f, row-major: a dense
// layer's batch, a convolution's NHWC positions): one cuBLAS GEMV against a
// vector of ones. cuDNN's bias-gradient kernel (cudnnConvolutionBackwardBias)
// reduces these long, narrow rows with little parallelism: on an H200 it took
// 31 ms of lenet's 33 ms step at batch 64 (Nsight Compute).
void Net::Impl::bias_grad(const float* dy, index_t rows, index_t f, float* db) {
  const int F = to_int(f, "bias width"), R = to_int(rows, "bias rows");
  check(cublasSgemv(blas, CUBLAS_OP_N, F, R, &kOne, dy, F, ones.get(), 1, &kOne, db, 1),
        "cublasSgemv (bias gradient)");
}

// Convolution: the weights transposed to KRSC, cuDNN's forward, the bias.
void Net::Impl::conv_forward(GpuLayer& L, index_t n, const float* in, float* out) {
  const LayerSpec& s = L.s;
  const ConvAlgos& a = conv_algos(L, n);
  const int K = to_int(L.k_len(), "K"), F = to_int(s.units, "F");
  check(cublasSgeam(blas, CUBLAS_OP_T, CUBLAS_OP_N, K, F, &kOne, w(L), F, &kZero, L.wt.get(),
                    K, L.wt.get(), K),
        "cublasSgeam (weights to KRSC)");
  check(cudnnConvolutionForward(dnn, &kOne, L.xd, in, L.fd, L.wt.get(), L.cd, a.fwd,
                                workspace.get(), workspace.size(), &kZero, L.yd, out),
        "cudnnConvolutionForward");
  check(cudnnAddTensor(dnn, &kOne, L.bias_d, b(L), &kOne, L.rows_d, out), "cudnnAddTensor (bias)");
}

// Dense: y^T = W x^T by cuBLAS, the bias.
void Net::Impl::dense_forward(GpuLayer& L, index_t n, const float* in, float* out) {
  const LayerSpec& s = L.s;
  const int M = to_int(s.units, "M"), K = to_int(s.in.size(), "K"), N = to_int(n, "batch");
  // y^T (M x N) = W (M x K, stored as K x M) * x^T (K x N)
  check(cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, M, N, K, &kOne, w(L), K, in, K, &kZero,
                    out, M),
        "cublasSgemm (dense forward)");
  check(cudnnAddTensor(dnn, &kOne, L.bias_d, b(L), &kOne, L.yd, out), "cudnnAddTensor (bias)");
}

// Convolution: the bias and filter gradients (the filter's back to [K, F],
// accumulated), the input gradient when dx is wanted.
void Net::Impl::conv_backward(GpuLayer& L, index_t n, const float* in, const float* dy, float* dx) {
  const LayerSpec& s = L.s;
  const ConvAlgos& a = conv_algos(L, n);
  const int K = to_int(L.k_len(), "K"), F = to_int(s.units, "F");
  bias_grad(dy, n * s.out.h * s.out.w, s.units, db(L));
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
}

// Dense: the weight and bias gradients (accumulated), the input gradient when dx is wanted.
void Net::Impl::dense_backward(GpuLayer& L, index_t n, const float* in, const float* dy, float* dx) {
  const LayerSpec& s = L.s;
  const int M = to_int(s.units, "M"), K = to_int(s.in.size(), "K"), N = to_int(n, "batch");
  // dW^T (K x M, the [M, K] buffer) += x^T (K x N) * dy (N x M, stored as M x N)
  check(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, K, M, N, &kOne, in, K, dy, M, &kOne,
                    dw(L), K),
        "cublasSgemm (dense weight gradient)");
  bias_grad(dy, n, s.units, db(L));
  if (dx != nullptr)
    // dx^T (K x N) = W^T (K x M, stored so) * dy^T (M x N)
    check(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, K, N, M, &kOne, w(L), K, dy, M, &kZero,
                      dx, K),
          "cublasSgemm (dense input gradient)");
}

void Net::Impl::forward(GpuLayer& L, index_t n, const float* in, float* out, bool train, std::uint64_t seed) {
  const LayerSpec& s = L.s;
  describe(L, n);
  switch (L.mode) {
    case Mode::conv:
      conv_forward(L, n, in, out);
      break;
    case Mode::dense:
      dense_forward(L, n, in, out);
      break;
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

void Net::Impl::backward(GpuLayer& L, index_t n, const float* in, const float* out, const float* dy, float* dx) {
  const LayerSpec& s = L.s;
  describe(L, n);
  switch (L.mode) {
    case Mode::conv:
      conv_backward(L, n, in, dy, dx);
      break;
    case Mode::dense:
      dense_backward(L, n, in, dy, dx);
      break;
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

}  // namespace asgd::gpu
