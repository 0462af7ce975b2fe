// What the pooling ops share: argument checks, the window geometry, and the average pooling
// through its kernels. Private to mixp.
#pragma once

#include "kernels/avg_pool2d.h"
#include "kernels/pool.h"
#include "ops/op_helpers.h"

namespace mixp::ops::detail {

/// Throws unless x is a floating [N, C, H, W] tensor with non-empty H and W.
inline void check_pool_input(const char* op, const Tensor& x) {
  check_floating(op, x);
  MIXP_CHECK(x.ndim() == 4, op, ": the input must be [N, C, H, W], got ", x.shape().to_string());
  MIXP_CHECK(x.size(2) > 0 && x.size(3) > 0, op, ": the input ", x.shape().to_string(),
             " has an empty spatial dimension");
}

/// The windows of max_pool2d and avg_pool2d; a stride of 0 means the kernel size. Checks the
/// kernel, stride and padding against x.
inline kernels::Pool2dShape sliding_pool(const char* op, const Tensor& x, int64_t kernel_h,
                                         int64_t kernel_w, int64_t stride_h, int64_t stride_w,
                                         int64_t pad_h, int64_t pad_w) {
  check_pool_input(op, x);
  if (stride_h == 0) stride_h = kernel_h;
  if (stride_w == 0) stride_w = kernel_w;
  MIXP_CHECK(kernel_h >= 1 && kernel_w >= 1, op, ": the kernel must be at least 1 x 1, got ",
             kernel_h, " x ", kernel_w);
  MIXP_CHECK(stride_h >= 1 && stride_w >= 1, op,
             ": strides must be at least 1 (or 0 for the kernel size), got ", stride_h, " x ",
             stride_w);
  MIXP_CHECK(pad_h >= 0 && pad_w >= 0 && 2 * pad_h <= kernel_h && 2 * pad_w <= kernel_w, op,
             ": padding must be between 0 and half the kernel, got ", pad_h, " x ", pad_w,
             " for a kernel of ", kernel_h, " x ", kernel_w);
  const int64_t h = x.size(2), w = x.size(3);
  MIXP_CHECK(h + 2 * pad_h >= kernel_h && w + 2 * pad_w >= kernel_w, op, ": the padded input ",
             h + 2 * pad_h, " x ", w + 2 * pad_w, " (input ", x.shape().to_string(), ", padding ",
             pad_h, " x ", pad_w, ") is smaller than the kernel ", kernel_h, " x ", kernel_w);
  kernels::Pool2dShape p;
  p.planes = x.size(0) * x.size(1), p.h = h, p.w = w;
  p.rows = kernels::sliding_axis(h, kernel_h, stride_h, pad_h);
  p.cols = kernels::sliding_axis(w, kernel_w, stride_w, pad_w);
  return p;
}

inline Shape pooled_shape(const Tensor& x, const kernels::Pool2dShape& p) {
  return Shape{x.size(0), x.size(1), p.rows.size(), p.cols.size()};
}

/// The window means of x, in x's dtype.
inline Tensor avg_pool_forward(const kernels::Pool2dShape& p, const Tensor& x) {
  Tensor y = empty(pooled_shape(x, p), x.dtype(), MemoryTag::activation, x.device());
  kernels::avg_pool2d_forward(p, x, y);
  return y;
}

/// The gradient of avg_pool_forward for an input of `input_shape`, in g's dtype.
inline Tensor avg_pool_backward(const kernels::Pool2dShape& p, const Tensor& g,
                                const Shape& input_shape) {
  Tensor dx = empty(input_shape, g.dtype(), MemoryTag::activation, g.device());
  kernels::avg_pool2d_backward(p, g, dx);
  return dx;
}

/// The node of both average poolings: it keeps only the windows and the input's shape.
struct AvgPoolBackward : autograd::Node {
  kernels::Pool2dShape pool;
  Shape input_shape;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {avg_pool_backward(pool, grads[0], input_shape)};
  }
};

}  // namespace mixp::ops::detail
