// sqrt: y = sqrt(x); dx = g / (2 y).
// Shape contract: any shape; the output has the input's shape and dtype.
#include <cmath>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct SqrtOp {
  const char* name = "sqrt";
  detail::Saved saved = detail::Saved::output;
  template <typename C>
  C forward(C x) const {
    return std::sqrt(x);
  }
  template <typename C>
  C backward(C g, C s) const {
    return g / (C(2) * s);
  }
};
}  // namespace

Tensor sqrt(const Tensor& x) {
  const auto cast = amp::autocast_inputs(OpKind::sqrt, {&x});
  return cast.output(detail::unary(cast[0], SqrtOp{}));
}

}  // namespace mixp::ops
