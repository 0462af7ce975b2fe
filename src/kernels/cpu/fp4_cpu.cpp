// The fast FP4 block quantization: rows in parallel (OpenMP through parallel_for), each block's
// scale by the shared rules of kernels/fp4_scales.cpp, and the elements 16 a step on AVX-512
// (kernels/cpu/fp4_avx512.cpp) or by the branch-free scalar rounding elsewhere and in tails.
// Stochastic rounding takes its words by element index, so the split does not matter.
#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/fp4.h"
#include "kernels/stochastic_rounding.h"

namespace mixp::kernels {
namespace {

constexpr int64_t kGrainElements = 1 << 14;

// Scale and round n elements of x into nibbles starting at `out` (n even, or the row's end).
void encode_span(const float* x, const uint32_t* random, int64_t n, float scale, uint8_t* out,
                 bool vector) {
  int64_t done = 0;
  if (vector) {
    done = n / 16 * 16;
    if (random)
      avx512::e2m1_encode_stochastic(x, random, done, scale, out);
    else
      avx512::e2m1_encode_nearest(x, done, scale, out);
  }
  for (int64_t i = done; i < n; ++i) {
    const float y = x[i] * scale;
    const uint8_t code = random ? e2m1_round_stochastic(y, random[i]) : e2m1_round_nearest(y);
    if (i % 2 == 0)
      out[i / 2] = code;
    else
      out[i / 2] = uint8_t(out[i / 2] | (code << 4));
  }
}

// The scale codes of one row of blocks: rows [r0, r1) of x, one code per `block` columns
// (r1 - r0 is 1, or the tile height of square tiles).
void block_row_scales(const float* x, int64_t r0, int64_t r1, int64_t cols, const Fp4Params& p,
                      uint8_t* codes) {
  const int64_t block = fp4_block(p.kind), nb = (cols + block - 1) / block;
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t j0 = b * block, j1 = std::min(cols, j0 + block);
    // The largest magnitude as the largest bit pattern without the sign: an integer maximum
    // the compiler vectorizes, and above the largest finite pattern exactly when the block
    // holds a NaN or an infinity.
    uint32_t amax_bits = 0;
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = x + r * cols;
      for (int64_t j = j0; j < j1; ++j)
        amax_bits = std::max(amax_bits, std::bit_cast<uint32_t>(row[j]) & 0x7FFFFFFFu);
    }
    const bool special = amax_bits > 0x7F7FFFFFu;
    const float amax = std::bit_cast<float>(amax_bits);
    if (p.kind == Fp4Kind::nvfp4)
      codes[b] = special ? uint8_t(0x7F) : nvfp4_block_scale_code(amax, p.tensor_scale);
    else
      codes[b] = special         ? uint8_t(0xFF)
                 : p.unit_scales ? uint8_t(127)
                                 : mxfp4_scale_code(amax, p.mx_rounding);
  }
}

// One row's elements, each block by its scale code; a NaN scale (a block with a NaN or an
// infinity) gets zero codes.
void encode_row(const float* xr, const uint32_t* words, int64_t cols, const Fp4Params& p,
                const uint8_t* codes, uint8_t* out, bool vector) {
  const int64_t block = fp4_block(p.kind), nb = (cols + block - 1) / block;
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t j0 = b * block, len = std::min(cols, j0 + block) - j0;
    const bool special = codes[b] == (p.kind == Fp4Kind::nvfp4 ? 0x7F : 0xFF);
    if (special) {
      std::fill(out + j0 / 2, out + (j0 + len + 1) / 2, uint8_t(0));
      continue;
    }
    const float element_scale = p.kind == Fp4Kind::nvfp4
                                    ? nvfp4_element_scale(codes[b], p.tensor_scale)
                                    : std::ldexp(1.0f, 127 - int(codes[b]));
    encode_span(xr + j0, words ? words + j0 : nullptr, len, element_scale, out + j0 / 2, vector);
  }
}

}  // namespace

void fp4_quantize_fast(const float* x, int64_t rows, int64_t cols, const Fp4Params& p,
                       uint8_t* packed, uint8_t* scales, bool vector) {
  const int64_t block = fp4_block(p.kind), nb = (cols + block - 1) / block;
  const int64_t row_bytes = (cols + 1) / 2, tile_rows = p.block_rows;
  const int64_t grain = std::max<int64_t>(1, kGrainElements / std::max<int64_t>(cols, 1));
  if (tile_rows > 1) {
    // A tile's scale needs all of its rows: the scales first, then the rows.
    parallel_for((rows + tile_rows - 1) / tile_rows, std::max<int64_t>(1, grain / tile_rows),
                 [&](int64_t begin, int64_t end) {
                   for (int64_t t = begin; t < end; ++t)
                     block_row_scales(x, t * tile_rows, std::min(rows, (t + 1) * tile_rows), cols,
                                      p, scales + t * nb);
                 });
  }
  parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
    std::vector<uint32_t> words(p.stochastic ? size_t(cols) : 0);
    for (int64_t r = begin; r < end; ++r) {
      if (p.stochastic)
        kernels::philox_words(p.philox, uint64_t(r * cols), words.data(), uint64_t(cols));
      uint8_t* codes = scales + r / tile_rows * nb;
      if (tile_rows == 1) block_row_scales(x, r, r + 1, cols, p, codes);
      encode_row(x + r * cols, p.stochastic ? words.data() : nullptr, cols, p, codes,
                 packed + r * row_bytes, vector);
    }
  });
}

}  // namespace mixp::kernels
