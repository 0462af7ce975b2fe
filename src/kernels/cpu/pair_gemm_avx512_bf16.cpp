// The pair products and packings of kernels/pair_gemm.h with AVX-512 BF16. A tile of up to 6
// rows by 64 columns keeps 24 accumulators in registers: per pair of k, 4 loads of B, 6
// broadcasts of A and 24 vdpbf16ps, enough independent sums to keep both units busy. From a B
// panel read straight through they run at 95-97% of the one-core peak from L2, at 80-90% on
// the attention's sizes (docs/performance.md). A tile stores its fp32 sums, or adds the bias
// and rounds them to bf16 itself. Also here: the packing that sums a linear layer's output
// gradient for its bias. The attention's P and dS rows are in attention_rows_avx512_bf16.cpp.
#include "kernels/cpu/bf16_round_avx512_bf16.h"
#include "kernels/cpu/transpose16_avx512.h"
#include "kernels/pair_gemm.h"

// GCC 12 takes the _mm512_undefined pass-through operand inside some AVX-512 intrinsics
// (unpacks, shuffles, extracts, widenings) for an uninitialized read where they are inlined
// into the fp32 packings and the widening stores; that operand is never read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace mixp::kernels::avx512_bf16 {
namespace {

// The tile's sums (plus the bias) rounded to bf16: two vectors of 16 to one store of 32.
// Inlined, as everything the tile calls, so that its sums stay in registers.
template <int MR, int NR>
[[gnu::always_inline]] inline void store_rounded(uint16_t* c, int64_t ldc, const float* bias,
                                                 __m512 (&acc)[MR][NR]) {
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    uint16_t* row = c + r * ldc;
#pragma GCC unroll 8
    for (int q = 0; q + 1 < NR; q += 2) {
      const __m512 lo = bias ? _mm512_add_ps(acc[r][q], _mm512_loadu_ps(bias + 16 * q)) : acc[r][q];
      const __m512 hi =
          bias ? _mm512_add_ps(acc[r][q + 1], _mm512_loadu_ps(bias + 16 * (q + 1))) : acc[r][q + 1];
      _mm512_storeu_si512(row + 16 * q, convert32(lo, hi));
    }
    if constexpr (NR % 2 == 1) {
      const __m512 v = bias ? _mm512_add_ps(acc[r][NR - 1], _mm512_loadu_ps(bias + 16 * (NR - 1)))
                            : acc[r][NR - 1];
      // The low 16 words, by a masked store: GCC 12 warns on the cast to 256 bits here.
      _mm512_mask_storeu_epi16(row + 16 * (NR - 1), __mmask32(0xffff),
                               convert32(v, _mm512_setzero_ps()));
    }
  }
}

// bf16 bits of 16 lanes, widened exactly to fp32.
__m512 widen16(__m256i bits) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// The tile's sums rounded to bf16 and widened back to fp32, 32 lanes per conversion.
template <int MR, int NR>
[[gnu::always_inline]] inline void store_widened(float* c, int64_t ldc, __m512 (&acc)[MR][NR]) {
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    float* row = c + r * ldc;
#pragma GCC unroll 8
    for (int q = 0; q < NR; q += 2) {
      const __m512i bits = convert32(acc[r][q], q + 1 < NR ? acc[r][q + 1] : _mm512_setzero_ps());
      _mm512_storeu_ps(row + 16 * q, widen16(_mm512_castsi512_si256(bits)));
      if (q + 1 < NR) _mm512_storeu_ps(row + 16 * (q + 1), widen16(_mm512_extracti64x4_epi64(bits, 1)));
    }
  }
}

// What a tile does with its sums: stores them, adds them to C's, rounds them to bf16, or rounds
// them to bf16 and stores them widened.
enum class Out { sums, added, bf16, widened };

// A tile's sums into C at (i, j) as kOut says: rounded to bf16 (bias added first), rounded and
// widened, or stored (Out::added's sums already hold C).
template <int MR, int NR, Out kOut>
[[gnu::always_inline]] inline void store_tile(const PairGemm& g, int64_t i, int64_t j, __m512 (&acc)[MR][NR]) {
  const int64_t ldc = g.ldc;
  if constexpr (kOut == Out::bf16) {
    store_rounded<MR, NR>(g.c_bf16 + i * ldc + j, ldc, g.bias ? g.bias + j : nullptr, acc);
  } else if constexpr (kOut == Out::widened) {
    store_widened<MR, NR>(g.c + i * ldc + j, ldc, acc);
  } else {
    float* c = g.c + i * ldc + j;
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 8
      for (int q = 0; q < NR; ++q) _mm512_storeu_ps(c + r * ldc + 16 * q, acc[r][q]);
    }
  }
}

// One tile of MR x 16 NR sums, in registers from the first term to the store. The loops over
// rows and vectors are unrolled by pragma, so that GCC treats acc as separate values: without
// it the sums were kept on the stack, stored and reloaded around the loop, a fifth of the time
// of a tile over the attention's 32 pairs. The output is a
// template parameter, so one path follows the loop, and g's fields are read once (C's stores
// could alias g: ldc was reloaded for each).
template <int MR, int NR, Out kOut>
void tile(const PairGemm& g, int64_t i, int64_t j, int64_t first, int64_t pairs) {
  const int64_t ldc = g.ldc, ldb = g.ldb, a_row = g.a_row, a_pair = g.a_pair;
  __m512 acc[MR][NR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 8
    for (int q = 0; q < NR; ++q) {
      acc[r][q] = kOut == Out::added ? _mm512_loadu_ps(g.c + (i + r) * ldc + j + 16 * q)
                                     : _mm512_setzero_ps();
    }
  }
  const uint32_t* ar[MR];  // each row's next word of A
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) ar[r] = g.a + (i + r) * a_row + first * a_pair;
  const uint16_t* bp = g.b + 2 * j + first * ldb;
  for (int64_t p = first; p < pairs; ++p) {
    __m512bh bv[NR];
#pragma GCC unroll 8
    for (int q = 0; q < NR; ++q) bv[q] = (__m512bh)_mm512_loadu_si512(bp + 32 * q);
    bp += ldb;
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(int(*ar[r]));
      ar[r] += a_pair;
#pragma GCC unroll 8
      for (int q = 0; q < NR; ++q) acc[r][q] = _mm512_dpbf16_ps(acc[r][q], av, bv[q]);
    }
  }
  store_tile<MR, NR, kOut>(g, i, j, acc);
}

// tile() with A read from fp32 rows (g.a_f32): 16 pairs of each row at a time are rounded to
// bf16 words into a buffer in L1, from which the pair loop broadcasts them as tile() does from A.
// Each value of A is loaded and rounded once per tile, where a packing pass would write it and
// the tile read it again.
template <int MR, int NR, Out kOut>
void tile_a_f32(const PairGemm& g, int64_t i, int64_t j, int64_t, int64_t pairs) {
  const int64_t ldb = g.ldb;
  __m512 acc[MR][NR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 8
    for (int q = 0; q < NR; ++q) acc[r][q] = _mm512_setzero_ps();
  }
  alignas(64) uint32_t words[MR][16];
  const float* ar[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) ar[r] = g.a_f32 + 2 * (i + r) * g.a_row;
  const uint16_t* bp = g.b + 2 * j;
  // The next tile's rows, a tile ahead, where there is a next tile (else this tile's own, which
  // costs nothing): at 64 rows the weight comes from memory, each of its rows a stream of its own.
  const int64_t next_tile = i + 2 * MR <= g.m ? 2 * MR * g.a_row : 0;
  for (int64_t p0 = 0; p0 < pairs; p0 += 16) {
    const int64_t chunk = pairs - p0 < 16 ? pairs - p0 : 16;
    if (chunk == 16) {
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        const __m512i w = convert32(_mm512_loadu_ps(ar[r] + 2 * p0), _mm512_loadu_ps(ar[r] + 2 * p0 + 16));
        _mm512_store_si512(words[r], w);
        _mm_prefetch(reinterpret_cast<const char*>(ar[r] + next_tile + 2 * p0), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(ar[r] + next_tile + 2 * p0 + 16), _MM_HINT_T0);
      }
    } else {
      const TailMasks m = tail_masks(size_t(2 * chunk));
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        const __m512i w = convert32(_mm512_maskz_loadu_ps(m.lo, ar[r] + 2 * p0),
                                    _mm512_maskz_loadu_ps(m.hi, ar[r] + 2 * p0 + 16));
        _mm512_store_si512(words[r], w);
      }
    }
    for (int64_t p = 0; p < chunk; ++p) {
      __m512bh bv[NR];
#pragma GCC unroll 8
      for (int q = 0; q < NR; ++q) bv[q] = (__m512bh)_mm512_loadu_si512(bp + 32 * q);
      bp += ldb;
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        const __m512bh av = (__m512bh)_mm512_set1_epi32(int(words[r][p]));
#pragma GCC unroll 8
        for (int q = 0; q < NR; ++q) acc[r][q] = _mm512_dpbf16_ps(acc[r][q], av, bv[q]);
      }
    }
  }
  store_tile<MR, NR, kOut>(g, i, j, acc);
}

using TileFn = void (*)(const PairGemm&, int64_t, int64_t, int64_t, int64_t);

template <int MR, Out kOut, bool kAF32>
constexpr TileFn tile_for(int nr) {
  if constexpr (kAF32) {
    return nr == 1   ? tile_a_f32<MR, 1, kOut>
           : nr == 2 ? tile_a_f32<MR, 2, kOut>
           : nr == 3 ? tile_a_f32<MR, 3, kOut>
                     : tile_a_f32<MR, 4, kOut>;
  } else {
    return nr == 1   ? tile<MR, 1, kOut>
           : nr == 2 ? tile<MR, 2, kOut>
           : nr == 3 ? tile<MR, 3, kOut>
                     : tile<MR, 4, kOut>;
  }
}

template <Out kOut, bool kAF32 = false>
TileFn tile_for(int mr, int nr) {
  switch (mr) {
    case 1: return tile_for<1, kOut, kAF32>(nr);
    case 2: return tile_for<2, kOut, kAF32>(nr);
    case 3: return tile_for<3, kOut, kAF32>(nr);
    case 4: return tile_for<4, kOut, kAF32>(nr);
    case 5: return tile_for<5, kOut, kAF32>(nr);
    default: return tile_for<6, kOut, kAF32>(nr);
  }
}

TileFn tile_for(const PairGemm& g, int mr, int nr) {
  if (g.a_f32) {
    return g.c_bf16 ? tile_for<Out::bf16, true>(mr, nr) : tile_for<Out::sums, true>(mr, nr);
  }
  if (g.c_bf16) return tile_for<Out::bf16>(mr, nr);
  if (g.widened) return tile_for<Out::widened>(mr, nr);
  return g.accumulate ? tile_for<Out::added>(mr, nr) : tile_for<Out::sums>(mr, nr);
}

// idx for _mm512_permutex2var_epi16(x0, idx, x1): pairs (x0[t], x1[t]) for t in [first, first +
// 16).
__m512i interleave_index(int first) {
  alignas(64) uint16_t idx[32];
  for (int t = 0; t < 16; ++t) {
    idx[2 * t] = uint16_t(first + t);
    idx[2 * t + 1] = uint16_t(32 + first + t);
  }
  return _mm512_load_si512(idx);
}

// x[i] word j becomes x[j] word i: the shared 16 x 16 transpose of 32-bit lanes, on the words'
// bits (the shuffles move bits, whatever their type).
void transpose16(__m512i x[16]) {
  __m512 v[16];
  for (int i = 0; i < 16; ++i) v[i] = _mm512_castsi512_ps(x[i]);
  avx512::transpose16(v);
  for (int i = 0; i < 16; ++i) x[i] = _mm512_castps_si512(v[i]);
}

__mmask32 first_lanes32(int64_t count) {
  return count >= 32 ? __mmask32(0xffffffffu) : __mmask32((1u << count) - 1);
}

// Rows r and r + 1 (zeros when `pair` is false) of 32 columns from c, interleaved. Only the last
// columns (kTail) use masked loads and stores: with masks in every chunk, even all-ones ones,
// the attention's packings of 128 and 256 rows took 1.15-1.4x as long.
// sums[0, 32) += row r, then += row r + 1 (when `pair`), masked to the first `count` columns in
// the tail chunk: the column sums of pack_row_pairs_summing.
template <bool kTail>
void add_rows(float* sums, __m512i x0, __m512i x1, bool pair, int64_t count) {
  for (int half = 0; half < 2; ++half) {
    const __m512 a = widen16(half ? _mm512_extracti64x4_epi64(x0, 1) : _mm512_castsi512_si256(x0));
    const __m512 b = widen16(half ? _mm512_extracti64x4_epi64(x1, 1) : _mm512_castsi512_si256(x1));
    float* s = sums + 16 * half;
    if constexpr (kTail) {
      const int64_t n = count - 16 * half;
      if (n <= 0) return;
      const __mmask16 k = n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1);
      const __m512 t = _mm512_add_ps(_mm512_maskz_loadu_ps(k, s), a);
      _mm512_mask_storeu_ps(s, k, pair ? _mm512_add_ps(t, b) : t);
    } else {
      const __m512 t = _mm512_add_ps(_mm512_loadu_ps(s), a);
      _mm512_storeu_ps(s, pair ? _mm512_add_ps(t, b) : t);
    }
  }
}

// Columns [c, c + 32) of two rows x0 and x1 (bf16 bits), interleaved into out's pairs.
template <bool kTail>
void store_interleaved(uint16_t* out, int64_t c, int64_t cols, __m512i x0, __m512i x1, __m512i lo,
                       __m512i hi) {
  const __m512i w0 = _mm512_permutex2var_epi16(x0, lo, x1);
  const __m512i w1 = _mm512_permutex2var_epi16(x0, hi, x1);
  if constexpr (kTail) {
    const int64_t left = 2 * (cols - c);
    _mm512_mask_storeu_epi16(out + 2 * c, first_lanes32(left), w0);
    if (left > 32) _mm512_mask_storeu_epi16(out + 2 * c + 32, first_lanes32(left - 32), w1);
  } else {
    _mm512_storeu_si512(out + 2 * c, w0);
    _mm512_storeu_si512(out + 2 * c + 32, w1);
  }
}

template <bool kTail, bool kSum>
void pack_chunk(const uint16_t* r0, int64_t ld, bool pair, int64_t c, int64_t cols, uint16_t* out,
                __m512i lo, __m512i hi, float* sums) {
  const __mmask32 m = kTail ? first_lanes32(cols - c) : __mmask32(0xffffffffu);
  const __m512i x0 = kTail ? _mm512_maskz_loadu_epi16(m, r0 + c) : _mm512_loadu_si512(r0 + c);
  const __m512i x1 = !pair   ? _mm512_setzero_si512()
                     : kTail ? _mm512_maskz_loadu_epi16(m, r0 + ld + c)
                             : _mm512_loadu_si512(r0 + ld + c);
  store_interleaved<kTail>(out, c, cols, x0, x1, lo, hi);
  if constexpr (kSum) add_rows<kTail>(sums + c, x0, x1, pair, cols - c);
}

// The fp32 values row[c, c + 32), rounded to bf16 bits (fewer in the tail chunk, zeros after).
template <bool kTail>
__m512i load_rounded32(const float* row, int64_t c, int64_t cols) {
  if constexpr (kTail) {
    const TailMasks m = tail_masks(size_t(cols - c));
    return convert32(_mm512_maskz_loadu_ps(m.lo, row + c), _mm512_maskz_loadu_ps(m.hi, row + c + 16));
  } else {
    return convert32(_mm512_loadu_ps(row + c), _mm512_loadu_ps(row + c + 16));
  }
}

template <bool kTail>
void pack_chunk_f32(const float* r0, int64_t ld, bool pair, int64_t c, int64_t cols,
                    uint16_t* out, __m512i lo, __m512i hi) {
  const __m512i x0 = load_rounded32<kTail>(r0, c, cols);
  const __m512i x1 = pair ? load_rounded32<kTail>(r0 + ld, c, cols) : _mm512_setzero_si512();
  store_interleaved<kTail>(out, c, cols, x0, x1, lo, hi);
}

template <bool kSum>
void pack_rows(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols, uint16_t* dst,
               int64_t dst_ld, float* sums) {
  const __m512i lo = interleave_index(0), hi = interleave_index(16);
  const int64_t full = cols / 32 * 32;
  for (int64_t r = 0; r < rows; r += 2) {
    const uint16_t* r0 = src + r * ld;
    const bool pair = r + 1 < rows;
    uint16_t* out = dst + (r / 2) * dst_ld;
    for (int64_t c = 0; c < full; c += 32) {
      pack_chunk<false, kSum>(r0, ld, pair, c, cols, out, lo, hi, sums);
    }
    if (full < cols) pack_chunk<true, kSum>(r0, ld, pair, full, cols, out, lo, hi, sums);
  }
}

}  // namespace

void pair_gemm(const PairGemm& g) {
  for (int64_t i = 0; i < g.m; i += 6) {
    const int64_t mr = g.m - i < 6 ? g.m - i : 6;
    int64_t n_end = g.n;
    if (g.row_limit >= 0) {
      const int64_t need = (g.row_limit + i + mr + 15) / 16 * 16;
      if (need < n_end) n_end = need;
    }
    int64_t pairs = g.pairs;
    if (g.pair_limit >= 0) {
      const int64_t need = (g.pair_limit + i + mr + 1) / 2;
      if (need < pairs) pairs = need;
    }
    const int64_t first = g.first_term >= 0 && i > g.first_term ? (i - g.first_term) / 2 : 0;
    for (int64_t j = 0; j < n_end; j += 64) {
      const int64_t nr = (n_end - j) / 16 < 4 ? (n_end - j) / 16 : 4;
      tile_for(g, int(mr), int(nr))(g, i, j, first, pairs);
    }
  }
}

void pack_row_pairs(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols, uint16_t* dst,
                    int64_t dst_ld) {
  pack_rows<false>(src, ld, rows, cols, dst, dst_ld, nullptr);
}

void pack_row_pairs_summing(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols,
                            uint16_t* dst, int64_t dst_ld, float* sums) {
  pack_rows<true>(src, ld, rows, cols, dst, dst_ld, sums);
}

void pack_row_pairs_f32(const float* src, int64_t ld, int64_t rows, int64_t cols, uint16_t* dst,
                        int64_t dst_ld) {
  const __m512i lo = interleave_index(0), hi = interleave_index(16);
  const int64_t full = cols / 32 * 32;
  for (int64_t r = 0; r < rows; r += 2) {
    const float* r0 = src + r * ld;
    const bool pair = r + 1 < rows;
    uint16_t* out = dst + (r / 2) * dst_ld;
    for (int64_t c = 0; c < full; c += 32) pack_chunk_f32<false>(r0, ld, pair, c, cols, out, lo, hi);
    if (full < cols) pack_chunk_f32<true>(r0, ld, pair, full, cols, out, lo, hi);
  }
}

void pack_column_pairs_f32(const float* src, int64_t ld, int64_t rows, int64_t cols,
                           uint16_t* dst, int64_t dst_ld) {
  // As pack_column_pairs: the row's values rounded 32 at a time make 16 words of pairs, and
  // blocks of 16 rows x 16 words are transposed in registers.
  const int64_t col_words = cols / 2;
  for (int64_t r = 0; r < rows; r += 16) {
    const int64_t nr = rows - r < 16 ? rows - r : 16;
    const __mmask16 row_mask = __mmask16((1u << nr) - 1);
    for (int64_t w = 0; w < col_words; w += 16) {
      const int64_t nw = col_words - w < 16 ? col_words - w : 16;
      __m512i x[16];
      for (int i = 0; i < 16; ++i) {
        if (i >= nr) {
          x[i] = _mm512_setzero_si512();
          continue;
        }
        const float* row = src + (r + i) * ld;
        x[i] = nw < 16 ? load_rounded32<true>(row, 2 * w, 2 * (w + nw))
                       : load_rounded32<false>(row, 2 * w, 2 * (w + nw));
      }
      transpose16(x);
      for (int i = 0; i < nw; ++i)
        _mm512_mask_storeu_epi32(dst + (w + i) * dst_ld + 2 * r, row_mask, x[i]);
    }
  }
}

namespace {

// 16 rows of 16 words from src (rows row_words words apart) into 16 rows of 16 words of dst
// (dst_ld bf16 apart), transposed.
void transpose_whole_block(const uint16_t* src, int64_t row_words, uint16_t* dst, int64_t dst_ld) {
  __m512i x[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) x[i] = _mm512_loadu_si512(src + 2 * i * row_words);
  transpose16(x);
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) _mm512_storeu_si512(dst + i * dst_ld, x[i]);
}

}  // namespace

void pack_column_pairs(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols, uint16_t* dst,
                       int64_t dst_ld) {
  // Word (r, w) of src, w = c / 2, goes to word (w, r) of dst: blocks of 16 x 16 words,
  // transposed in registers. Whole blocks load and store without masks, their loops unrolled
  // so that the block stays in registers; only the edges of src use masks.
  const int64_t row_words = ld / 2, col_words = cols / 2;
  for (int64_t r = 0; r < rows; r += 16) {
    const int64_t nr = rows - r < 16 ? rows - r : 16;
    const __mmask16 row_mask = __mmask16((1u << nr) - 1);
    for (int64_t w = 0; w < col_words; w += 16) {
      const int64_t nw = col_words - w < 16 ? col_words - w : 16;
      if (nr == 16 && nw == 16) {
        transpose_whole_block(src + 2 * (r * row_words + w), row_words, dst + w * dst_ld + 2 * r,
                              dst_ld);
        continue;
      }
      const __mmask16 word_mask = __mmask16((1u << nw) - 1);
      __m512i x[16];
      for (int i = 0; i < 16; ++i) {
        x[i] = i < nr ? _mm512_maskz_loadu_epi32(word_mask, src + 2 * ((r + i) * row_words + w))
                      : _mm512_setzero_si512();
      }
      transpose16(x);
      for (int i = 0; i < nw; ++i)
        _mm512_mask_storeu_epi32(dst + (w + i) * dst_ld + 2 * r, row_mask, x[i]);
    }
  }
}

void transpose_to_bf16(const float* src, int64_t ld_src, int64_t rows, int64_t cols,
                       const float* bias, uint16_t* dst, int64_t ld_dst) {
  // Blocks of 16 x 16 sums, transposed in registers as 32-bit words; each row of the transposed
  // block gets its 16 biases and is rounded to 16 bf16.
  for (int64_t r = 0; r < rows; r += 16) {
    const int64_t nr = rows - r < 16 ? rows - r : 16;
    const __mmask16 row_mask = __mmask16((1u << nr) - 1);
    const __m512 b = bias ? _mm512_maskz_loadu_ps(row_mask, bias + r) : _mm512_setzero_ps();
    for (int64_t c = 0; c < cols; c += 16) {
      const int64_t nc = cols - c < 16 ? cols - c : 16;
      const __mmask16 col_mask = __mmask16((1u << nc) - 1);
      __m512i x[16];
      for (int i = 0; i < 16; ++i) {
        x[i] = i < nr ? _mm512_maskz_loadu_epi32(col_mask, src + (r + i) * ld_src + c)
                      : _mm512_setzero_si512();
      }
      transpose16(x);
      for (int i = 0; i < nc; ++i) {
        const __m512 v = _mm512_castsi512_ps(x[i]);
        const __m512i bits = convert32(bias ? _mm512_add_ps(v, b) : v, _mm512_setzero_ps());
        _mm512_mask_storeu_epi16(dst + (c + i) * ld_dst + r, __mmask32(row_mask), bits);
      }
    }
  }
}

void round_to_bf16_widened(const float* x, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512i bits = convert32(_mm512_loadu_ps(x + i), _mm512_loadu_ps(x + i + 16));
    _mm512_storeu_ps(out + i, widen16(_mm512_castsi512_si256(bits)));
    _mm512_storeu_ps(out + i + 16, widen16(_mm512_extracti64x4_epi64(bits, 1)));
  }
  if (i < n) {
    const TailMasks m = tail_masks(size_t(n - i));
    const __m512i bits = convert32(_mm512_maskz_loadu_ps(m.lo, x + i),
                                   _mm512_maskz_loadu_ps(m.hi, x + i + 16));
    _mm512_mask_storeu_ps(out + i, m.lo, widen16(_mm512_castsi512_si256(bits)));
    _mm512_mask_storeu_ps(out + i + 16, m.hi, widen16(_mm512_extracti64x4_epi64(bits, 1)));
  }
}

}  // namespace mixp::kernels::avx512_bf16

#pragma GCC diagnostic pop
