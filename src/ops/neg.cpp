// neg: y = -x.
// Shape contract: any shape; the output has the input's shape and dtype.
#include <cmath>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct NegOp {
  static constexpr const char* name = "neg";
  static constexpr kernels::Saved saved = kernels::Saved::nothing;
  template <typename C>
  C forward(C x) const {
    return -x;
  }
  template <typename C>
  C backward(C g, C s) const {
    (void)s;
    return -g;
  }
};
}  // namespace
}  // namespace mixp::ops

// The cpu candidates, generated from the functor (kernels/elementwise_candidates.h).
namespace mixp::kernels {
UnaryForwardKernel<ops::NegOp> neg_forward = unary_forward_kernel<ops::NegOp>("neg_forward");
UnaryBackwardKernel<ops::NegOp> neg_backward = unary_backward_kernel<ops::NegOp>("neg_backward");
}  // namespace mixp::kernels

namespace mixp::ops {

Tensor neg(const Tensor& x) {
  const auto cast = amp::autocast_inputs(OpKind::neg, {&x});
  return cast.output(detail::unary(cast[0], NegOp{}, kernels::neg_forward, kernels::neg_backward));
}

}  // namespace mixp::ops
