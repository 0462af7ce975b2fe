// gelu: y = x Phi(x) = x (1 + erf(x / sqrt 2)) / 2; dx = g (Phi(x) + x phi(x)).
// Shape contract: any shape; the output has the input's shape and dtype.
#include <cmath>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct GeluOp {
  static constexpr const char* name = "gelu";
  static constexpr kernels::Saved saved = kernels::Saved::input;
  template <typename C>
  C forward(C x) const {
    return C(0.5) * x * (C(1) + std::erf(x * C(0.70710678118654752440)));
  }
  template <typename C>
  C backward(C g, C s) const {
    const C cdf = C(0.5) * (C(1) + std::erf(s * C(0.70710678118654752440)));
    const C pdf = std::exp(C(-0.5) * s * s) * C(0.39894228040143267794);
    return g * (cdf + s * pdf);
  }
};
}  // namespace
}  // namespace mixp::ops

// The cpu candidates, generated from the functor (kernels/elementwise_candidates.h).
namespace mixp::kernels {
UnaryForwardKernel<ops::GeluOp> gelu_forward = unary_forward_kernel<ops::GeluOp>("gelu_forward");
UnaryBackwardKernel<ops::GeluOp> gelu_backward =
    unary_backward_kernel<ops::GeluOp>("gelu_backward");
}  // namespace mixp::kernels

namespace mixp::ops {

Tensor gelu(const Tensor& x) {
  const auto cast = amp::autocast_inputs(OpKind::gelu, {&x});
  return cast.output(
      detail::unary(cast[0], GeluOp{}, kernels::gelu_forward, kernels::gelu_backward));
}

}  // namespace mixp::ops
