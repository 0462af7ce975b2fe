// The scalar Adam update of kernels/adam.h: the bits of every ISA's kernel.
#include <cmath>

#include "kernels/adam.h"

namespace mixp::kernels::ref {

void adam_f32(float* w, const float* g, float* m, float* v, int64_t n, const AdamConstants& c) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] + c.l2 * w[i];
    const float wi = w[i] * c.shrink;
    m[i] = m[i] + c.b1 * (gi - m[i]);
    v[i] = c.beta2 * v[i] + c.b2 * gi * gi;
    const float denom = std::sqrt(v[i]) / c.bc2_sqrt + c.eps;
    w[i] = wi - c.step_size * (m[i] / denom);
  }
}

}  // namespace mixp::kernels::ref
