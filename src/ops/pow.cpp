// pow: y = x^p for a scalar exponent p; dx = g p x^(p-1).
// Shape contract: any shape; the output has the input's shape and dtype.
#include <cmath>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct PowOp {
  static constexpr const char* name = "pow_scalar";
  static constexpr kernels::Saved saved = kernels::Saved::input;
  double scalar;
  template <typename C>
  C forward(C x) const {
    return std::pow(x, C(scalar));
  }
  template <typename C>
  C backward(C g, C v) const {
    return g * C(scalar) * std::pow(v, C(scalar - 1));
  }
};
}  // namespace
}  // namespace mixp::ops

// The cpu candidates, generated from the functor (kernels/elementwise_candidates.h).
namespace mixp::kernels {
UnaryForwardKernel<ops::PowOp> pow_scalar_forward =
    unary_forward_kernel<ops::PowOp>("pow_scalar_forward");
UnaryBackwardKernel<ops::PowOp> pow_scalar_backward =
    unary_backward_kernel<ops::PowOp>("pow_scalar_backward");
}  // namespace mixp::kernels

namespace mixp::ops {

Tensor pow(const Tensor& x, double exponent) {
  const auto cast = amp::autocast_inputs(OpKind::pow_scalar, {&x});
  return cast.output(detail::unary(cast[0], PowOp{.scalar = exponent}, kernels::pow_scalar_forward,
                                   kernels::pow_scalar_backward));
}

}  // namespace mixp::ops
