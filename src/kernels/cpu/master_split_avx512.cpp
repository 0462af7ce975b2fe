// kernels/master_split.h on AVX-512 F and BW, 16 elements a step: a step's 16 tie bits are one
// mask register, two bytes of the tie buffer. The tail goes to ref::, from a byte boundary.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/bf16_round_avx512.h"
#include "kernels/master_split_isa.h"

namespace mixp::kernels::avx512 {
namespace {

__mmask16 is_nan_bf16(__m512i p) {
  return _mm512_cmpgt_epu32_mask(_mm512_and_si512(p, _mm512_set1_epi32(0x7fff)),
                                 _mm512_set1_epi32(0x7f80));
}

}  // namespace

void split_master_bf16(const float* master, int64_t n, uint16_t* param, uint16_t* low,
                       uint8_t* ties) {
  const __m512i low_mask = _mm512_set1_epi32(0xffff), half = _mm512_set1_epi32(0x8000);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i x = _mm512_castps_si512(_mm512_loadu_ps(master + i));
    const __m512i p = round_to_bf16(x);
    const __m512i l = _mm512_and_si512(x, low_mask);
    const __mmask16 rounded_up = _mm512_cmpneq_epu32_mask(p, _mm512_srli_epi32(x, 16));
    const __mmask16 tie = _mm512_mask_cmpeq_epu32_mask(rounded_up, l, half) & ~is_nan_bf16(p);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(param + i), _mm512_cvtepi32_epi16(p));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(low + i), _mm512_cvtepi32_epi16(l));
    const uint16_t bits = uint16_t(tie);
    std::memcpy(ties + i / 8, &bits, sizeof bits);  // little-endian: element i is bit 0
  }
  ref::split_master_bf16(master + i, n - i, param + i, low + i, ties + i / 8);
}

void join_master_bf16(const uint16_t* param, const uint16_t* low, const uint8_t* ties, int64_t n,
                      float* master) {
  const __m512i half = _mm512_set1_epi32(0x8000), one = _mm512_set1_epi32(1);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i p =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(param + i)));
    const __m512i l =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(low + i)));
    uint16_t bits;
    std::memcpy(&bits, ties + i / 8, sizeof bits);
    const __mmask16 tie = __mmask16(bits);
    const __mmask16 up =
        (_mm512_cmpgt_epu32_mask(l, half) | (_mm512_cmpeq_epu32_mask(l, half) & tie)) &
        ~is_nan_bf16(p);
    const __m512i top = _mm512_mask_sub_epi32(p, up, p, one);
    _mm512_storeu_si512(master + i, _mm512_or_si512(_mm512_slli_epi32(top, 16), l));
  }
  ref::join_master_bf16(param + i, low + i, ties + i / 8, n - i, master + i);
}

}  // namespace mixp::kernels::avx512
