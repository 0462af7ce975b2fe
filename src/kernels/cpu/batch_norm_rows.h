// Batch norm's passes over one run of bf16 or f16 values of a channel, widened and rounded in
// registers on AVX-512 BF16 (kernels/cpu/batch_norm_avx512_bf16.cpp), for the chunked kernels
// of kernels/cpu/batch_norm.cpp and kernels/cpu/batch_norm_relu_pool.cpp: the same operations
// in the same order as their fp32 loops over a widened copy, and the sums in sum_f32's and
// dot_f32's lanes, so the same bits, without the copy. Private to mixp.
#pragma once

#include <cstdint>

namespace mixp::kernels::avx512_bf16 {

/// The 16-bit format of a run: bf16 (widened by a shift, rounded by vcvtne2ps2bf16 with the
/// subnormal fix-up) or f16 (vcvtph2ps and vcvtps2ph, which round as mixp does).
enum class Half : uint8_t { bf16, f16 };

/// sum_f32 (kernels/vmath.h) of the run widened: the same lanes, order and fold.
float batch_norm_sum(Half fmt, const uint16_t* x, int64_t n);
/// dot_f32(d, d) of d[i] = x[i] - mean, x widened.
float batch_norm_centered_squares(Half fmt, const uint16_t* x, int64_t n, float mean);
/// sum_f32(g') and dot_f32(g', xhat) with xhat[i] = (x[i] - mean) * rstd and g' as below.
void batch_norm_grad_sums(Half fmt, const uint16_t* x, const uint16_t* g, const uint16_t* relu_y,
                          int64_t n, float mean, float rstd, float& sum_g, float& sum_gx);

/// y[i] = round(v), v = ((x[i] - mean) * rstd) * scale + shift, or max(v, 0) with relu (a NaN
/// and -0 give +0, as the fp32 loop's v > 0 ? v : 0).
void batch_norm_rows(Half fmt, const uint16_t* x, uint16_t* y, int64_t n, float mean, float rstd,
                     float scale, float shift, bool relu);

/// dx[i] = round((scale * rstd) * ((g' - mean_g) - ((x[i] - mean) * rstd) * mean_gx)) in
/// training, round((scale * rstd) * g') in evaluation, with g' = g[i], or with relu_y (not null)
/// g[i] where relu_y[i]'s bits are not zero and 0 elsewhere.
void batch_norm_grad_rows(Half fmt, const uint16_t* x, const uint16_t* g, const uint16_t* relu_y,
                          uint16_t* dx, int64_t n, float mean, float rstd, float scale,
                          float mean_g, float mean_gx, bool training);

/// One plane [h, w] of x normalized and cut at zero as batch_norm_rows with relu, each value
/// rounded, then its 2 x 2 windows every 2 (oh = h / 2, ow = w / 2; a last odd row or column is
/// read by none): y [oh, ow] the first greatest rounded value of each window in row-major order
/// and window [oh, ow] its place in the window (0 top left, 1 top right, 2 bottom left, 3 bottom
/// right; not written where window is null), the bits and choices of max pooling over
/// batch_norm_rows' output.
void batch_norm_relu_pool_plane(Half fmt, const uint16_t* x, int64_t h, int64_t w, uint16_t* y,
                                uint8_t* window, float mean, float rstd, float scale, float shift);

/// The backward's scatter of batch_norm_relu_pool_plane: out [h, w] (16-bit values) holds g [oh,
/// ow] at each window's place where y's bits and g's magnitude bits are not zero (ReLU's mask;
/// a zero g becomes +0), and +0 everywhere else, the last odd row and column included.
void batch_norm_relu_pool_scatter_plane(const uint16_t* y, const uint8_t* window, const uint16_t* g,
                                        int64_t h, int64_t w, uint16_t* out);

}  // namespace mixp::kernels::avx512_bf16
