// relu: y = max(x, 0); dx = g where x > 0.
// Shape contract: any shape; the output has the input's shape and dtype.
#include <cmath>

#include "kernels/vmath.h"
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct ReluOp {
  static constexpr const char* name = "relu";
  static constexpr kernels::Saved saved = kernels::Saved::input;
  template <typename C>
  C forward(C x) const {
    return x > C(0) ? x : C(0);
  }
  template <typename C>
  C backward(C g, C s) const {
    return s > C(0) ? g : C(0);
  }
  // bf16 on its bits, without widening (kernels/vmath.h).
  static void forward_bf16(const uint16_t* x, uint16_t* y, int64_t n) {
    kernels::relu_bf16(x, y, n);
  }
  static void backward_bf16(const uint16_t* g, const uint16_t* s, uint16_t* dx, int64_t n) {
    kernels::relu_backward_bf16(g, s, dx, n);
  }
};
}  // namespace
}  // namespace mixp::ops

// The cpu candidates, generated from the functor (kernels/elementwise_candidates.h).
namespace mixp::kernels {
UnaryForwardKernel<ops::ReluOp> relu_forward = unary_forward_kernel<ops::ReluOp>("relu_forward");
UnaryBackwardKernel<ops::ReluOp> relu_backward =
    unary_backward_kernel<ops::ReluOp>("relu_backward");
}  // namespace mixp::kernels

namespace mixp::ops {

Tensor relu(const Tensor& x) {
  const auto cast = amp::autocast_inputs(OpKind::relu, {&x});
  return cast.output(
      detail::unary(cast[0], ReluOp{}, kernels::relu_forward, kernels::relu_backward));
}

}  // namespace mixp::ops
