// AVX2 + F16C conversion kernels, 8 or 16 elements a step; the tails go to the reference.
// FP8 encoding has an AVX-512 kernel only; on a CPU with AVX2 but not AVX-512 it runs the
// reference.
#include <immintrin.h>

#include "kernels/convert_kernels.h"

namespace mixp::kernels::avx2 {

void f32_to_f16(const float* src, uint16_t* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h =
        _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  ref::f32_to_f16(src + i, dst + i, n - i);
}

void f16_to_f32(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  ref::f16_to_f32(src + i, dst + i, n - i);
}

namespace {
// Round 8 fp32 bit patterns to bf16, one per 32-bit lane; see round_f32_bits_to_bf16.
inline __m256i round_to_bf16(__m256i x) {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
  const __m256i quiet_nan = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
  // |x| > inf as signed integers, which is safe once the sign bit is cleared.
  const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)),
                                            _mm256_set1_epi32(0x7f800000));
  return _mm256_blendv_epi8(rounded, quiet_nan, is_nan);
}
}  // namespace

void f32_to_bf16(const float* src, uint16_t* dst, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i lo = round_to_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    const __m256i hi =
        round_to_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 8)));
    // packus works per 128-bit half; the permute puts the four quarters back in order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), packed);
  }
  ref::f32_to_bf16(src + i, dst + i, n - i);
}

void bf16_to_f32(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i x =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_slli_epi32(x, 16));
  }
  ref::bf16_to_f32(src + i, dst + i, n - i);
}

void e4m3_to_f32(const uint8_t* src, float* dst, size_t n, float scale_inv) {
  // See the AVX-512 kernel: E4M3 is fp16 with a smaller bias, read off by a multiply by 2^8.
  const __m256 vscale = _mm256_set1_ps(scale_inv);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i code =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + i)));
    const __m256i magnitude = _mm256_and_si256(code, _mm256_set1_epi32(0x7f));
    const __m256i sign = _mm256_slli_epi32(_mm256_srli_epi32(code, 7), 31);
    // Pack the eight fp16 patterns (each < 2^15) into 16-bit lanes.
    const __m256i half32 = _mm256_slli_epi32(magnitude, 7);
    const __m128i half16 =
        _mm_packus_epi32(_mm256_castsi256_si128(half32), _mm256_extracti128_si256(half32, 1));
    __m256i v = _mm256_castps_si256(_mm256_mul_ps(_mm256_cvtph_ps(half16), _mm256_set1_ps(256.0f)));
    const __m256i is_nan = _mm256_cmpeq_epi32(magnitude, _mm256_set1_epi32(0x7f));
    v = _mm256_blendv_epi8(v, _mm256_set1_epi32(0x7fc00000), is_nan);
    const __m256 value = _mm256_castsi256_ps(_mm256_or_si256(v, sign));
    _mm256_storeu_ps(dst + i, _mm256_mul_ps(value, vscale));
  }
  ref::e4m3_to_f32(src + i, dst + i, n - i, scale_inv);
}

void e5m2_to_f32(const uint8_t* src, float* dst, size_t n, float scale_inv) {
  // An E5M2 code is the top byte of the fp16 with the same value.
  const __m256 vscale = _mm256_set1_ps(scale_inv);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i half = _mm_slli_epi16(
        _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + i))), 8);
    _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_cvtph_ps(half), vscale));
  }
  ref::e5m2_to_f32(src + i, dst + i, n - i, scale_inv);
}

}  // namespace mixp::kernels::avx2
