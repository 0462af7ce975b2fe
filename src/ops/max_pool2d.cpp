// max_pool2d: the maximum over sliding windows, padding counted as -inf (it never wins); the
// result has x's dtype and is exact. Among equal values the first in row-major window order
// wins; a NaN is the maximum.
// Shape contract: x [N, C, H, W]; kernel >= 1; stride >= 1 (0: the kernel size); 0 <= pad <=
// kernel / 2 (so every window holds an input); the result is [N, C, OH, OW],
// OH = (H + 2 pad_h - kernel_h) / stride_h + 1.
// Backward: each output's gradient goes to the input that won its window, summed (fp32) where
// overlapping windows chose the same input.
#include "kernels/max_pool2d.h"
#include "ops/pool.h"

namespace mixp::ops {
namespace {

struct MaxPoolBackward : autograd::Node {
  kernels::Pool2dShape pool;
  Shape input_shape;
  Tensor index;  // i64, the output's shape: the winner's position within its plane
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    Tensor dx = empty(input_shape, g.dtype(), MemoryTag::activation, g.device());
    kernels::max_pool2d_backward(pool, g, index, dx);
    return {dx};
  }
  void release() override { index = Tensor(); }
};

}  // namespace

Tensor max_pool2d(const Tensor& x_in, int64_t kernel_h, int64_t kernel_w, int64_t stride_h,
                  int64_t stride_w, int64_t pad_h, int64_t pad_w) {
  const auto cast = amp::autocast_inputs(OpKind::max_pool2d, {&x_in});
  const Tensor& x = cast[0];
  const kernels::Pool2dShape p =
      detail::sliding_pool("max_pool2d", x, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w);
  const Shape shape = detail::pooled_shape(x, p);
  Tensor y = empty(shape, x.dtype(), MemoryTag::activation, x.device());
  Tensor index = empty(shape, DType::i64, MemoryTag::activation, x.device());  // saved for backward: an activation
  kernels::max_pool2d_forward(p, x, y, index);
  if (auto node = autograd::make_node<MaxPoolBackward>("max_pool2d", {&x})) {
    node->pool = p;
    node->input_shape = x.shape();
    node->index = index;
    autograd::set_history(y, node);
  }
  return cast.output(y);
}

}  // namespace mixp::ops
