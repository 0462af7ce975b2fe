// sigmoid: y = 1 / (1 + e^-x); dx = g y (1 - y).
// Shape contract: any shape; the output has the input's shape and dtype.
#include <cmath>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct SigmoidOp {
  static constexpr const char* name = "sigmoid";
  static constexpr kernels::Saved saved = kernels::Saved::output;
  template <typename C>
  C forward(C x) const {
    return C(1) / (C(1) + std::exp(-x));
  }
  template <typename C>
  C backward(C g, C s) const {
    return g * s * (C(1) - s);
  }
};
}  // namespace
}  // namespace mixp::ops

// The cpu candidates, generated from the functor (kernels/elementwise_candidates.h).
namespace mixp::kernels {
UnaryForwardKernel<ops::SigmoidOp> sigmoid_forward =
    unary_forward_kernel<ops::SigmoidOp>("sigmoid_forward");
UnaryBackwardKernel<ops::SigmoidOp> sigmoid_backward =
    unary_backward_kernel<ops::SigmoidOp>("sigmoid_backward");
}  // namespace mixp::kernels

namespace mixp::ops {

Tensor sigmoid(const Tensor& x) {
  const auto cast = amp::autocast_inputs(OpKind::sigmoid, {&x});
  return cast.output(
      detail::unary(cast[0], SigmoidOp{}, kernels::sigmoid_forward, kernels::sigmoid_backward));
}

}  // namespace mixp::ops
