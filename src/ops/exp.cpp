// exp: y = e^x; the backward uses y: dx = g * y.
// Shape contract: any shape; the output has the input's shape and dtype.
#include <cmath>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct ExpOp {
  const char* name = "exp";
  detail::Saved saved = detail::Saved::output;
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

Tensor exp(const Tensor& x) {
  const auto cast = amp::autocast_inputs(OpKind::exp, {&x});
  return cast.output(detail::unary(cast[0], ExpOp{}));
}

}  // namespace mixp::ops
