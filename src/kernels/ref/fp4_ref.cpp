// Scalar reference of FP4 block quantization: one block and one element at a time, each element
// rounded by mixp/format.h's integer-significand emulator of E2M1 (not by the threshold
// arithmetic of the fast kernels), its random word drawn one at a time.
#include <algorithm>
#include <cmath>

#include "kernels/fp4.h"
#include "mixp/format.h"

namespace mixp::kernels {
namespace {

// The block's scale code and the factor its elements are multiplied by.
struct BlockScale {
  uint8_t code;
  float element_scale;
  bool special;  // a NaN or an infinity in the block: NaN scale, zero codes
};

// The scale of the block of `rows` x `n` elements starting at x, rows `stride` apart.
BlockScale block_scale(const float* x, int64_t rows, int64_t n, int64_t stride,
                       const Fp4Params& p) {
  float amax = 0.0f;
  bool special = false;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      special = special || !std::isfinite(x[r * stride + j]);
      amax = std::max(amax, std::fabs(x[r * stride + j]));
    }
  }
  if (p.kind == Fp4Kind::nvfp4) {
    if (special) return {0x7F, 0.0f, true};
    const uint8_t code = nvfp4_block_scale_code(amax, p.tensor_scale);
    return {code, nvfp4_element_scale(code, p.tensor_scale), false};
  }
  if (special) return {0xFF, 0.0f, true};
  const uint8_t code = p.unit_scales ? uint8_t(127) : mxfp4_scale_code(amax, p.mx_rounding);
  return {code, std::ldexp(1.0f, 127 - int(code)), false};
}

}  // namespace

void fp4_quantize_reference(const float* x, int64_t rows, int64_t cols, const Fp4Params& p,
                            uint8_t* packed, uint8_t* scales) {
  const Format e2m1 = Format::e2m1();
  const int64_t block = fp4_block(p.kind), nb = (cols + block - 1) / block;
  const int64_t row_bytes = (cols + 1) / 2, tile_rows = p.block_rows;
  std::fill(packed, packed + rows * row_bytes, uint8_t(0));
  for (int64_t r0 = 0; r0 < rows; r0 += tile_rows) {
    const int64_t r1 = std::min(rows, r0 + tile_rows);
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t begin = b * block, end = std::min(cols, begin + block);
      const BlockScale s = block_scale(x + r0 * cols + begin, r1 - r0, end - begin, cols, p);
      scales[r0 / tile_rows * nb + b] = s.code;
      if (s.special) continue;
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = begin; c < end; ++c) {
          const float y = x[r * cols + c] * s.element_scale;
          const uint32_t random = p.stochastic ? philox_word(p.philox, uint64_t(r * cols + c)) : 0;
          const uint32_t code =
              encode(e2m1, y, p.stochastic ? Rounding::stochastic : Rounding::nearest_even,
                     Overflow::saturate, random);
          packed[r * row_bytes + c / 2] |= uint8_t(code << (c % 2 == 0 ? 0 : 4));
        }
      }
    }
  }
}

}  // namespace mixp::kernels
