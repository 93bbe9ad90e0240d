#pragma once
// Plain host reference versions of every kernel (kernels/kernels.hpp), one
// *_ref.hpp beside each family, templated on the scalar so tests can run them
// in double for finite-difference checks.
// Same layouts and conventions: NHWC, weights [M, K] / [KH*KW*C, F],
// parameter gradients accumulate, input gradients are overwritten.
#include "kernels/activation_ref.hpp"
#include "kernels/conv_ref.hpp"
#include "kernels/dense_ref.hpp"
#include "kernels/loss_ref.hpp"
#include "kernels/lrn_ref.hpp"
#include "kernels/pool_ref.hpp"
#include "kernels/update_ref.hpp"
