// narrow: positions [start, start + length) of one dimension, as a copy.
// Shape contract: x any dtype with ndim >= 1; dim negative counts from the end; 0 <= start,
// 0 <= length, start + length <= x.shape[dim]; the result has x's shape with length at dim.
// Backward: dx is zeros with g copied in at start.
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

struct NarrowBackward : autograd::Node {
  Shape input_shape;
  DType dtype = DType::f32;
  int dim = 0;
  int64_t start = 0;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor g = grads[0].to(dtype).detach();
    Tensor dx = zeros(input_shape, dtype, MemoryTag::activation, g.device());
    detail::copy_along(g, 0, dx, start, dim, g.shape()[dim]);
    return {dx};
  }
};

}  // namespace

Tensor narrow(const Tensor& x_in, int dim_in, int64_t start, int64_t length) {
  const auto cast = amp::autocast_inputs(OpKind::narrow, {&x_in});
  const Tensor& x = cast[0];
  MIXP_CHECK(x.defined(), "narrow: the input is undefined");
  MIXP_CHECK(x.ndim() >= 1, "narrow: needs at least one dimension, got a scalar");
  const int dim = x.shape().normalize_dim(dim_in, "narrow");
  const int64_t n = x.shape()[dim];
  MIXP_CHECK(start >= 0 && length >= 0 && start <= n && length <= n - start, "narrow: positions [",
             start, ", ", start, " + ", length, ") are not within dimension ", dim, " of size ", n,
             " (shape ", x.shape().to_string(), ")");
  Shape s = x.shape();
  s[dim] = length;
  Tensor out = empty(s, x.dtype(), MemoryTag::activation, x.device());
  detail::copy_along(x, start, out, 0, dim, length);
  if (auto node = autograd::make_node<NarrowBackward>("narrow", {&x})) {
    node->input_shape = x.shape();
    node->dtype = x.dtype();
    node->dim = dim;
    node->start = start;
    autograd::set_history(out, node);
  }
  return cast.output(out);
}

}  // namespace mixp::ops
