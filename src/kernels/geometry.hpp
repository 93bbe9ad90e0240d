#pragma once
// Geometry of the window operations (convolution, pooling, LRN) as plain
// data, with the host-side checks that throw asgd::Error. No Kokkos: the zoo
// (nn/zoo.hpp) computes shapes and parameter counts from these without it.
#include <fmt/format.h>

#include "common/error.hpp"
#include "common/types.hpp"

namespace asgd::kernels {

// Geometry of a 2-D window operation (convolution or pooling) on NHWC data.
struct Window {
  index_t n = 0, h = 0, w = 0, c = 0;  // input
  index_t kh = 1, kw = 1;              // window
  index_t stride = 1, pad = 0;
  index_t oh = 0, ow = 0;              // output (set by conv_window / pool_window)
};

// Output size of a convolution: floor((H + 2*pad - KH) / stride) + 1.
inline Window conv_window(index_t n, index_t h, index_t w, index_t c, index_t k, index_t stride,
                          index_t pad) {
  if (k < 1 || stride < 1 || pad < 0 || h + 2 * pad < k || w + 2 * pad < k)
    throw Error(fmt::format("conv window: kernel {} stride {} pad {} does not fit input {}x{}", k,
                            stride, pad, h, w));
  Window g{n, h, w, c, k, k, stride, pad, 0, 0};
  g.oh = (h + 2 * pad - k) / stride + 1;
  g.ow = (w + 2 * pad - k) / stride + 1;
  return g;
}

// Output size of a pooling window, cuda-convnet's ceil mode (start 0):
// ceil((H - K) / stride) + 1; windows that run past the edge are clipped.
// When stride > size that count can include a last window starting at or past
// the edge (empty); like Caffe, drop it, so every window holds >= 1 element.
inline Window pool_window(index_t n, index_t h, index_t w, index_t c, index_t k, index_t stride) {
  if (k < 1 || stride < 1 || h < k || w < k)
    throw Error(fmt::format("pool window: size {} stride {} does not fit input {}x{}", k, stride,
                            h, w));
  Window g{n, h, w, c, k, k, stride, 0, 0, 0};
  g.oh = (h - k + stride - 1) / stride + 1;
  g.ow = (w - k + stride - 1) / stride + 1;
  if ((g.oh - 1) * stride >= h) --g.oh;
  if ((g.ow - 1) * stride >= w) --g.ow;
  return g;
}

// Local response normalisation, cuda-convnet style (kernels/lrn.hpp):
// same-map windows are size x size pixels of one channel, cross-map windows
// size neighbouring channels of one pixel; centred (size odd), clipped.
struct LrnParams {
  index_t n = 0, h = 0, w = 0, c = 0;
  index_t size = 3;
  real_t alpha = real_t(1e-4), beta = real_t(0.75), k = real_t(1);
  bool cross_map = false;
};

inline void check_lrn(const LrnParams& p) {
  if (p.size < 1 || p.size % 2 == 0)
    throw Error(fmt::format("lrn: size {} must be odd and positive", p.size));
}

}  // namespace asgd::kernels
