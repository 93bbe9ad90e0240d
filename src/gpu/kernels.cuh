#pragma once
// The CUDA kernels of the native GPU path (src/gpu/kernels.cu), as host
// launchers with plain signatures so net.cpp is ordinary C++. Same layouts
// as src/kernels (NHWC; parameter gradients accumulate, input gradients are
// overwritten); the per-element bodies are kernels/elementwise.hpp's, the ones
// the CPU kernels use.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/elementwise.hpp"  // layering: header only (the per-element bodies)

namespace asgd::gpu::kern {

using idx = std::int64_t;

// inc = m*inc - lr*(gs*g + wd*w); w += inc
void sgd_update(cudaStream_t s, idx len, float lr, float m, float wd, float gs, const float* g,
                float* inc, float* w);
// out = a - b
void subtract(cudaStream_t s, idx len, const float* a, const float* b, float* out);
// out = a * b (dropout backward: dx = dy * scale)
void multiply(cudaStream_t s, idx len, const float* a, const float* b, float* out);
// Inverted dropout with the CPU's counter-based mask: scale = 0 or 1/(1-p).
void dropout_forward(cudaStream_t s, idx len, float p, std::uint64_t seed, const float* x,
                     float* scale, float* y);
// Per row r of logits[n, m] (probs = softmax of logits, from cuDNN):
// row_loss[r] = logsumexp(z) - z[label], row_wrong[r] = argmax(z) != label,
// and when dlogits: dlogits = (probs - onehot) * grad_scale.
void softmax_xent(cudaStream_t s, idx n, idx m, const float* logits, const float* probs,
                  const std::int32_t* labels, float grad_scale, float* dlogits, double* row_loss,
                  std::int32_t* row_wrong);

// cuda-convnet ceil-mode pooling (first window at 0, clipped at the far edge;
// square windows: kh == kw, no padding).
using Pool = kernels::Window;
void maxpool_forward(cudaStream_t s, const Pool& g, const float* x, float* y, std::int32_t* argmax);
void maxpool_backward(cudaStream_t s, const Pool& g, const std::int32_t* argmax, const float* dy,
                      float* dx);
void avgpool_forward(cudaStream_t s, const Pool& g, const float* x, float* y);
void avgpool_backward(cudaStream_t s, const Pool& g, const float* dy, float* dx);

// LRN, same-map (size x size pixels of one channel) or cross-map (size
// channels of one pixel): y = x * (k + alpha/S * sum x^2)^-beta.
using Lrn = kernels::LrnParams;
void lrn_forward(cudaStream_t s, const Lrn& g, const float* x, float* denom, float* y);
void lrn_backward(cudaStream_t s, const Lrn& g, const float* x, const float* y, const float* denom,
                  const float* dy, float* t, float* dx);

}  // namespace asgd::gpu::kern
