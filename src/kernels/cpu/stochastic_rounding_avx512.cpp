// kernels/stochastic_rounding.h on AVX-512 F: Philox4x32-10 on 16 blocks at once (one block
// per 32-bit lane), and the stochastic bf16 rounding 16 elements a step. The tails go to the
// scalar versions.
#include <immintrin.h>

#include "kernels/stochastic_rounding_isa.h"

namespace mixp::kernels::avx512 {
namespace {

// The high and low halves of the 32 x 32-bit products of each lane with k.
inline void mulhilo(__m512i a, __m512i k, __m512i& hi, __m512i& lo) {
  const __m512i even = _mm512_mul_epu32(a, k);                        // lanes 0, 2, ...
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), k);  // lanes 1, 3, ...
  hi = _mm512_mask_blend_epi32(0xaaaa, _mm512_srli_epi64(even, 32), odd);
  lo = _mm512_mask_blend_epi32(0xaaaa, even, _mm512_slli_epi64(odd, 32));
}

}  // namespace

void philox_blocks(const PhiloxState& state, uint64_t block, uint32_t* out, uint64_t blocks) {
  // The constants of core/random.cpp's scalar Philox4x32-10.
  const __m512i mul0 = _mm512_set1_epi32(int(0xD2511F53u)),
                mul1 = _mm512_set1_epi32(int(0xCD9E8D57u));
  const uint32_t weyl0 = 0x9E3779B9u, weyl1 = 0xBB67AE85u;
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i stream_lo = _mm512_set1_epi32(int(uint32_t(state.stream)));
  const __m512i stream_hi = _mm512_set1_epi32(int(uint32_t(state.stream >> 32)));
  for (uint64_t b = 0; b < blocks; b += 16) {
    // Counter {block (64 bits), stream (64 bits)}, with the carry between the block's halves.
    const uint64_t first = block + b;
    const __m512i base = _mm512_set1_epi32(int(uint32_t(first)));
    __m512i c0 = _mm512_add_epi32(base, iota);
    const __mmask16 carry = _mm512_cmplt_epu32_mask(c0, base);
    __m512i c1 =
        _mm512_mask_add_epi32(_mm512_set1_epi32(int(uint32_t(first >> 32))), carry,
                              _mm512_set1_epi32(int(uint32_t(first >> 32))), _mm512_set1_epi32(1));
    __m512i c2 = stream_lo, c3 = stream_hi;
    uint32_t k0 = uint32_t(state.seed), k1 = uint32_t(state.seed >> 32);
    for (int round = 0; round < 10; ++round) {
      __m512i hi0, lo0, hi1, lo1;
      mulhilo(c0, mul0, hi0, lo0);
      mulhilo(c2, mul1, hi1, lo1);
      c0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32(int(k0)));
      c1 = lo1;
      c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32(int(k1)));
      c3 = lo0;
      k0 += weyl0;
      k1 += weyl1;
    }
    // Lane j holds block j's four words in c0..c3; out wants them block by block.
    const __m512i t0 = _mm512_unpacklo_epi32(c0, c1), t1 = _mm512_unpackhi_epi32(c0, c1);
    const __m512i t2 = _mm512_unpacklo_epi32(c2, c3), t3 = _mm512_unpackhi_epi32(c2, c3);
    const __m512i u0 = _mm512_unpacklo_epi64(t0, t2);                         // blocks 0, 4, 8, 12
    const __m512i u1 = _mm512_unpackhi_epi64(t0, t2);                         // blocks 1, 5, 9, 13
    const __m512i u2 = _mm512_unpacklo_epi64(t1, t3);                         // blocks 2, 6, 10, 14
    const __m512i u3 = _mm512_unpackhi_epi64(t1, t3);                         // blocks 3, 7, 11, 15
    const __m512i a = _mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(1, 0, 1, 0));  // 0, 4, 1, 5
    const __m512i c = _mm512_shuffle_i32x4(u2, u3, _MM_SHUFFLE(1, 0, 1, 0));  // 2, 6, 3, 7
    const __m512i d = _mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(3, 2, 3, 2));  // 8, 12, 9, 13
    const __m512i e = _mm512_shuffle_i32x4(u2, u3, _MM_SHUFFLE(3, 2, 3, 2));  // 10, 14, 11, 15
    uint32_t* o = out + 4 * b;
    _mm512_storeu_si512(o, _mm512_shuffle_i32x4(a, c, _MM_SHUFFLE(2, 0, 2, 0)));
    _mm512_storeu_si512(o + 16, _mm512_shuffle_i32x4(a, c, _MM_SHUFFLE(3, 1, 3, 1)));
    _mm512_storeu_si512(o + 32, _mm512_shuffle_i32x4(d, e, _MM_SHUFFLE(2, 0, 2, 0)));
    _mm512_storeu_si512(o + 48, _mm512_shuffle_i32x4(d, e, _MM_SHUFFLE(3, 1, 3, 1)));
  }
}

void round_bf16_stochastic(const float* x, const uint32_t* words, unsigned shift, int64_t n,
                           uint16_t* out) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i low16 = _mm512_set1_epi32(0xffff), quiet = _mm512_set1_epi32(0x40);
  const __m128i count = _mm_cvtsi32_si128(int(shift));
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i v = _mm512_castps_si512(_mm512_loadu_ps(x + i));
    const __m512i r =
        _mm512_and_si512(_mm512_srl_epi32(_mm512_loadu_si512(words + i), count), low16);
    const __m512i a = _mm512_and_si512(v, abs_mask);
    const __mmask16 special = _mm512_cmpge_epu32_mask(a, inf);  // infinities and NaNs
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(a, inf);
    __m512i y = _mm512_mask_add_epi32(v, ~special, v, r);  // specials are not rounded
    y = _mm512_srli_epi32(y, 16);
    y = _mm512_mask_or_epi32(y, nan, y, quiet);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm512_cvtepi32_epi16(y));
  }
  ref::round_bf16_stochastic(x + i, words + i, shift, n - i, out + i);
}

}  // namespace mixp::kernels::avx512
