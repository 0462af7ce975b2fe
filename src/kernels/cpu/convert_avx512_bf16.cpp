// fp32 -> bf16 with the AVX-512 BF16 instruction vcvtne2ps2bf16, 32 elements a step. It rounds
// to nearest even and quiets NaNs exactly as mixp does, but it treats fp32 subnormal inputs as
// zero (DAZ), so the lanes with a zero exponent field and a nonzero mantissa are redone with
// the integer rounding (kernels/cpu/bf16_round_avx512_bf16.h). Only the tail is masked.
#include "kernels/convert_kernels.h"
#include "kernels/cpu/bf16_round_avx512_bf16.h"

namespace mixp::kernels::avx512_bf16 {

void f32_to_bf16(const float* src, uint16_t* dst, size_t n) {
  rows_to_bf16(int64_t(n), dst,
               [&](int64_t i, __mmask16 m) { return _mm512_maskz_loadu_ps(m, src + i); });
}

}  // namespace mixp::kernels::avx512_bf16
