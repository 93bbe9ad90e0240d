#include "gpu/kernels.cuh"

namespace asgd::gpu::kern {

namespace {

constexpr int kThreads = 256;

unsigned blocks(idx len) {
  const idx b = (len + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 * 64 ? 65535 * 64 : b));
}

// Grid-stride loop over [0, len).
#define ASGD_FOR(i, len)                                                              \
  for (idx i = static_cast<idx>(blockIdx.x) * blockDim.x + threadIdx.x; i < (len); \
       i += static_cast<idx>(gridDim.x) * blockDim.x)

namespace elem = asgd::kernels::elem;

// The clipped window of pooling output o (flat NHWC index).
struct PoolWin {
  idx b, c, y0, y1, x0, x1;
};
__device__ PoolWin pool_win(const Pool& g, idx o) {
  const idx c = o % g.c, ox = (o / g.c) % g.ow, oy = (o / (g.c * g.ow)) % g.oh;
  const elem::Span y = elem::pool_span(oy, g.kh, g.stride, g.h);
  const elem::Span x = elem::pool_span(ox, g.kw, g.stride, g.w);
  return {o / (g.c * g.ow * g.oh), c, y.lo, y.hi, x.lo, x.hi};
}

// The outputs whose windows hold input i (flat NHWC index), as a window
// [y0, y1] x [x0, x1] (inclusive) of output positions.
__device__ PoolWin covering_outputs(const Pool& g, idx i) {
  const idx c = i % g.c, ix = (i / g.c) % g.w, iy = (i / (g.c * g.w)) % g.h;
  const elem::OutRange ry = elem::covering(iy, g.kh, g.stride, g.oh);
  const elem::OutRange rx = elem::covering(ix, g.kw, g.stride, g.ow);
  return {i / (g.c * g.w * g.h), c, ry.lo, ry.hi, rx.lo, rx.hi};
}

__global__ void sgd_update_k(idx len, float lr, float m, float wd, float gs, const float* g,
                             float* inc, float* w) {
  ASGD_FOR(i, len) elem::sgd_step(g[i], inc[i], w[i], lr, m, wd, gs);
}

__global__ void subtract_k(idx len, const float* a, const float* b, float* out) {
  ASGD_FOR(i, len) out[i] = a[i] - b[i];
}

__global__ void multiply_k(idx len, const float* a, const float* b, float* out) {
  ASGD_FOR(i, len) out[i] = a[i] * b[i];
}

__global__ void dropout_k(idx len, float p, float keep, std::uint64_t seed, const float* x,
                          float* scale, float* y) {
  ASGD_FOR(i, len) {
    const float s = elem::dropout_scale(seed, i, p, keep);
    scale[i] = s;
    y[i] = x[i] * s;
  }
}

__global__ void xent_k(idx n, idx m, const float* logits, const float* probs,
                       const std::int32_t* labels, float grad_scale, float* dlogits,
                       double* row_loss, std::int32_t* row_wrong) {
  ASGD_FOR(r, n) {
    const float* z = logits + r * m;
    const elem::XentRow row = elem::xent_row(z, m);
    const idx lab = labels[r];
    row_loss[r] = elem::xent_loss(row, z, lab);
    row_wrong[r] = row.arg != lab ? 1 : 0;
    if (dlogits != nullptr)
      for (idx j = 0; j < m; ++j)
        dlogits[r * m + j] = elem::xent_grad(probs[r * m + j], j == lab, grad_scale);
  }
}

__global__ void maxpool_fwd_k(Pool g, const float* x, float* y, std::int32_t* argmax) {
  ASGD_FOR(o, g.n * g.oh * g.ow * g.c) {
    const PoolWin q = pool_win(g, o);
    float best = -INFINITY;
    idx at = -1;
    for (idx iy = q.y0; iy < q.y1; ++iy)
      for (idx ix = q.x0; ix < q.x1; ++ix) {
        const idx xi = ((q.b * g.h + iy) * g.w + ix) * g.c + q.c;
        if (at < 0 || x[xi] > best) {
          best = x[xi];
          at = xi;
        }
      }
    y[o] = best;
    argmax[o] = static_cast<std::int32_t>(at);
  }
}

// Gather form: every input sums the output gradients whose maximum it was.
__global__ void maxpool_bwd_k(Pool g, const std::int32_t* argmax, const float* dy, float* dx) {
  ASGD_FOR(i, g.n * g.h * g.w * g.c) {
    const PoolWin q = covering_outputs(g, i);
    float s = 0;
    for (idx oy = q.y0; oy <= q.y1; ++oy)
      for (idx ox = q.x0; ox <= q.x1; ++ox) {
        const idx o = ((q.b * g.oh + oy) * g.ow + ox) * g.c + q.c;
        if (argmax[o] == i) s += dy[o];
      }
    dx[i] = s;
  }
}

__global__ void avgpool_fwd_k(Pool g, const float* x, float* y) {
  ASGD_FOR(o, g.n * g.oh * g.ow * g.c) {
    const PoolWin q = pool_win(g, o);
    float s = 0;
    for (idx iy = q.y0; iy < q.y1; ++iy)
      for (idx ix = q.x0; ix < q.x1; ++ix) s += x[((q.b * g.h + iy) * g.w + ix) * g.c + q.c];
    y[o] = s / static_cast<float>((q.y1 - q.y0) * (q.x1 - q.x0));
  }
}

__global__ void avgpool_bwd_k(Pool g, const float* dy, float* dx) {
  ASGD_FOR(i, g.n * g.h * g.w * g.c) {
    const PoolWin q = covering_outputs(g, i);
    float s = 0;
    for (idx oy = q.y0; oy <= q.y1; ++oy)
      for (idx ox = q.x0; ox <= q.x1; ++ox) {
        const elem::Span y = elem::pool_span(oy, g.kh, g.stride, g.h);
        const elem::Span x = elem::pool_span(ox, g.kw, g.stride, g.w);
        s += dy[((q.b * g.oh + oy) * g.ow + ox) * g.c + q.c] /
             static_cast<float>((y.hi - y.lo) * (x.hi - x.lo));
      }
    dx[i] = s;
  }
}

__global__ void lrn_fwd_k(Lrn g, const float* x, float* denom, float* y) {
  const float scale = elem::lrn_scale(g);
  ASGD_FOR(i, g.n * g.h * g.w * g.c) {
    float s = 0;
    elem::lrn_window(g, i, [&](idx j) { s += x[j] * x[j]; });
    const float d = g.k + scale * s;
    denom[i] = d;
    y[i] = x[i] * powf(d, -g.beta);
  }
}

__global__ void lrn_t_k(idx len, const float* y, const float* denom, const float* dy, float* t) {
  ASGD_FOR(i, len) t[i] = dy[i] * y[i] / denom[i];
}

__global__ void lrn_bwd_k(Lrn g, const float* x, const float* denom, const float* dy,
                          const float* t, float* dx) {
  const float scale = elem::lrn_scale(g);
  ASGD_FOR(i, g.n * g.h * g.w * g.c) {
    float s = 0;
    elem::lrn_window(g, i, [&](idx j) { s += t[j]; });
    dx[i] = dy[i] * powf(denom[i], -g.beta) - 2.0f * g.beta * scale * x[i] * s;
  }
}

}  // namespace

void sgd_update(cudaStream_t s, idx len, float lr, float m, float wd, float gs, const float* g,
                float* inc, float* w) {
  sgd_update_k<<<blocks(len), kThreads, 0, s>>>(len, lr, m, wd, gs, g, inc, w);
}

void subtract(cudaStream_t s, idx len, const float* a, const float* b, float* out) {
  subtract_k<<<blocks(len), kThreads, 0, s>>>(len, a, b, out);
}

void multiply(cudaStream_t s, idx len, const float* a, const float* b, float* out) {
  multiply_k<<<blocks(len), kThreads, 0, s>>>(len, a, b, out);
}

void dropout_forward(cudaStream_t s, idx len, float p, std::uint64_t seed, const float* x,
                     float* scale, float* y) {
  dropout_k<<<blocks(len), kThreads, 0, s>>>(len, p, 1.0f / (1.0f - p), seed, x, scale, y);
}

void softmax_xent(cudaStream_t s, idx n, idx m, const float* logits, const float* probs,
                  const std::int32_t* labels, float grad_scale, float* dlogits, double* row_loss,
                  std::int32_t* row_wrong) {
  if (n == 0) return;
  xent_k<<<blocks(n), kThreads, 0, s>>>(n, m, logits, probs, labels, grad_scale, dlogits,
                                         row_loss, row_wrong);
}

void maxpool_forward(cudaStream_t s, const Pool& g, const float* x, float* y, std::int32_t* argmax) {
  maxpool_fwd_k<<<blocks(g.n * g.oh * g.ow * g.c), kThreads, 0, s>>>(g, x, y, argmax);
}

void maxpool_backward(cudaStream_t s, const Pool& g, const std::int32_t* argmax, const float* dy,
                      float* dx) {
  maxpool_bwd_k<<<blocks(g.n * g.h * g.w * g.c), kThreads, 0, s>>>(g, argmax, dy, dx);
}

void avgpool_forward(cudaStream_t s, const Pool& g, const float* x, float* y) {
  avgpool_fwd_k<<<blocks(g.n * g.oh * g.ow * g.c), kThreads, 0, s>>>(g, x, y);
}

void avgpool_backward(cudaStream_t s, const Pool& g, const float* dy, float* dx) {
  avgpool_bwd_k<<<blocks(g.n * g.h * g.w * g.c), kThreads, 0, s>>>(g, dy, dx);
}

void lrn_forward(cudaStream_t s, const Lrn& g, const float* x, float* denom, float* y) {
  lrn_fwd_k<<<blocks(g.n * g.h * g.w * g.c), kThreads, 0, s>>>(g, x, denom, y);
}

void lrn_backward(cudaStream_t s, const Lrn& g, const float* x, const float* y,
                  const float* denom, const float* dy, float* t, float* dx) {
  const idx len = g.n * g.h * g.w * g.c;
  lrn_t_k<<<blocks(len), kThreads, 0, s>>>(len, y, denom, dy, t);
  lrn_bwd_k<<<blocks(len), kThreads, 0, s>>>(g, x, denom, dy, t, dx);
}

}  // namespace asgd::gpu::kern
