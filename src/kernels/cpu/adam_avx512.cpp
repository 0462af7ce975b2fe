// kernels/adam.h on AVX-512 F, 16 elements a step, the operations of the scalar kernel in its
// order (no fused multiply-adds: they would round differently); the tail goes to ref::.
#include <immintrin.h>

#include "kernels/adam.h"

namespace mixp::kernels::avx512 {

void adam_f32(float* w, const float* g, float* m, float* v, int64_t n, const AdamConstants& c) {
  const __m512 l2 = _mm512_set1_ps(c.l2), shrink = _mm512_set1_ps(c.shrink),
               b1 = _mm512_set1_ps(c.b1), beta2 = _mm512_set1_ps(c.beta2),
               b2 = _mm512_set1_ps(c.b2), bc2 = _mm512_set1_ps(c.bc2_sqrt),
               eps = _mm512_set1_ps(c.eps), step = _mm512_set1_ps(c.step_size);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 wi = _mm512_loadu_ps(w + i), mi = _mm512_loadu_ps(m + i),
                 vi = _mm512_loadu_ps(v + i);
    const __m512 gi = _mm512_add_ps(_mm512_loadu_ps(g + i), _mm512_mul_ps(l2, wi));
    const __m512 ws = _mm512_mul_ps(wi, shrink);
    const __m512 mn = _mm512_add_ps(mi, _mm512_mul_ps(b1, _mm512_sub_ps(gi, mi)));
    const __m512 vn =
        _mm512_add_ps(_mm512_mul_ps(beta2, vi), _mm512_mul_ps(_mm512_mul_ps(b2, gi), gi));
    const __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vn), bc2), eps);
    _mm512_storeu_ps(m + i, mn);
    _mm512_storeu_ps(v + i, vn);
    _mm512_storeu_ps(w + i, _mm512_sub_ps(ws, _mm512_mul_ps(step, _mm512_div_ps(mn, denom))));
  }
  ref::adam_f32(w + i, g + i, m + i, v + i, n - i, c);
}

}  // namespace mixp::kernels::avx512
