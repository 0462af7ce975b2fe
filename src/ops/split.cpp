// split: consecutive chunks of `size` along one dimension (copies); the last may be smaller.
// Shape contract: x any dtype with ndim >= 1; size >= 1; dim negative counts from the end.
// The result has ceil(n / size) tensors (one empty tensor when n == 0), chunk c covering
// positions [c size, min(n, (c + 1) size)) of dim and x's size in every other dimension.
// Backward: one node with one output per chunk; dx is the chunks' gradients put back in
// place, zeros for a chunk that got no gradient.
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

struct SplitBackward : autograd::Node {
  Shape input_shape;
  DType dtype = DType::f32;
  Device device = Device::cpu;
  int64_t size = 1;
  int dim = 0;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor dx = zeros(input_shape, dtype, MemoryTag::activation, device);
    for (size_t c = 0; c < grads.size(); ++c) {
      if (!grads[c].defined()) continue;
      const Tensor g = grads[c].to(dtype).detach();
      detail::copy_along(g, 0, dx, int64_t(c) * size, dim, g.shape()[dim]);
    }
    return {dx};
  }
};

}  // namespace

std::vector<Tensor> split(const Tensor& x_in, int64_t size, int dim_in) {
  const auto cast = amp::autocast_inputs(OpKind::split, {&x_in});
  const Tensor& x = cast[0];
  MIXP_CHECK(x.defined(), "split: the input is undefined");
  MIXP_CHECK(x.ndim() >= 1, "split: needs at least one dimension, got a scalar");
  MIXP_CHECK(size >= 1, "split: the chunk size must be at least 1, got ", size);
  const int dim = x.shape().normalize_dim(dim_in, "split");
  const int64_t n = x.shape()[dim];
  const int64_t chunks = n == 0 ? 1 : (n + size - 1) / size;
  std::vector<Tensor> out;
  out.reserve(static_cast<size_t>(chunks));
  for (int64_t c = 0; c < chunks; ++c) {
    Shape s = x.shape();
    s[dim] = std::min(size, n - c * size);
    Tensor chunk = empty(s, x.dtype(), MemoryTag::activation, x.device());
    detail::copy_along(x, c * size, chunk, 0, dim, s[dim]);
    out.push_back(chunk);
  }
  if (auto node = autograd::make_node<SplitBackward>("split", {&x})) {
    node->num_outputs = uint32_t(chunks);
    node->input_shape = x.shape();
    node->dtype = x.dtype();
    node->device = x.device();
    node->size = size;
    node->dim = dim;
    for (size_t c = 0; c < out.size(); ++c) autograd::set_history(out[c], node, uint32_t(c));
  }
  return cast.output(out);
}

}  // namespace mixp::ops
