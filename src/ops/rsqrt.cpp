// rsqrt: y = 1 / sqrt(x); dx = -g y^3 / 2.
// Shape contract: any shape; the output has the input's shape and dtype.
#include <cmath>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct RsqrtOp {
  const char* name = "rsqrt";
  detail::Saved saved = detail::Saved::output;
  template <typename C>
  C forward(C x) const {
    return C(1) / std::sqrt(x);
  }
  template <typename C>
  C backward(C g, C s) const {
    return C(-0.5) * g * s * s * s;
  }
};
}  // namespace

Tensor rsqrt(const Tensor& x) {
  const auto cast = amp::autocast_inputs(OpKind::rsqrt, {&x});
  return cast.output(detail::unary(cast[0], RsqrtOp{}));
}

}  // namespace mixp::ops
