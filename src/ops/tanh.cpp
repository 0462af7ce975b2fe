// tanh: y = tanh x; dx = g (1 - y^2).
// Shape contract: any shape; the output has the input's shape and dtype.
#include <cmath>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct TanhOp {
  const char* name = "tanh";
  detail::Saved saved = detail::Saved::output;
  template <typename C>
  C forward(C x) const {
    return std::tanh(x);
  }
  template <typename C>
  C backward(C g, C s) const {
    return g * (C(1) - s * s);
  }
};
}  // namespace

Tensor tanh(const Tensor& x) {
  const auto cast = amp::autocast_inputs(OpKind::tanh, {&x});
  return cast.output(detail::unary(cast[0], TanhOp{}));
}

}  // namespace mixp::ops
