// The Adam / AdamW element update on fp32 buffers, vectorized. Private to mixp.
//
// For each element, in this order and each operation rounded once in fp32 (the order of
// PyTorch's single-tensor implementation; optim/adam_update.h's f64 rule in double):
//   g = g + l2 * w;  w = w * shrink;  m = m + b1 * (g - m);  v = beta2 * v + b2 * g * g;
//   w = w - step_size * (m / (sqrt(v) / bc2_sqrt + eps))
// The AdamW presets have l2 = 0 and shrink = 1 - lr * weight_decay; Adam the reverse. The
// AVX-512 kernel runs the same IEEE operations as the scalar one in kernels/ref, so both give
// the same bits.
#pragma once

#include <cstdint>

namespace mixp::kernels {

struct AdamConstants {
  float step_size, bc2_sqrt, b1, beta2, b2, eps, l2, shrink;
};

/// w, m, v updated in place from g, over n elements: the scalar kernel and the AVX-512 one,
/// which gives its bits. The optimizers' candidates (kernels/weight_update.h) call them by name.
namespace ref {
void adam_f32(float* w, const float* g, float* m, float* v, int64_t n, const AdamConstants& c);
}
namespace avx512 {
void adam_f32(float* w, const float* g, float* m, float* v, int64_t n, const AdamConstants& c);
}

}  // namespace mixp::kernels
