// add_scalar: y = x + s; dx = g.
// Shape contract: any shape; the output has the input's shape and dtype.
#include <cmath>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct AddScalarOp {
  static constexpr const char* name = "add_scalar";
  static constexpr kernels::Saved saved = kernels::Saved::nothing;
  double scalar;
  template <typename C>
  C forward(C x) const {
    return x + C(scalar);
  }
  template <typename C>
  C backward(C g, C v) const {
    (void)v;
    return g;
  }
};
}  // namespace
}  // namespace mixp::ops

// The cpu candidates, generated from the functor (kernels/elementwise_candidates.h).
namespace mixp::kernels {
UnaryForwardKernel<ops::AddScalarOp> add_scalar_forward =
    unary_forward_kernel<ops::AddScalarOp>("add_scalar_forward");
UnaryBackwardKernel<ops::AddScalarOp> add_scalar_backward =
    unary_backward_kernel<ops::AddScalarOp>("add_scalar_backward");
}  // namespace mixp::kernels

namespace mixp::ops {

Tensor add_scalar(const Tensor& x, double s) {
  const auto cast = amp::autocast_inputs(OpKind::add_scalar, {&x});
  return cast.output(detail::unary(cast[0], AddScalarOp{.scalar = s}, kernels::add_scalar_forward,
                                   kernels::add_scalar_backward));
}

}  // namespace mixp::ops
