// neg: y = -x.
// Shape contract: any shape; the output has the input's shape and dtype.
#include <cmath>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct NegOp {
  const char* name = "neg";
  detail::Saved saved = detail::Saved::nothing;
  template <typename C>
  C forward(C x) const {
    return -x;
  }
  template <typename C>
  C backward(C g, C s) const {
    (void)s;
    return -g;
  }
};
}  // namespace

Tensor neg(const Tensor& x) {
  const auto cast = amp::autocast_inputs(OpKind::neg, {&x});
  return cast.output(detail::unary(cast[0], NegOp{}));
}

}  // namespace mixp::ops
