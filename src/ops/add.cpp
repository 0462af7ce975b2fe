// add: out = a + b, with NumPy broadcasting.
// Shape contract: a and b broadcast to the output shape; same dtype; gradients are summed back
// to each input's shape. Under autocast (its promote row sets fp32_inside) an fp32 and a bf16 or
// f16 input of one shape are read as they are, the narrow one widened block by block: the result
// is fp32, and the narrow input's gradient is rounded once to its dtype.
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct AddOp {
  static constexpr const char* name = "add";
  static constexpr bool needs_inputs = false;
  static constexpr bool passes_gradient[2] = {true, true};
  template <typename C>
  C forward(C a, C b) const {
    return a + b;
  }
  template <typename C>
  C grad_a(C g, C a, C b) const {
    (void)a;
    (void)b;
    return g;
  }
  template <typename C>
  C grad_b(C g, C a, C b) const {
    (void)a;
    (void)b;
    return g;
  }
};
}  // namespace
}  // namespace mixp::ops

// The cpu candidates, generated from the functor (kernels/elementwise_candidates.h).
namespace mixp::kernels {
Kernel<BinaryFn> add_forward = binary_forward_kernel<ops::AddOp>("add_forward");
}  // namespace mixp::kernels

namespace mixp::ops {

Tensor add(const Tensor& a, const Tensor& b) {
  const auto cast = amp::autocast_inputs(OpKind::add, {&a, &b});
  return cast.output(
      detail::binary(cast[0], cast[1], AddOp{}, kernels::add_forward, nullptr, cast.applied()));
}

}  // namespace mixp::ops
