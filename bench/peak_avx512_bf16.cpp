// bf16 dot-product throughput: vdpbf16ps multiplies 32 bf16 pairs and accumulates each
// adjacent pair into one of 16 fp32 lanes; 16 independent accumulators cover its latency.
#include <immintrin.h>

#include "bench/peak_kernels.h"

namespace mixp::bench {

float dpbf16_avx512_bf16(int64_t iterations) {
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.25f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(-1e-3f));
  __m512 c[kPeakAccumulators];
  for (int j = 0; j < kPeakAccumulators; ++j) c[j] = _mm512_set1_ps(float(j));
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < kPeakAccumulators; ++j) c[j] = _mm512_dpbf16_ps(c[j], a, b);
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
