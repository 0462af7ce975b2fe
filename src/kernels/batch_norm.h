// batch_norm's kernels over x viewed as [n, c, s] (s the product of the spatial dims), per
// channel c. Private to mixp.
#pragma once

#include "kernels/registry.h"

namespace mixp::kernels {

struct BatchNormParams {
  bool training = true;
  double momentum = 0.1;
  double eps = 1e-5;
};

/// y = (x - mean[c]) * rstd[c] * weight[c] + bias[c], rstd = 1 / sqrt(var + eps), rounded once
/// to y's dtype (x's). Training: mean and the biased var of x over n and s, and the tracked
/// running stats (f32 [c], or undefined) updated in place with copy_:
///   running_mean = (1 - momentum) running_mean + momentum mean,
///   running_var  = (1 - momentum) running_var + momentum var M / (M - 1), M = n s.
/// Evaluation: mean = running_mean, var = running_var. weight and bias: [c] of any floating
/// dtype, or undefined (no scale, no shift). mean_out and rstd_out ([c], fp32, f64 for f64)
/// receive the statistics used. Computed in fp32 (f64 for f64; the fallback in double);
/// channel sums are added in a fixed order of chunks, so the bits do not depend on the thread
/// count.
using BatchNormFn = void(const Tensor& x, const Tensor& weight, const Tensor& bias,
                         Tensor& running_mean, Tensor& running_var, BatchNormParams params,
                         Tensor& y, Tensor& mean_out, Tensor& rstd_out);
extern Kernel<BatchNormFn> batch_norm_forward;

/// With xhat = (x - mean) rstd, sums over the n s values of a channel and M = n s:
///   training   dx = weight rstd (g - sum(g) / M - xhat sum(g xhat) / M),
///   evaluation dx = weight rstd g,
///   dweight = sum(g xhat), dbias = sum(g).
/// g has x's dtype and shape; mean and rstd are the forward's mean_out and rstd_out. Each
/// output is computed only when defined (dx like x; dweight and dbias [c] in any floating
/// dtype), accumulated in fp32 (f64 for f64; the fallback in double) and rounded once.
using BatchNormBackwardFn = void(const Tensor& x, const Tensor& g, const Tensor& weight,
                                 const Tensor& mean, const Tensor& rstd, bool training, Tensor& dx,
                                 Tensor& dweight, Tensor& dbias);
extern Kernel<BatchNormBackwardFn> batch_norm_backward;

/// y = max(batch_norm(x), 0): batch_norm_forward's statistics, running update and saved
/// mean_out and rstd_out, and y the bits of ops::relu over its output (each fp32 value clamped
/// at 0 before its one rounding, which rounds the same: rounding keeps the sign and maps 0 to 0;
/// a NaN becomes 0, as ops::relu makes it). One pass over x fewer than the two ops, and no
/// batch_norm output kept for ReLU's backward. Fallback: the two unfused kernels in turn.
extern Kernel<BatchNormFn> batch_norm_relu_forward;

/// The backward of y = max(batch_norm(x), 0): ReLU's (g where y > 0, else 0; exact) then
/// batch_norm_backward's, with its sums and rounding. y is batch_norm_relu_forward's output.
/// Fallback: the masked gradient materialized, then batch_norm_backward.
using BatchNormReluBackwardFn = void(const Tensor& x, const Tensor& y, const Tensor& g,
                                     const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                                     bool training, Tensor& dx, Tensor& dweight, Tensor& dbias);
extern Kernel<BatchNormReluBackwardFn> batch_norm_relu_backward;

/// y = max_pool2d(max(batch_norm(x), 0)) over 2 x 2 windows every 2, for x [n, c, h, w] with
/// h, w >= 2: batch_norm_relu_forward's statistics, running update and saved mean_out and
/// rstd_out; y [n, c, h / 2, w / 2] in x's dtype, the bits of max pooling over
/// batch_norm_relu_forward's output (each window's first greatest value in row-major order);
/// window (u8, y's shape) the place of that value in its window: 0 top left, 1 top right,
/// 2 bottom left, 3 bottom right; an undefined window is not written (a forward whose result
/// needs no gradient). One pass over x after the statistics, without the full-size output or a
/// 64-bit index. Fallback: batch_norm_relu_forward into a full-size buffer, then
/// max_pool2d_forward, its index turned into window places.
using BatchNormReluPoolFn = void(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                 Tensor& running_mean, Tensor& running_var, BatchNormParams params,
                                 Tensor& y, Tensor& window, Tensor& mean_out, Tensor& rstd_out);
extern Kernel<BatchNormReluPoolFn> batch_norm_relu_pool_forward;

/// The backward of batch_norm_relu_pool_forward: g (y's shape, x's dtype) sent to each window's
/// place where y > 0 (ReLU's mask at the window's winner; exact), +0 everywhere else, then
/// batch_norm_backward's sums and rounding on that full-size gradient. Fallback: ReLU's
/// backward on the pooled values, max_pool2d_backward to the full size, then
/// batch_norm_backward.
using BatchNormReluPoolBackwardFn = void(const Tensor& x, const Tensor& y, const Tensor& window,
                                         const Tensor& g, const Tensor& weight, const Tensor& mean,
                                         const Tensor& rstd, bool training, Tensor& dx,
                                         Tensor& dweight, Tensor& dbias);
extern Kernel<BatchNormReluPoolBackwardFn> batch_norm_relu_pool_backward;

}  // namespace mixp::kernels
