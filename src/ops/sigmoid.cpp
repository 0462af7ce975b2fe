// sigmoid: y = 1 / (1 + e^-x); dx = g y (1 - y).
// Shape contract: any shape; the output has the input's shape and dtype.
#include <cmath>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct SigmoidOp {
  const char* name = "sigmoid";
  detail::Saved saved = detail::Saved::output;
  template <typename C>
  C forward(C x) const {
    return C(1) / (C(1) + std::exp(-x));
  }
  template <typename C>
  C backward(C g, C s) const {
    return g * s * (C(1) - s);
  }
};
}  // namespace

Tensor sigmoid(const Tensor& x) {
  const auto cast = amp::autocast_inputs(OpKind::sigmoid, {&x});
  return cast.output(detail::unary(cast[0], SigmoidOp{}));
}

}  // namespace mixp::ops
