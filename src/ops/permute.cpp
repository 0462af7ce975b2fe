// permute and transpose: a contiguous copy with the dimensions reordered.
// Shape contract: order is a permutation of x's dimensions; out.shape[i] = x.shape[order[i]].
// Backward: the inverse permutation of g.
#include <utility>

#include "kernels/permute.h"
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

Tensor permuted(const Tensor& x, const std::vector<int>& order) {
  std::vector<int64_t> out_dims(static_cast<size_t>(x.ndim()));
  for (int d = 0; d < x.ndim(); ++d) out_dims[size_t(d)] = x.shape()[order[size_t(d)]];
  Tensor out = empty(Shape(out_dims), x.dtype(), MemoryTag::activation, x.device());
  kernels::permute_copy(x, order, out);
  return out;
}

struct PermuteBackward : autograd::Node {
  std::vector<int> inverse;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {permuted(grads[0], inverse)};
  }
};

}  // namespace

Tensor permute(const Tensor& x_in, std::vector<int> order) {
  const auto cast = amp::autocast_inputs(OpKind::permute, {&x_in});
  const Tensor& x = cast[0];
  MIXP_CHECK(x.defined(), "permute: the input is undefined");
  MIXP_CHECK(int(order.size()) == x.ndim(), "permute: order has ", order.size(),
             " entries for a tensor of shape ", x.shape().to_string());
  std::vector<bool> used(order.size(), false);
  for (int& d : order) {
    d = x.shape().normalize_dim(d, "permute");
    MIXP_CHECK(!used[size_t(d)], "permute: dimension ", d, " appears twice in the order");
    used[size_t(d)] = true;
  }
  Tensor out = permuted(x, order);
  if (auto node = autograd::make_node<PermuteBackward>("permute", {&x})) {
    node->inverse.resize(order.size());
    for (size_t i = 0; i < order.size(); ++i) node->inverse[size_t(order[i])] = int(i);
    autograd::set_history(out, node);
  }
  return cast.output(out);
}

Tensor transpose(const Tensor& x_in, int dim0, int dim1) {
  const auto cast = amp::autocast_inputs(OpKind::transpose, {&x_in});
  const Tensor& x = cast[0];
  MIXP_CHECK(x.defined(), "transpose: the input is undefined");
  const int a = x.shape().normalize_dim(dim0, "transpose"),
            b = x.shape().normalize_dim(dim1, "transpose");
  std::vector<int> order(size_t(x.ndim()));
  for (int d = 0; d < x.ndim(); ++d) order[size_t(d)] = d;
  std::swap(order[size_t(a)], order[size_t(b)]);
  return cast.output(permute(x, order));
}

}  // namespace mixp::ops
