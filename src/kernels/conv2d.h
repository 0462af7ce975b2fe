// conv2d's kernels: the three passes of the convolution (kernels/conv.h's layouts), the bias
// added to its output, and the bias's gradient. Private to mixp.
#pragma once

#include "kernels/conv.h"
#include "kernels/registry.h"

namespace mixp::kernels {

/// One pass of the convolution on (a, b), accumulated in fp32 (the fallback and f64 inputs: in
/// double) and written to out, f32 (f64 for f64 inputs) of the pass's result shape, rounded once.
/// a and b have one floating dtype; f16 and bf16 without native products are widened (exactly)
/// to f32 first.
using Conv2dPassFn = void(const ConvShape& s, const Tensor& a, const Tensor& b, Tensor& out);
/// y [n, o, oh, ow] from (x, weight).
extern Kernel<Conv2dPassFn> conv2d_forward;
/// dx [n, c, h, w] from (dy, weight).
extern Kernel<Conv2dPassFn> conv2d_backward_data;
/// dweight [o, c / groups, kh, kw] from (x, dy).
extern Kernel<Conv2dPassFn> conv2d_backward_weights;

/// dx [n, c, h, w] from (dy, weight), rounded once to dx's dtype: f32 (f64 for f64 inputs) or
/// dy's dtype. Where the CPU multiplies bf16 natively, a bf16 dx is written by oneDNN from its
/// fp32 accumulation, without an fp32 buffer; elsewhere conv2d_backward_data writes an fp32 (f64)
/// buffer, narrowed once.
extern Kernel<Conv2dPassFn> conv2d_backward_data_rounded;

/// Both backward passes of one convolution: dx [n, c, h, w] as conv2d_backward_data_rounded
/// writes it (rounded once to dx's dtype: f32, f64 for f64 inputs, or dy's dtype) and dweight
/// [o, c / groups, kh, kw] as conv2d_backward_weights writes it (f32; f64 for f64 inputs), with
/// their bits. x, dy and weight have one floating dtype. Where oneDNN runs both passes, dy is
/// brought into its layout once (f16, and bf16 without native products, widened once) instead
/// of once per pass.
using Conv2dBackwardFn = void(const ConvShape& s, const Tensor& x, const Tensor& dy,
                              const Tensor& weight, Tensor& dx, Tensor& dweight);
extern Kernel<Conv2dBackwardFn> conv2d_backward;

/// y [n, o, oh, ow] = conv(x, weight) + bias, rounded once to y's dtype: the forward pass of
/// conv2d_forward (in fp32; in double for f64 and in its fallback) then the bias (any floating
/// dtype, or undefined) added in the accumulation dtype as conv2d_add_bias adds it. y is f32
/// (f64 for f64 inputs) or x's dtype. Where the CPU multiplies bf16 natively, a bf16 y is
/// written by the convolution itself, the bias added to its fp32 accumulation, without an fp32
/// buffer; elsewhere through one, narrowed once.
using Conv2dBiasedForwardFn = void(const ConvShape& s, const Tensor& x, const Tensor& weight,
                                   const Tensor& bias, Tensor& y);
extern Kernel<Conv2dBiasedForwardFn> conv2d_biased_forward;

/// y[:, k] += bias[k] for y [n, o, oh, ow] in f32 or f64; bias [o] of any floating dtype,
/// widened to y's dtype first; one addition per element, so the bits do not depend on the
/// candidate.
using Conv2dAddBiasFn = void(Tensor& y, const Tensor& bias);
extern Kernel<Conv2dAddBiasFn> conv2d_add_bias;

/// dbias: g [n, o, oh, ow] summed over n, oh and ow per channel into an f32 tensor [o] (f64 for
/// f64), with the bits of ops::sum(g.to(f32 or f64), {0, 2, 3}): W, then H, then N reduced in
/// turn, each in fp32 (f64 for f64; the fallback, like ops::sum's reference, in double) and
/// rounded to the accumulation dtype.
using Conv2dBiasGradFn = Tensor(const Tensor& g);
extern Kernel<Conv2dBiasGradFn> conv2d_bias_grad;

}  // namespace mixp::kernels
