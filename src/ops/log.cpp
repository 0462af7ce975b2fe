// log: y = ln x; dx = g / x.
// Shape contract: any shape; the output has the input's shape and dtype.
#include <cmath>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct LogOp {
  static constexpr const char* name = "log";
  static constexpr kernels::Saved saved = kernels::Saved::input;
  template <typename C>
  C forward(C x) const {
    return std::log(x);
  }
  template <typename C>
  C backward(C g, C s) const {
    return g / s;
  }
};
}  // namespace
}  // namespace mixp::ops

// The cpu candidates, generated from the functor (kernels/elementwise_candidates.h).
namespace mixp::kernels {
UnaryForwardKernel<ops::LogOp> log_forward = unary_forward_kernel<ops::LogOp>("log_forward");
UnaryBackwardKernel<ops::LogOp> log_backward = unary_backward_kernel<ops::LogOp>("log_backward");
}  // namespace mixp::kernels

namespace mixp::ops {

Tensor log(const Tensor& x) {
  const auto cast = amp::autocast_inputs(OpKind::log, {&x});
  return cast.output(detail::unary(cast[0], LogOp{}, kernels::log_forward, kernels::log_backward));
}

}  // namespace mixp::ops
