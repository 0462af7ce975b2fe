// pow: y = x^p for a scalar exponent p; dx = g p x^(p-1).
// Shape contract: any shape; the output has the input's shape and dtype.
#include <cmath>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct PowOp {
  const char* name;
  detail::Saved saved;
  double scalar;
  template <typename C>
  C forward(C x) const {
    return std::pow(x, C(scalar));
  }
  template <typename C>
  C backward(C g, C v) const {
    return g * C(scalar) * std::pow(v, C(scalar - 1));
  }
};
}  // namespace

Tensor pow(const Tensor& x, double exponent) {
  const auto cast = amp::autocast_inputs(OpKind::pow_scalar, {&x});
  return cast.output(detail::unary(
      cast[0], PowOp{.name = "pow_scalar", .saved = detail::Saved::input, .scalar = exponent}));
}

}  // namespace mixp::ops
