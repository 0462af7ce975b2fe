// tanh: y = tanh x; dx = g (1 - y^2).
// Shape contract: any shape; the output has the input's shape and dtype.
#include <cmath>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct TanhOp {
  static constexpr const char* name = "tanh";
  static constexpr kernels::Saved saved = kernels::Saved::output;
  template <typename C>
  C forward(C x) const {
    return std::tanh(x);
  }
  template <typename C>
  C backward(C g, C s) const {
    return g * (C(1) - s * s);
  }
};
}  // namespace
}  // namespace mixp::ops

// The cpu candidates, generated from the functor (kernels/elementwise_candidates.h).
namespace mixp::kernels {
UnaryForwardKernel<ops::TanhOp> tanh_forward = unary_forward_kernel<ops::TanhOp>("tanh_forward");
UnaryBackwardKernel<ops::TanhOp> tanh_backward =
    unary_backward_kernel<ops::TanhOp>("tanh_backward");
}  // namespace mixp::kernels

namespace mixp::ops {

Tensor tanh(const Tensor& x) {
  const auto cast = amp::autocast_inputs(OpKind::tanh, {&x});
  return cast.output(
      detail::unary(cast[0], TanhOp{}, kernels::tanh_forward, kernels::tanh_backward));
}

}  // namespace mixp::ops
