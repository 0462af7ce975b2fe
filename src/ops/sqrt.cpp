// sqrt: y = sqrt(x); dx = g / (2 y).
// Shape contract: any shape; the output has the input's shape and dtype.
#include <cmath>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct SqrtOp {
  static constexpr const char* name = "sqrt";
  static constexpr kernels::Saved saved = kernels::Saved::output;
  template <typename C>
  C forward(C x) const {
    return std::sqrt(x);
  }
  template <typename C>
  C backward(C g, C s) const {
    return g / (C(2) * s);
  }
};
}  // namespace
}  // namespace mixp::ops

// The cpu candidates, generated from the functor (kernels/elementwise_candidates.h).
namespace mixp::kernels {
UnaryForwardKernel<ops::SqrtOp> sqrt_forward = unary_forward_kernel<ops::SqrtOp>("sqrt_forward");
UnaryBackwardKernel<ops::SqrtOp> sqrt_backward =
    unary_backward_kernel<ops::SqrtOp>("sqrt_backward");
}  // namespace mixp::kernels

namespace mixp::ops {

Tensor sqrt(const Tensor& x) {
  const auto cast = amp::autocast_inputs(OpKind::sqrt, {&x});
  return cast.output(
      detail::unary(cast[0], SqrtOp{}, kernels::sqrt_forward, kernels::sqrt_backward));
}

}  // namespace mixp::ops
