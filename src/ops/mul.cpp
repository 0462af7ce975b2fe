// mul: out = a * b; da = g b, db = g a, with NumPy broadcasting.
// Shape contract: a and b broadcast to the output shape; same dtype; gradients are summed back
// to each input's shape.
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct MulOp {
  const char* name = "mul";
  bool needs_inputs = true;
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

Tensor mul(const Tensor& a, const Tensor& b) {
  const auto cast = amp::autocast_inputs(OpKind::mul, {&a, &b});
  return cast.output(detail::binary(cast[0], cast[1], MulOp{}));
}

}  // namespace mixp::ops
