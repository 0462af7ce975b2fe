// permute and transpose: a contiguous copy with the dimensions reordered.
// Shape contract: order is a permutation of x's dimensions; out.shape[i] = x.shape[order[i]].
// Backward: the inverse permutation of g.
#include <algorithm>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

Tensor permute_copy(const Tensor& x, const std::vector<int>& order) {
  const int nd = x.ndim();
  std::vector<int64_t> in_strides(static_cast<size_t>(nd), 1), out_dims(static_cast<size_t>(nd));
  for (int d = nd - 2; d >= 0; --d)
    in_strides[size_t(d)] = in_strides[size_t(d + 1)] * x.shape()[d + 1];
  for (int d = 0; d < nd; ++d) out_dims[size_t(d)] = x.shape()[order[size_t(d)]];
  Tensor out = empty(Shape(out_dims), x.dtype());
  // The trailing dimensions that stay in place are contiguous in both tensors: they move as
  // one block of `run` elements.
  int kept = nd;
  int64_t run = 1;
  while (kept > 0 && order[size_t(kept - 1)] == kept - 1) {
    --kept;
    run *= x.shape()[kept];
  }
  const size_t size = size_t(size_of(x.dtype()));
  const size_t run_bytes = size_t(run) * size;
  const int64_t blocks = run == 0 ? 0 : out.numel() / run;
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  kernels::parallel_for(
      blocks, std::max<int64_t>(1, 16384 / std::max<int64_t>(run, 1)),
      [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) {
          int64_t rest = b, offset = 0;
          for (int d = kept - 1; d >= 0; --d) {
            offset += (rest % out_dims[size_t(d)]) * in_strides[size_t(order[size_t(d)])];
            rest /= out_dims[size_t(d)];
          }
          std::memcpy(dst + size_t(b) * run_bytes, src + size_t(offset) * size, run_bytes);
        }
      });
  return out;
}

struct PermuteBackward : autograd::Node {
  std::vector<int> inverse;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {permute_copy(grads[0], inverse)};
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
  Tensor out = permute_copy(x, order);
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
