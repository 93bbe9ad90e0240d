#pragma once
// Every Kokkos kernel family, forward and backward (one header each, with its
// plain reference in *_ref.hpp beside it; kernels/reference.hpp includes those):
//   common.hpp      views, extent checks, conventions (NHWC, what accumulates)
//   elementwise.hpp per-element bodies shared with the CUDA path, plain structs
//   geometry.hpp    window sizes and their checks (no Kokkos)
//   update.hpp      the SGD update rule
//   dense.hpp       dense layers (GEMM)
//   conv.hpp        convolution, im2col form;  conv_rows.hpp: row-folded form;
//                   conv_direct.hpp: direct form (host, thin layers)
//   pool.hpp        max and average pooling, ceil mode
//   lrn.hpp         local response normalisation
//   activation.hpp  ReLU, dropout
//   loss.hpp        softmax cross-entropy
// Code that needs one family includes that header alone.
#include "kernels/activation.hpp"
#include "kernels/common.hpp"
#include "kernels/conv.hpp"
#include "kernels/conv_direct.hpp"
#include "kernels/conv_rows.hpp"
#include "kernels/dense.hpp"
#include "kernels/loss.hpp"
#include "kernels/lrn.hpp"
#include "kernels/pool.hpp"
#include "kernels/update.hpp"
