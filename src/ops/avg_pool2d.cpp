// avg_pool2d: the mean over sliding windows, padding counted as zeros in the divisor (PyTorch's
// count_include_pad=true, so every window divides by kernel_h * kernel_w); fp32 compute (f64
// for f64), one rounding to x's dtype.
// Shape contract: x [N, C, H, W]; kernel >= 1; stride >= 1 (0: the kernel size); 0 <= pad <=
// kernel / 2; the result is [N, C, OH, OW], OH = (H + 2 pad_h - kernel_h) / stride_h + 1.
// Backward: each output's gradient divided by the window size, added to every input of its
// window (fp32 accumulation where windows overlap).
#include "ops/pool.h"

namespace mixp::ops {

Tensor avg_pool2d(const Tensor& x_in, int64_t kernel_h, int64_t kernel_w, int64_t stride_h,
                  int64_t stride_w, int64_t pad_h, int64_t pad_w) {
  const auto cast = amp::autocast_inputs(OpKind::avg_pool2d, {&x_in});
  const Tensor& x = cast[0];
  const kernels::Pool2dShape p =
      detail::sliding_pool("avg_pool2d", x, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w);
  Tensor y = detail::avg_pool_forward(p, x);
  if (auto node = autograd::make_node<detail::AvgPoolBackward>("avg_pool2d", {&x})) {
    node->pool = p;
    node->input_shape = x.shape();
    autograd::set_history(y, node);
  }
  return cast.output(y);
}

}  // namespace mixp::ops
