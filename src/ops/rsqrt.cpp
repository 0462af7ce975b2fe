// rsqrt: y = 1 / sqrt(x); dx = -g y^3 / 2.
// Shape contract: any shape; the output has the input's shape and dtype.
#include <cmath>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct RsqrtOp {
  static constexpr const char* name = "rsqrt";
  static constexpr kernels::Saved saved = kernels::Saved::output;
  template <typename C>
  C forward(C x) const {
    return C(1) / std::sqrt(x);
  }
  template <typename C>
  C backward(C g, C s) const {
    return C(-0.5) * g * s * s * s;
  }
};
}  // namespace
}  // namespace mixp::ops

// The cpu candidates, generated from the functor (kernels/elementwise_candidates.h).
namespace mixp::kernels {
UnaryForwardKernel<ops::RsqrtOp> rsqrt_forward =
    unary_forward_kernel<ops::RsqrtOp>("rsqrt_forward");
UnaryBackwardKernel<ops::RsqrtOp> rsqrt_backward =
    unary_backward_kernel<ops::RsqrtOp>("rsqrt_backward");
}  // namespace mixp::kernels

namespace mixp::ops {

Tensor rsqrt(const Tensor& x) {
  const auto cast = amp::autocast_inputs(OpKind::rsqrt, {&x});
  return cast.output(
      detail::unary(cast[0], RsqrtOp{}, kernels::rsqrt_forward, kernels::rsqrt_backward));
}

}  // namespace mixp::ops
