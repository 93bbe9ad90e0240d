#pragma once
// The SGD update rule over a flat parameter buffer (the body: elem::sgd_step).
#include "kernels/common.hpp"

namespace asgd::kernels {

// SGD update, cuda-convnet form: inc = m*inc - a*(s*g + wd*w); w += inc,
// where s scales the gradient (a parameter server's 1/c and rate factors),
// fused so the update is one pass over memory.
template <class Space>
void sgd_update(index_t len, real_t lr, real_t momentum, real_t weight_decay,
                const View1<Space>& g, const View1<Space>& inc, const View1<Space>& w,
                real_t grad_scale = real_t(1)) {
  detail::check_len("sgd_update", "g", g.extent(0), len);
  detail::check_len("sgd_update", "inc", inc.extent(0), len);
  detail::check_len("sgd_update", "w", w.extent(0), len);
  Kokkos::parallel_for(
      "asgd::sgd_update", Kokkos::RangePolicy<Space>(0, len), KOKKOS_LAMBDA(index_t i) {
        elem::sgd_step(g(i), inc(i), w(i), lr, momentum, weight_decay, grad_scale);
      });
}

// As sgd_update with the gradient acc + f*g2: the last of several gradients
// summed in the update's own pass (no pass that adds it to acc first). The
// sum is f*g2 rounded, then added to acc.
template <class Space>
void sgd_update_sum(index_t len, real_t lr, real_t momentum, real_t weight_decay,
                    const View1<Space>& acc, real_t f, const View1<Space>& g2, const View1<Space>& inc,
                    const View1<Space>& w, real_t grad_scale = real_t(1)) {
  detail::check_len("sgd_update_sum", "acc", acc.extent(0), len);
  detail::check_len("sgd_update_sum", "g2", g2.extent(0), len);
  detail::check_len("sgd_update_sum", "inc", inc.extent(0), len);
  detail::check_len("sgd_update_sum", "w", w.extent(0), len);
  Kokkos::parallel_for(
      "asgd::sgd_update_sum", Kokkos::RangePolicy<Space>(0, len), KOKKOS_LAMBDA(index_t i) {
        const real_t fg = f * g2(i);
        elem::sgd_step(acc(i) + fg, inc(i), w(i), lr, momentum, weight_decay, grad_scale);
      });
}

}  // namespace asgd::kernels
