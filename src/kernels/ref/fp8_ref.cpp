// Scalar references of the FP8 kernels: one element at a time through the storage types'
// constructors, and the GEMM in double from the dequantized values.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/fp8.h"
#include "mixp/float_types.h"

namespace mixp::kernels {
namespace {

uint8_t encode(float v, DType fp8) {
  return fp8 == DType::e4m3 ? float8_e4m3(v, Overflow::saturate).bits
                            : float8_e5m2(v, Overflow::saturate).bits;
}

float decode(uint8_t bits, DType fp8) {
  return fp8 == DType::e4m3 ? float(float8_e4m3::from_bits(bits))
                            : float(float8_e5m2::from_bits(bits));
}

// max |x| with NaN sticking (std::max would drop a NaN depending on the argument order).
float amax_of(float running, float v) {
  const float a = std::fabs(v);
  if (std::isnan(running) || std::isnan(a)) return std::numeric_limits<float>::quiet_NaN();
  return std::max(running, a);
}

}  // namespace

float fp8_amax_reference(const float* x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = amax_of(m, x[i]);
  return m;
}

void fp8_scale_reference(const float* x, int64_t n, DType fp8, float scale, uint8_t* q) {
  for (int64_t i = 0; i < n; ++i) q[i] = encode(x[i] * scale, fp8);
}

void fp8_quantize_mx_reference(const float* x, int64_t rows, int64_t cols, DType fp8, uint8_t* q,
                               uint8_t* codes, MxRounding rounding) {
  const int64_t nb = (cols + kMxBlock - 1) / kMxBlock;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t begin = b * kMxBlock, end = std::min(cols, begin + kMxBlock);
      float amax = 0.0f;
      bool special = false;  // an infinity or a NaN: the block's scale is NaN
      for (int64_t j = begin; j < end; ++j) {
        special = special || !std::isfinite(x[r * cols + j]);
        amax = amax_of(amax, x[r * cols + j]);
      }
      const uint8_t code = special ? uint8_t(0xFF) : mx_scale_code(amax, fp8, rounding);
      codes[r * nb + b] = code;
      // A NaN scale makes the whole block NaN whatever its elements (the spec); they get the
      // canonical NaN code 0x7F, a NaN in both formats.
      if (code == 0xFF) {
        for (int64_t j = begin; j < end; ++j) q[r * cols + j] = 0x7F;
        continue;
      }
      // V / 2^e as V * 2^-e: exact, a power of two (E8M0 spans 2^-127..2^127, whose inverse is
      // an fp32 normal number).
      const float inverse = std::ldexp(1.0f, 127 - int(code));
      for (int64_t j = begin; j < end; ++j)
        q[r * cols + j] = encode(x[r * cols + j] * inverse, fp8);
    }
  }
}

void fp8_quantize_blocks_reference(const float* x, int64_t batch, int64_t rows, int64_t cols,
                                   int64_t block_rows, DType fp8, uint8_t* q, float* scale_inv) {
  const int64_t br = (rows + block_rows - 1) / block_rows, bc = (cols + kFp8Block - 1) / kFp8Block;
  const float max = fp8_max(fp8);
  for (int64_t m = 0; m < batch; ++m) {
    const float* xm = x + m * rows * cols;
    uint8_t* qm = q + m * rows * cols;
    for (int64_t tr = 0; tr < br; ++tr) {
      for (int64_t tc = 0; tc < bc; ++tc) {
        const int64_t r0 = tr * block_rows, r1 = std::min(rows, r0 + block_rows);
        const int64_t c0 = tc * kFp8Block, c1 = std::min(cols, c0 + kFp8Block);
        float amax = 0.0f;
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c) amax = amax_of(amax, xm[r * cols + c]);
        const float scale = current_scale(amax, max);
        scale_inv[(m * br + tr) * bc + tc] = 1.0f / scale;
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c)
            qm[r * cols + c] = encode(xm[r * cols + c] * scale, fp8);
      }
    }
  }
}

float fp8_operand_value(const Fp8Operand& op, int64_t rows, int64_t k, int64_t batch_index,
                        int64_t row, int64_t p) {
  const float v = decode(op.data[(batch_index * rows + row) * k + p], op.dtype);
  switch (op.kind) {
    case Fp8Operand::Kind::per_tensor: return v * op.scale_inv;
    case Fp8Operand::Kind::mx: {
      const int64_t nb = (k + kMxBlock - 1) / kMxBlock;
      return v * e8m0_value(op.codes[(batch_index * rows + row) * nb + p / kMxBlock]);
    }
    case Fp8Operand::Kind::blocks: {
      const int64_t br = (rows + op.block_rows - 1) / op.block_rows;
      const int64_t bc = (k + kFp8Block - 1) / kFp8Block;
      return v * op.block_scale_inv[(batch_index * br + row / op.block_rows) * bc + p / kFp8Block];
    }
  }
  return v;
}

void fp8_gemm_reference(int64_t batch, int64_t m, int64_t n, int64_t k, const Fp8Operand& a,
                        const Fp8Operand& b, float* c) {
  for (int64_t bi = 0; bi < batch; ++bi) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          acc += double(fp8_operand_value(a, m, k, bi, i, p)) *
                 double(fp8_operand_value(b, n, k, bi, j, p));
        }
        c[(bi * m + i) * n + j] = float(acc);
      }
    }
  }
}

}  // namespace mixp::kernels
