// add_scalar: y = x + s; dx = g.
// Shape contract: any shape; the output has the input's shape and dtype.
#include <cmath>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct AddScalarOp {
  const char* name;
  detail::Saved saved;
  double scalar;
  template <typename C>
  C forward(C x) const {
    return x + C(scalar);
  }
  template <typename C>
  C backward(C g, C v) const {
    (void)v;
    return g;
  }
};
}  // namespace

Tensor add_scalar(const Tensor& x, double s) {
  const auto cast = amp::autocast_inputs(OpKind::add_scalar, {&x});
  return cast.output(detail::unary(
      cast[0], AddScalarOp{.name = "add_scalar", .saved = detail::Saved::nothing, .scalar = s}));
}

}  // namespace mixp::ops
