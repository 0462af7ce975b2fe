// silu: y = x sigmoid(x); dx = g sigmoid(x) (1 + x (1 - sigmoid(x))).
// Shape contract: any shape; the output has the input's shape and dtype.
#include <cmath>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct SiluOp {
  static constexpr const char* name = "silu";
  static constexpr kernels::Saved saved = kernels::Saved::input;
  template <typename C>
  C forward(C x) const {
    return x / (C(1) + std::exp(-x));
  }
  template <typename C>
  C backward(C g, C s) const {
    const C sig = C(1) / (C(1) + std::exp(-s));
    return g * sig * (C(1) + s * (C(1) - sig));
  }
};
}  // namespace
}  // namespace mixp::ops

// The cpu candidates, generated from the functor (kernels/elementwise_candidates.h).
namespace mixp::kernels {
UnaryForwardKernel<ops::SiluOp> silu_forward = unary_forward_kernel<ops::SiluOp>("silu_forward");
UnaryBackwardKernel<ops::SiluOp> silu_backward =
    unary_backward_kernel<ops::SiluOp>("silu_backward");
}  // namespace mixp::kernels

namespace mixp::ops {

Tensor silu(const Tensor& x) {
  const auto cast = amp::autocast_inputs(OpKind::silu, {&x});
  return cast.output(
      detail::unary(cast[0], SiluOp{}, kernels::silu_forward, kernels::silu_backward));
}

}  // namespace mixp::ops
