// exp: y = e^x; the backward uses y: dx = g * y.
// Shape contract: any shape; the output has the input's shape and dtype.
#include <cmath>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct ExpOp {
  static constexpr const char* name = "exp";
  static constexpr kernels::Saved saved = kernels::Saved::output;
  template <typename C>
  C forward(C x) const {
    return std::exp(x);
  }
  template <typename C>
  C backward(C g, C s) const {
    return g * s;
  }
};
}  // namespace
}  // namespace mixp::ops

// The cpu candidates, generated from the functor (kernels/elementwise_candidates.h).
namespace mixp::kernels {
UnaryForwardKernel<ops::ExpOp> exp_forward = unary_forward_kernel<ops::ExpOp>("exp_forward");
UnaryBackwardKernel<ops::ExpOp> exp_backward = unary_backward_kernel<ops::ExpOp>("exp_backward");
}  // namespace mixp::kernels

namespace mixp::ops {

Tensor exp(const Tensor& x) {
  const auto cast = amp::autocast_inputs(OpKind::exp, {&x});
  return cast.output(detail::unary(cast[0], ExpOp{}, kernels::exp_forward, kernels::exp_backward));
}

}  // namespace mixp::ops
