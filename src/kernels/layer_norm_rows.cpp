// The kernels of kernels/layer_norm_rows.h for the active ISA.
#include "kernels/layer_norm_rows.h"

#include "mixp/cpu.h"

namespace mixp::kernels {
namespace {
bool use_avx512() { return active_isa() >= Isa::avx512; }
}  // namespace

NormStats layer_norm_row_f32(const float* x, int64_t n, const float* w, const float* b, float eps,
                             float* v, float* y) {
  return use_avx512() ? avx512::layer_norm_row_f32(x, n, w, b, eps, v, y)
                      : ref::layer_norm_row_f32(x, n, w, b, eps, v, y);
}

NormStats layer_norm_row_bf16(const float* x, int64_t n, const float* w, const float* b, float eps,
                              float* v, uint16_t* y) {
  return use_avx512() ? avx512::layer_norm_row_bf16(x, n, w, b, eps, v, y)
                      : ref::layer_norm_row_bf16(x, n, w, b, eps, v, y);
}

void layer_norm_backward_row_f32(const float* x, const float* g, const float* w, NormStats s,
                                 int64_t n, const NormBackwardRow& out) {
  use_avx512() ? avx512::layer_norm_backward_row_f32(x, g, w, s, n, out)
               : ref::layer_norm_backward_row_f32(x, g, w, s, n, out);
}

void layer_norm_backward_row_bf16(const float* x, const uint16_t* g, const float* w, NormStats s,
                                  int64_t n, const NormBackwardRow& out) {
  use_avx512() ? avx512::layer_norm_backward_row_bf16(x, g, w, s, n, out)
               : ref::layer_norm_backward_row_bf16(x, g, w, s, n, out);
}

}  // namespace mixp::kernels
