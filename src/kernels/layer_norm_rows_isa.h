// The implementations of kernels/layer_norm_rows.h's row kernels: the scalar ones (ref,
// kernels/ref/layer_norm_rows_ref.cpp) and the AVX-512 ones (kernels/cpu/, compiled with its
// flags), which give the same bits; and the types they share. Light on purpose: the ISA files
// include it. Private to mixp.
#pragma once

#include <cstdint>

namespace mixp::kernels {

/// A row's mean and 1 / sqrt(variance + eps).
struct NormStats {
  float mean, rstd;
};

/// Where layer_norm_backward_row_* writes: xhat and gw are n floats of scratch; pw and pb hold
/// running sums over rows; dx is the row's input gradient, or null when none is wanted. dx may
/// be the row's x.
struct NormBackwardRow {
  float *xhat, *gw, *pw, *pb, *dx;
};

namespace ref {
NormStats layer_norm_row_f32(const float* x, int64_t n, const float* w, const float* b, float eps,
                             float* v, float* y);
NormStats layer_norm_row_bf16(const float* x, int64_t n, const float* w, const float* b, float eps,
                              float* v, uint16_t* y);
void layer_norm_backward_row_f32(const float* x, const float* g, const float* w, NormStats s,
                                 int64_t n, const NormBackwardRow& out);
void layer_norm_backward_row_bf16(const float* x, const uint16_t* g, const float* w, NormStats s,
                                  int64_t n, const NormBackwardRow& out);
}  // namespace ref

namespace avx512 {
NormStats layer_norm_row_f32(const float* x, int64_t n, const float* w, const float* b, float eps,
                             float* v, float* y);
NormStats layer_norm_row_bf16(const float* x, int64_t n, const float* w, const float* b, float eps,
                              float* v, uint16_t* y);
void layer_norm_backward_row_f32(const float* x, const float* g, const float* w, NormStats s,
                                 int64_t n, const NormBackwardRow& out);
void layer_norm_backward_row_bf16(const float* x, const uint16_t* g, const float* w, NormStats s,
                                  int64_t n, const NormBackwardRow& out);
}  // namespace avx512

}  // namespace mixp::kernels
