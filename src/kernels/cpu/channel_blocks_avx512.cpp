// kernels/channel_blocks_isa.h on AVX-512 BW/VL: 16 pixels of a block's 16 channels at a time,
// a 16 x 16 matrix of 16-bit values in 16 ymm registers, transposed in four rounds of 16
// unpacks and lane permutes (words, dwords, qwords, 128-bit lanes). Only the tail of fewer
// than 16 pixels is loaded and stored with masks: with masked loads and stores throughout, on
// images coming from memory, the transposes took twice oneDNN's reorder time in the cnn's step
// (630 against 320 us a call, one thread), against 0.6 times with plain ones. Into the blocks,
// each plane is read 32 pixels (a 64-byte line) at a time for two transposes: 16 planes read
// at once, 32 bytes from each, took 1.4 times as long.
#include <immintrin.h>

#include "kernels/channel_blocks_isa.h"

namespace mixp::kernels::avx512 {
namespace {

// r[k] holds row k's 16 words; afterwards r[i] holds column i's, row k in word k.
void transpose16x16_words(__m256i r[16]) {
  // a[2 k], a[2 k + 1], in 128-bit lane L: the dwords (row 2 k, row 2 k + 1) at columns
  // 8 L + 0..3 and 8 L + 4..7.
  __m256i a[16];
  for (int k = 0; k < 8; ++k) {
    a[2 * k] = _mm256_unpacklo_epi16(r[2 * k], r[2 * k + 1]);
    a[2 * k + 1] = _mm256_unpackhi_epi16(r[2 * k], r[2 * k + 1]);
  }
  // b[4 m + j], in lane L: the qwords of rows 4 m..4 m + 3 at columns 8 L + 2 j, 8 L + 2 j + 1.
  __m256i b[16];
  for (int m = 0; m < 4; ++m) {
    b[4 * m] = _mm256_unpacklo_epi32(a[4 * m], a[4 * m + 2]);
    b[4 * m + 1] = _mm256_unpackhi_epi32(a[4 * m], a[4 * m + 2]);
    b[4 * m + 2] = _mm256_unpacklo_epi32(a[4 * m + 1], a[4 * m + 3]);
    b[4 * m + 3] = _mm256_unpackhi_epi32(a[4 * m + 1], a[4 * m + 3]);
  }
  // c[8 q + i], in lane L: rows 8 q..8 q + 7 at column 8 L + i.
  __m256i c[16];
  for (int q = 0; q < 2; ++q) {
    for (int j = 0; j < 4; ++j) {
      c[8 * q + 2 * j] = _mm256_unpacklo_epi64(b[8 * q + j], b[8 * q + 4 + j]);
      c[8 * q + 2 * j + 1] = _mm256_unpackhi_epi64(b[8 * q + j], b[8 * q + 4 + j]);
    }
  }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm256_permute2x128_si256(c[i], c[8 + i], 0x20);
    r[8 + i] = _mm256_permute2x128_si256(c[i], c[8 + i], 0x31);
  }
}

__mmask16 first(int64_t count) { return __mmask16((1u << count) - 1); }

}  // namespace

void planes_to_channel_block16(const uint16_t* planes, int64_t hw, uint16_t* blocked) {
  int64_t p0 = 0;
  for (; p0 + 32 <= hw; p0 += 32) {
    __m256i lo[16], hi[16];
    for (int k = 0; k < 16; ++k) {
      const __m512i z = _mm512_loadu_si512(planes + k * hw + p0);
      lo[k] = _mm512_castsi512_si256(z);
      hi[k] = _mm512_extracti64x4_epi64(z, 1);
    }
    transpose16x16_words(lo);
    transpose16x16_words(hi);
    for (int i = 0; i < 16; ++i) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(blocked + (p0 + i) * 16), lo[i]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(blocked + (p0 + 16 + i) * 16), hi[i]);
    }
  }
  for (int64_t p = p0; p < hw; p += 16) {
    const int64_t count = hw - p < 16 ? hw - p : 16;
    __m256i r[16];
    if (count == 16) {
      for (int k = 0; k < 16; ++k)
        r[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(planes + k * hw + p));
    } else {
      for (int k = 0; k < 16; ++k)
        r[k] = _mm256_maskz_loadu_epi16(first(count), planes + k * hw + p);
    }
    transpose16x16_words(r);
    for (int64_t i = 0; i < count; ++i)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(blocked + (p + i) * 16), r[i]);
  }
}

void channel_block16_to_planes(const uint16_t* blocked, int64_t hw, uint16_t* planes) {
  for (int64_t p = 0; p < hw; p += 16) {
    const int64_t count = hw - p < 16 ? hw - p : 16;
    __m256i r[16];
    for (int64_t i = 0; i < 16; ++i) {
      r[i] = i < count
                 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocked + (p + i) * 16))
                 : _mm256_setzero_si256();
    }
    transpose16x16_words(r);
    if (count == 16) {
      for (int k = 0; k < 16; ++k)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(planes + k * hw + p), r[k]);
    } else {
      for (int k = 0; k < 16; ++k)
        _mm256_mask_storeu_epi16(planes + k * hw + p, first(count), r[k]);
    }
  }
}

}  // namespace mixp::kernels::avx512
