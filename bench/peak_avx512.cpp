// fp32 FMA throughput: 16 independent accumulators cover the FMA latency at 2 issues a cycle
// (12 fell short of that on Zen 5: measured 8 -> 12 -> 16 accumulators, it stops rising at 16).
#include <immintrin.h>

#include "bench/peak_kernels.h"

namespace mixp::bench {

float fma_f32_avx512(int64_t iterations) {
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-4f);
  __m512 c[kPeakAccumulators];
  for (int j = 0; j < kPeakAccumulators; ++j) c[j] = _mm512_set1_ps(float(j));
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < kPeakAccumulators; ++j) c[j] = _mm512_fmadd_ps(c[j], a, b);
  }
  float total = 0;
  for (int j = 0; j < kPeakAccumulators; ++j) {
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, c[j]);
    for (const float v : lanes) total += v;
  }
  return total;
}

}  // namespace mixp::bench
