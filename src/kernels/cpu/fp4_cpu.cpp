// The fast FP4 block quantization: rows in parallel (OpenMP through parallel_for), each block's
// scale by the shared rules of kernels/fp4_scales.cpp, and the elements 16 a step on AVX-512
// (kernels/cpu/fp4_avx512.cpp) or by the branch-free scalar rounding elsewhere and in tails.
// Stochastic rounding takes its words by element index, so the split does not matter.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/fp4.h"
#include "kernels/stochastic_rounding.h"
#include "mixp/cpu.h"

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

}  // namespace

void fp4_quantize_fast(const float* x, int64_t rows, int64_t cols, const Fp4Params& p,
                       uint8_t* packed, uint8_t* scales) {
  const int64_t block = fp4_block(p.kind), nb = (cols + block - 1) / block;
  const int64_t row_bytes = (cols + 1) / 2;
  const bool vector = active_isa() >= Isa::avx512;
  parallel_for(
      rows, std::max<int64_t>(1, kGrainElements / std::max<int64_t>(cols, 1)),
      [&](int64_t begin, int64_t end) {
        std::vector<uint32_t> words(p.stochastic ? size_t(cols) : 0);
        for (int64_t r = begin; r < end; ++r) {
          const float* xr = x + r * cols;
          uint8_t* out = packed + r * row_bytes;
          if (p.stochastic)
            kernels::philox_words(p.philox, uint64_t(r * cols), words.data(), uint64_t(cols));
          for (int64_t b = 0; b < nb; ++b) {
            const int64_t j0 = b * block, len = std::min(cols, j0 + block) - j0;
            float amax = 0.0f;
            bool special = false;
            for (int64_t j = j0; j < j0 + len; ++j) {
              const float a = std::fabs(xr[j]);
              special |= !std::isfinite(a);
              amax = a > amax ? a : amax;
            }
            uint8_t code;
            float element_scale = 0.0f;
            if (p.kind == Fp4Kind::nvfp4) {
              code = special ? uint8_t(0x7F) : nvfp4_block_scale_code(amax, p.tensor_scale);
              if (!special) element_scale = nvfp4_element_scale(code, p.tensor_scale);
            } else {
              code = special ? uint8_t(0xFF) : mxfp4_scale_code(amax, p.mx_rounding);
              if (!special) element_scale = std::ldexp(1.0f, 127 - int(code));
            }
            scales[r * nb + b] = code;
            if (special) {
              std::fill(out + j0 / 2, out + (j0 + len + 1) / 2, uint8_t(0));
              continue;
            }
            encode_span(xr + j0, p.stochastic ? words.data() + j0 : nullptr, len, element_scale,
                        out + j0 / 2, vector);
          }
        }
      });
}

}  // namespace mixp::kernels
