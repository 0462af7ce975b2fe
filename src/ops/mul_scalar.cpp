// mul_scalar: y = x * s; dx = g * s.
// Shape contract: any shape; the output has the input's shape and dtype.
#include <cmath>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct MulScalarOp {
  static constexpr const char* name = "mul_scalar";
  static constexpr kernels::Saved saved = kernels::Saved::nothing;
  double scalar;
  template <typename C>
  C forward(C x) const {
    return x * C(scalar);
  }
  template <typename C>
  C backward(C g, C v) const {
    (void)v;
    return g * C(scalar);
  }
};
}  // namespace
}  // namespace mixp::ops

// The cpu candidates, generated from the functor (kernels/elementwise_candidates.h).
namespace mixp::kernels {
UnaryForwardKernel<ops::MulScalarOp> mul_scalar_forward =
    unary_forward_kernel<ops::MulScalarOp>("mul_scalar_forward");
UnaryBackwardKernel<ops::MulScalarOp> mul_scalar_backward =
    unary_backward_kernel<ops::MulScalarOp>("mul_scalar_backward");
}  // namespace mixp::kernels

namespace mixp::ops {

Tensor mul_scalar(const Tensor& x, double s) {
  const auto cast = amp::autocast_inputs(OpKind::mul_scalar, {&x});
  return cast.output(detail::unary(cast[0], MulScalarOp{.scalar = s}, kernels::mul_scalar_forward,
                                   kernels::mul_scalar_backward));
}

}  // namespace mixp::ops
