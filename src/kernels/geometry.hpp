#pragma once
// The window operations' geometry (convolution, pooling, LRN; the structs are
// in kernels/elementwise.hpp), with the host-side checks that throw
// asgd::Error. No Kokkos: the zoo (nn/zoo.hpp) computes shapes and parameter
// counts from these without it.
#include <fmt/format.h>

#include "common/error.hpp"
#include "common/types.hpp"
#include "kernels/elementwise.hpp"

namespace asgd::kernels {

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

inline void check_lrn(const LrnParams& p) {
  if (p.size < 1 || p.size % 2 == 0)
    throw Error(fmt::format("lrn: size {} must be odd and positive", p.size));
}

}  // namespace asgd::kernels
