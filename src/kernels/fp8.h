// FP8 quantization and the FP8 GEMM on raw buffers: the fast kernels (kernels/cpu/fp8_cpu.cpp:
// the vectorized conversions, OpenMP, oneDNN bf16) and their scalar references
// (kernels/ref/fp8_ref.cpp), which give the same quantized bits. The scale rules below are those
// mixp/amp/fp8.h documents, edge cases included; its recipe functions call these
// (kernels/fp8_scales.cpp). Every conversion to FP8 saturates. Private to mixp.
#pragma once

#include <cstdint>

#include "mixp/dtype.h"

namespace mixp::kernels {

/// amp::fp8_max: 448 (e4m3), 57344 (e5m2); mixp::Error for another dtype.
float fp8_max(DType fp8);
/// amp::scale_from_amax: (fp8_max / amax) / 2^margin, or `previous` for an amax that is 0,
/// negative or not finite; FLT_MAX on overflow, the smallest positive float on underflow.
float scale_from_amax(float amax, float fp8_max, int margin, float previous);
/// amp::current_scale: scale_from_amax(amax, fp8_max, margin, 1).
float current_scale(float amax, float fp8_max, int margin = 0);
/// amp::mx_emax: 8 for e4m3, 15 for e5m2; mixp::Error for another dtype.
int mx_emax(DType element);
/// How an MX block's E8M0 scale is rounded (amp::MxScaleRounding, same values).
enum class MxRounding : uint8_t { floor = 0, up = 1 };
/// The E8M0 code of a power-of-two scale 2^e for a block of `amax` whose element format has
/// largest exponent `emax` and largest value `max`: floor: e = floor(log2(amax)) - emax (OCP);
/// up: the smallest e with amax <= max * 2^e, so no element saturates. e is clamped to
/// [-127, 127]; 0xFF for a NaN or infinite amax, code 0 for amax 0.
uint8_t e8m0_scale_code(float amax, int emax, float max, MxRounding rounding);
/// amp::mx_scale_code: e8m0_scale_code with the fp8 element's emax and fp8_max.
uint8_t mx_scale_code(float amax, DType element, MxRounding rounding = MxRounding::floor);
/// amp::e8m0_value: 2^(code - 127); NaN for 0xFF.
float e8m0_value(uint8_t code);

/// max |x[i]|; NaN if any element is NaN.
float fp8_amax_fast(const float* x, int64_t n);
float fp8_amax_reference(const float* x, int64_t n);

/// q[i] = fp8(x[i] * scale), one fp32 multiply and one saturating rounding.
void fp8_scale_fast(const float* x, int64_t n, DType fp8, float scale, uint8_t* q);
void fp8_scale_reference(const float* x, int64_t n, DType fp8, float scale, uint8_t* q);

/// MXFP8 on a [rows, cols] matrix: blocks of 32 along cols (the last one may be shorter), one
/// E8M0 code per block in codes [rows, ceil(cols / 32)], rounded by `rounding`.
void fp8_quantize_mx_fast(const float* x, int64_t rows, int64_t cols, DType fp8, uint8_t* q,
                          uint8_t* codes, MxRounding rounding = MxRounding::floor);
void fp8_quantize_mx_reference(const float* x, int64_t rows, int64_t cols, DType fp8, uint8_t* q,
                               uint8_t* codes, MxRounding rounding = MxRounding::floor);

/// Per-block current scaling of `batch` matrices [rows, cols] in tiles of block_rows x 128 (edge
/// tiles smaller); scale_inv [batch, ceil(rows / block_rows), ceil(cols / 128)].
void fp8_quantize_blocks_fast(const float* x, int64_t batch, int64_t rows, int64_t cols,
                              int64_t block_rows, DType fp8, uint8_t* q, float* scale_inv);
void fp8_quantize_blocks_reference(const float* x, int64_t batch, int64_t rows, int64_t cols,
                                   int64_t block_rows, DType fp8, uint8_t* q, float* scale_inv);

inline constexpr int64_t kMxBlock = 32;
inline constexpr int64_t kFp8Block = 128;

/// One operand of an FP8 GEMM: `batch` matrices [rows, k] of fp8 codes, and their scaling.
struct Fp8Operand {
  enum class Kind : uint8_t { per_tensor, mx, blocks };
  const uint8_t* data = nullptr;
  DType dtype = DType::e4m3;
  Kind kind = Kind::per_tensor;
  float scale_inv = 1.0f;          ///< per_tensor
  const uint8_t* codes = nullptr;  ///< mx: [batch * rows, ceil(k / 32)]
  const float* block_scale_inv =
      nullptr;  ///< blocks: [batch, ceil(rows / block_rows), ceil(k / 128)]
  int64_t block_rows = 1;
};

/// C[b] = A[b] B[b]^T, A [m, k], B [n, k], C [m, n] f32, for b < batch; both operands of one kind.
void fp8_gemm_fast(int64_t batch, int64_t m, int64_t n, int64_t k, const Fp8Operand& a,
                   const Fp8Operand& b, float* c);
/// The same from the dequantized values (fp8 * scale per element), accumulated in double.
void fp8_gemm_reference(int64_t batch, int64_t m, int64_t n, int64_t k, const Fp8Operand& a,
                        const Fp8Operand& b, float* c);

/// The value element (row, p) of matrix `batch_index` of an operand stands for (fp8 * its scale).
float fp8_operand_value(const Fp8Operand& op, int64_t rows, int64_t k, int64_t batch_index,
                        int64_t row, int64_t p);

}  // namespace mixp::kernels
