// adaptive_avg_pool2d: the mean over the windows that give an out_h x out_w result, as in
// PyTorch: output row i reads rows [floor(i H / out_h), ceil((i + 1) H / out_h)), columns
// likewise, and divides by that window's size; fp32 compute (f64 for f64), one rounding to x's
// dtype.
// Shape contract: x [N, C, H, W]; out_h, out_w >= 1 (larger than H, W is allowed: windows then
// repeat rows); the result is [N, C, out_h, out_w].
// Backward: each output's gradient divided by its window size, added to every input of its
// window (fp32 accumulation where windows overlap).
#include "ops/pool.h"

namespace mixp::ops {

Tensor adaptive_avg_pool2d(const Tensor& x_in, int64_t out_h, int64_t out_w) {
  const auto cast = amp::autocast_inputs(OpKind::adaptive_avg_pool2d, {&x_in});
  const Tensor& x = cast[0];
  constexpr const char* op = "adaptive_avg_pool2d";
  detail::check_pool_input(op, x);
  MIXP_CHECK(out_h >= 1 && out_w >= 1, op, ": the output size must be at least 1 x 1, got ", out_h,
             " x ", out_w, " for the input ", x.shape().to_string());
  kernels::Pool2dShape p;
  p.planes = x.size(0) * x.size(1), p.h = x.size(2), p.w = x.size(3);
  p.rows = kernels::adaptive_axis(p.h, out_h);
  p.cols = kernels::adaptive_axis(p.w, out_w);
  Tensor y = detail::avg_pool_forward(p, x);
  if (auto node = autograd::make_node<detail::AvgPoolBackward>(op, {&x})) {
    node->pool = p;
    node->input_shape = x.shape();
    autograd::set_history(y, node);
  }
  return cast.output(y);
}

}  // namespace mixp::ops
