// mul: out = a * b; da = g b, db = g a, with NumPy broadcasting.
// Shape contract: a and b broadcast to the output shape; same dtype; gradients are summed back
// to each input's shape.
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct MulOp {
  static constexpr const char* name = "mul";
  static constexpr bool needs_inputs = true;
  template <typename C>
  C forward(C a, C b) const {
    return a * b;
  }
  template <typename C>
  C grad_a(C g, C a, C b) const {
    (void)a;
    return g * b;
  }
  template <typename C>
  C grad_b(C g, C a, C b) const {
    (void)b;
    return g * a;
  }
};
}  // namespace
}  // namespace mixp::ops

// The cpu candidates, generated from the functor (kernels/elementwise_candidates.h).
namespace mixp::kernels {
Kernel<BinaryFn> mul_forward = binary_forward_kernel<ops::MulOp>("mul_forward");
Kernel<BinaryBackwardFn> mul_backward = binary_backward_kernel<ops::MulOp>("mul_backward");
}  // namespace mixp::kernels

namespace mixp::ops {

Tensor mul(const Tensor& a, const Tensor& b) {
  const auto cast = amp::autocast_inputs(OpKind::mul, {&a, &b});
  return cast.output(
      detail::binary(cast[0], cast[1], MulOp{}, kernels::mul_forward, &kernels::mul_backward));
}

}  // namespace mixp::ops
