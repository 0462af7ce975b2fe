// AVX-512 (F, BW, VL, DQ) conversion kernels, 16 elements a step, masked tails.
// fp16 uses the hardware conversions; bf16 and FP8 encoding run the integer rounding of
// mixp/float_types.h lane by lane, which is exact whatever the FPU's FTZ/DAZ modes are.
#include <immintrin.h>

#include <type_traits>

#include "kernels/convert_kernels.h"
#include "kernels/cpu/bf16_round_avx512.h"

namespace mixp::kernels::avx512 {
namespace {

// Runs step(i, mask, full) over blocks of 16 elements. Full blocks use plain loads and
// stores, since masked ones are slow on some CPUs (AMD Zen 4); only the tail is masked.
using Full = std::true_type;
using Tail = std::false_type;
template <typename Step>
inline void for_each_block_of_16(size_t n, Step step) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) step(i, __mmask16(0xffff), Full{});
  if (i < n) step(i, __mmask16((1u << (n - i)) - 1), Tail{});
}

template <typename Block>
inline __m512 load_f32(const float* p, __mmask16 m, Block) {
  if constexpr (Block::value)
    return _mm512_loadu_ps(p);
  else
    return _mm512_maskz_loadu_ps(m, p);
}
template <typename Block>
inline void store_f32(float* p, __mmask16 m, __m512 v, Block) {
  if constexpr (Block::value)
    _mm512_storeu_ps(p, v);
  else
    _mm512_mask_storeu_ps(p, m, v);
}
template <typename Block>
inline __m256i load_u16(const uint16_t* p, __mmask16 m, Block) {
  if constexpr (Block::value)
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  else
    return _mm256_maskz_loadu_epi16(m, p);
}
template <typename Block>
inline void store_u16(uint16_t* p, __mmask16 m, __m256i v, Block) {
  if constexpr (Block::value)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
  else
    _mm256_mask_storeu_epi16(p, m, v);
}
template <typename Block>
inline __m128i load_u8(const uint8_t* p, __mmask16 m, Block) {
  if constexpr (Block::value)
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  else
    return _mm_maskz_loadu_epi8(m, p);
}
template <typename Block>
inline void store_u8(uint8_t* p, __mmask16 m, __m128i v, Block) {
  if constexpr (Block::value)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v);
  else
    _mm_mask_storeu_epi8(p, m, v);
}

// fp32 bits -> FP8 codes in the low byte of each lane; see round_f32_bits_to_narrow.
template <int ExpBits, int ManBits, detail::SpecialCodes Specials>
inline __m512i round_to_fp8(__m512i x, Overflow overflow) {
  constexpr int bias = (1 << (ExpBits - 1)) - 1;
  constexpr int dropped = 23 - ManBits;
  constexpr bool ieee = Specials == detail::SpecialCodes::ieee;
  constexpr unsigned exp_all_ones = (1u << ExpBits) - 1;
  constexpr unsigned man_mask = (1u << ManBits) - 1;
  constexpr unsigned max_code = ieee ? (((exp_all_ones - 1) << ManBits) | man_mask)
                                     : ((exp_all_ones << ManBits) | (man_mask - 1));
  constexpr unsigned all_ones_code = (exp_all_ones << ManBits) | man_mask;
  constexpr unsigned inf_code = exp_all_ones << ManBits;
  constexpr unsigned min_normal_f32_exp = 127 - bias + 1;

  const __m512i one = _mm512_set1_epi32(1);
  const __m512i sign = _mm512_slli_epi32(_mm512_srli_epi32(x, 31), ExpBits + ManBits);
  const __m512i a = _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff));

  // Normal in the target.
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(a, dropped), one);
  const __m512i rounded =
      _mm512_add_epi32(_mm512_add_epi32(a, _mm512_set1_epi32((1 << (dropped - 1)) - 1)), lsb);
  const __m512i code_normal = _mm512_sub_epi32(_mm512_srli_epi32(rounded, dropped),
                                               _mm512_set1_epi32((127 - bias) << ManBits));

  // Subnormal in the target: code = sig * 2^-shift, rounded to nearest even. The shift is
  // capped at 31, where every value rounds to zero, as it must.
  const __m512i exp = _mm512_srli_epi32(a, 23);
  const __m512i sig = _mm512_or_si512(_mm512_and_si512(a, _mm512_set1_epi32(0x7fffff)),
                                      _mm512_set1_epi32(0x800000));
  const __m512i shift = _mm512_min_epi32(
      _mm512_max_epi32(_mm512_sub_epi32(_mm512_set1_epi32(151 - bias - ManBits), exp), one),
      _mm512_set1_epi32(31));
  const __m512i kept = _mm512_srlv_epi32(sig, shift);
  const __m512i rem = _mm512_and_si512(sig, _mm512_sub_epi32(_mm512_sllv_epi32(one, shift), one));
  const __m512i half = _mm512_sllv_epi32(one, _mm512_sub_epi32(shift, one));
  const __mmask16 above_half = _mm512_cmpgt_epu32_mask(rem, half);
  const __mmask16 tie_odd =
      _mm512_mask_test_epi32_mask(_mm512_cmpeq_epi32_mask(rem, half), kept, one);
  const __m512i code_subnormal = _mm512_mask_add_epi32(kept, above_half | tie_odd, kept, one);

  const __mmask16 is_normal = _mm512_cmpge_epu32_mask(exp, _mm512_set1_epi32(min_normal_f32_exp));
  __m512i code = _mm512_mask_blend_epi32(is_normal, code_subnormal, code_normal);

  const __m512i on_overflow = _mm512_set1_epi32(overflow == Overflow::saturate ? max_code
                                                : ieee                         ? inf_code
                                                                               : all_ones_code);
  code = _mm512_mask_blend_epi32(_mm512_cmpgt_epu32_mask(code, _mm512_set1_epi32(max_code)), code,
                                 on_overflow);
  const __mmask16 is_nan = _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x7f800000));
  __m512i nan_code;
  if constexpr (ieee) {
    nan_code = _mm512_or_si512(
        _mm512_set1_epi32(inf_code | (1u << (ManBits - 1))),
        _mm512_and_si512(_mm512_srli_epi32(a, dropped), _mm512_set1_epi32(man_mask)));
  } else {
    nan_code = _mm512_set1_epi32(all_ones_code);
  }
  code = _mm512_mask_blend_epi32(is_nan, code, nan_code);
  return _mm512_or_si512(code, sign);
}

template <int ExpBits, int ManBits, detail::SpecialCodes Specials>
void f32_to_fp8(const float* src, uint8_t* dst, size_t n, float scale, Overflow overflow) {
  const __m512 vscale = _mm512_set1_ps(scale);
  for_each_block_of_16(n, [&](size_t i, __mmask16 m, auto block) {
    const __m512 v = _mm512_mul_ps(load_f32(src + i, m, block), vscale);
    const __m512i code = round_to_fp8<ExpBits, ManBits, Specials>(_mm512_castps_si512(v), overflow);
    store_u8(dst + i, m, _mm512_cvtepi32_epi8(code), block);
  });
}

}  // namespace

void f32_to_f16(const float* src, uint16_t* dst, size_t n) {
  for_each_block_of_16(n, [&](size_t i, __mmask16 m, auto block) {
    const __m256i h =
        _mm512_cvtps_ph(load_f32(src + i, m, block), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    store_u16(dst + i, m, h, block);
  });
}

void f16_to_f32(const uint16_t* src, float* dst, size_t n) {
  for_each_block_of_16(n, [&](size_t i, __mmask16 m, auto block) {
    store_f32(dst + i, m, _mm512_cvtph_ps(load_u16(src + i, m, block)), block);
  });
}

void f32_round_to_f16(const float* src, float* dst, size_t n) {
  for_each_block_of_16(n, [&](size_t i, __mmask16 m, auto block) {
    const __m256i h =
        _mm512_cvtps_ph(load_f32(src + i, m, block), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    store_f32(dst + i, m, _mm512_cvtph_ps(h), block);
  });
}

void f32_to_bf16(const float* src, uint16_t* dst, size_t n) {
  // 32 a step: packus narrows per 128-bit lane, and the permute puts the quarters in order.
  const __m512i order = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512i lo = round_to_bf16(_mm512_castps_si512(_mm512_loadu_ps(src + i)));
    const __m512i hi = round_to_bf16(_mm512_castps_si512(_mm512_loadu_ps(src + i + 16)));
    _mm512_storeu_si512(dst + i, _mm512_permutexvar_epi64(order, _mm512_packus_epi32(lo, hi)));
  }
  for_each_block_of_16(n - i, [&](size_t j, __mmask16 m, auto block) {
    const __m512i r = round_to_bf16(_mm512_castps_si512(load_f32(src + i + j, m, block)));
    store_u16(dst + i + j, m, _mm512_cvtepi32_epi16(r), block);
  });
}

void bf16_to_f32(const uint16_t* src, float* dst, size_t n) {
  for_each_block_of_16(n, [&](size_t i, __mmask16 m, auto block) {
    const __m512i x = _mm512_cvtepu16_epi32(load_u16(src + i, m, block));
    store_f32(dst + i, m, _mm512_castsi512_ps(_mm512_slli_epi32(x, 16)), block);
  });
}

void f32_to_e4m3(const float* src, uint8_t* dst, size_t n, float scale, Overflow overflow) {
  f32_to_fp8<4, 3, detail::SpecialCodes::finite_nan_at_all_ones>(src, dst, n, scale, overflow);
}

void f32_to_e5m2(const float* src, uint8_t* dst, size_t n, float scale, Overflow overflow) {
  f32_to_fp8<5, 2, detail::SpecialCodes::ieee>(src, dst, n, scale, overflow);
}

void e4m3_to_f32(const uint8_t* src, float* dst, size_t n, float scale_inv) {
  // (code & 0x7f) << 7 read as fp16 is the E4M3 value times 2^-8, subnormals included, since
  // the two formats differ only in exponent bias (15 against 7) and width.
  const __m512 vscale = _mm512_set1_ps(scale_inv);
  for_each_block_of_16(n, [&](size_t i, __mmask16 m, auto block) {
    const __m512i code = _mm512_cvtepu8_epi32(load_u8(src + i, m, block));
    const __m512i magnitude = _mm512_and_si512(code, _mm512_set1_epi32(0x7f));
    const __m512i sign = _mm512_slli_epi32(_mm512_srli_epi32(code, 7), 31);
    const __m256i half_bits = _mm512_cvtepi32_epi16(_mm512_slli_epi32(magnitude, 7));
    __m512i v =
        _mm512_castps_si512(_mm512_mul_ps(_mm512_cvtph_ps(half_bits), _mm512_set1_ps(256.0f)));
    v = _mm512_mask_blend_epi32(_mm512_cmpeq_epi32_mask(magnitude, _mm512_set1_epi32(0x7f)), v,
                                _mm512_set1_epi32(0x7fc00000));
    const __m512 value = _mm512_castsi512_ps(_mm512_or_si512(v, sign));
    store_f32(dst + i, m, _mm512_mul_ps(value, vscale), block);
  });
}

void e5m2_to_f32(const uint8_t* src, float* dst, size_t n, float scale_inv) {
  // An E5M2 code is the top byte of the fp16 with the same value.
  const __m512 vscale = _mm512_set1_ps(scale_inv);
  for_each_block_of_16(n, [&](size_t i, __mmask16 m, auto block) {
    const __m256i half_bits =
        _mm256_slli_epi16(_mm256_cvtepu8_epi16(load_u8(src + i, m, block)), 8);
    store_f32(dst + i, m, _mm512_mul_ps(_mm512_cvtph_ps(half_bits), vscale), block);
  });
}

}  // namespace mixp::kernels::avx512
