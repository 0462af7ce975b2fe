// log: y = ln x; dx = g / x.
// Shape contract: any shape; the output has the input's shape and dtype.
#include <cmath>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {
struct LogOp {
  const char* name = "log";
  detail::Saved saved = detail::Saved::input;
  template <typename C>
  C forward(C x) const {
    return std::log(x);
  }
  template <typename C>
  C backward(C g, C s) const {
    return g / s;
  }
};
}  // namespace

Tensor log(const Tensor& x) {
  const auto cast = amp::autocast_inputs(OpKind::log, {&x});
  return cast.output(detail::unary(cast[0], LogOp{}));
}

}  // namespace mixp::ops
