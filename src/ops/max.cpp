// max and argmax along one dimension. A NaN is the maximum (it propagates); among equal values
// the first position wins, and the gradient goes there alone.
// Shape contract: x any shape with ndim >= 1; dim in range; the result drops dim (keepdim:
// keeps it as 1). max keeps x's dtype; argmax is i64.
#include "kernels/max.h"
#include "ops/op_helpers.h"
#include "ops/reduce.h"

namespace mixp::ops {
namespace {

Tensor argmax_kept(const char* op, const Tensor& x, int dim) {
  MIXP_CHECK(x.shape()[dim] > 0, op, ": dimension ", dim, " of shape ", x.shape().to_string(),
             " is empty");
  Shape kept = x.shape();
  kept[dim] = 1;
  Tensor index = empty(kept, DType::i64, MemoryTag::activation, x.device());
  kernels::argmax_lines(x, detail::around(x.shape(), dim), index);
  return index;
}

struct MaxBackward : autograd::Node {
  Shape input_shape;
  int dim = 0;
  Tensor index;  // kept shape, i64
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor g = grads[0];
    Tensor dx = zeros(input_shape, g.dtype(), MemoryTag::activation, g.device());
    kernels::put_along_lines(g, detail::around(input_shape, dim), index, dx);
    return {dx};
  }
  void release() override { index = Tensor(); }
};

}  // namespace

Tensor argmax(const Tensor& x, int dim_in, bool keepdim) {
  detail::check_floating("argmax", x);
  const int dim = x.shape().normalize_dim(dim_in, "argmax");
  Tensor index = argmax_kept("argmax", x, dim);
  return index.view(detail::reduced_shape(x.shape(), {dim}, keepdim)).detach();
}

Tensor max(const Tensor& x_in, int dim_in, bool keepdim) {
  const auto cast = amp::autocast_inputs(OpKind::max, {&x_in});
  const Tensor& x = cast[0];
  detail::check_floating("max", x);
  const int dim = x.shape().normalize_dim(dim_in, "max");
  Tensor index = argmax_kept("max", x, dim);
  Shape kept = x.shape();
  kept[dim] = 1;
  Tensor values = empty(kept, x.dtype(), MemoryTag::activation, x.device());
  kernels::take_along_lines(x, detail::around(x.shape(), dim), index, values);
  Tensor out = values.view(detail::reduced_shape(x.shape(), {dim}, keepdim)).detach();
  if (auto node = autograd::make_node<MaxBackward>("max", {&x})) {
    node->input_shape = x.shape();
    node->dim = dim;
    node->index = index;
    autograd::set_history(out, node);
  }
  return cast.output(out);
}

}  // namespace mixp::ops
