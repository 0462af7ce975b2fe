// 2-d convolution with fp32 accumulation, in the three passes training needs. Private to mixp.
//   fast: oneDNN convolution for f32 and bf16 inputs (bf16 only where the CPU has AVX-512
//         BF16, kernels::gemm_fast_has_bf16(); the caller widens otherwise), f32 output (the
//         forward and the backward-data of bf16 inputs also bf16, the forward with the bias
//         added before the rounding).
//   reference: plain loops accumulating in double; f64 output for f64 inputs, else f32.
// Layouts are PyTorch's, contiguous: x [n, c, h, w], weight [o, c / groups, kh, kw],
// y [n, o, oh, ow].
#pragma once

#include <cstdint>

#include "mixp/dtype.h"

namespace mixp::kernels {

struct ConvShape {
  int64_t n = 0, c = 0, h = 0, w = 0;  ///< input
  int64_t o = 0, kh = 0, kw = 0;       ///< weight
  int64_t oh = 0, ow = 0;              ///< output
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
};

/// y = conv(x, weight). in: f32 or bf16.
void conv2d_forward_fast(const ConvShape& s, DType in, const void* x, const void* weight, float* y);
/// y = conv(x, weight) + bias: bias (f32 [o], or null) added to the fp32 accumulation and the sum
/// rounded once to out, f32 or (for bf16 inputs) bf16, so that a bf16 result needs no fp32
/// buffer.
void conv2d_forward_fast_to(const ConvShape& s, DType in, const void* x, const void* weight,
                            const float* bias, DType out, void* y);
/// dx = the gradient of conv with respect to x, from dy and weight.
void conv2d_backward_data_fast(const ConvShape& s, DType in, const void* dy, const void* weight,
                               float* dx);
/// The same rounded once from the fp32 accumulation to out: f32 or (for bf16 inputs) bf16, so
/// that a bf16 gradient needs no fp32 buffer.
void conv2d_backward_data_fast_to(const ConvShape& s, DType in, const void* dy, const void* weight,
                                  DType out, void* dx);
/// dweight = the gradient of conv with respect to weight, from x and dy.
void conv2d_backward_weights_fast(const ConvShape& s, DType in, const void* x, const void* dy,
                                  float* dweight);

/// dx as conv2d_backward_data_fast_to writes it (dx_type f32, or bf16 for bf16 inputs) and
/// dweight as conv2d_backward_weights_fast, in one call that reorders dy into oneDNN's layout
/// once for both passes where they chose the same layout: the same bits as the two calls.
void conv2d_backward_fast(const ConvShape& s, DType in, const void* x, const void* dy,
                          const void* weight, DType dx_type, void* dx, float* dweight);

/// The same three with in: f32, f64, f16 or bf16; the result is double* for f64, else float*.
void conv2d_forward_reference(const ConvShape& s, DType in, const void* x, const void* weight,
                              void* y);
void conv2d_backward_data_reference(const ConvShape& s, DType in, const void* dy,
                                    const void* weight, void* dx);
void conv2d_backward_weights_reference(const ConvShape& s, DType in, const void* x, const void* dy,
                                       void* dweight);

}  // namespace mixp::kernels
