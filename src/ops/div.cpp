// div: out = a / b; da = g / b, db = -g a / b^2, with NumPy broadcasting.
// Shape contract: a and b broadcast to the output shape; same dtype; gradients are summed back
// to each input's shape.
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct DivOp {
  static constexpr const char* name = "div";
  static constexpr bool needs_inputs = true;
  template <typename C>
  C forward(C a, C b) const {
    return a / b;
  }
  template <typename C>
  C grad_a(C g, C a, C b) const {
    (void)a;
    return g / b;
  }
  template <typename C>
  C grad_b(C g, C a, C b) const {
    return -g * a / (b * b);
  }
};
}  // namespace
}  // namespace mixp::ops

// The cpu candidates, generated from the functor (kernels/elementwise_candidates.h).
namespace mixp::kernels {
Kernel<BinaryFn> div_forward = binary_forward_kernel<ops::DivOp>("div_forward");
Kernel<BinaryBackwardFn> div_backward = binary_backward_kernel<ops::DivOp>("div_backward");
}  // namespace mixp::kernels

namespace mixp::ops {

Tensor div(const Tensor& a, const Tensor& b) {
  const auto cast = amp::autocast_inputs(OpKind::div, {&a, &b});
  return cast.output(
      detail::binary(cast[0], cast[1], DivOp{}, kernels::div_forward, &kernels::div_backward));
}

}  // namespace mixp::ops
