// FP8 quantization and the FP8 GEMM on tensors, chosen by the registry: what mixp::amp's quantize
// and fp8_gemm (autograd/fp8_scaling.cpp) and FP4's amax call. The CPU candidates are
// kernels/fp8.h's fast kernels (threads, vectorized conversions, oneDNN), and their fallbacks the
// scalar references, which give the same quantized bits (the GEMM's reference sums in double).
// Private to mixp.
#pragma once

#include <cstdint>

#include "kernels/fp8.h"
#include "kernels/registry.h"

namespace mixp::kernels {

/// max |x| of an f32 tensor; NaN if any element is NaN.
using Fp8AmaxFn = float(const Tensor& x);
extern Kernel<Fp8AmaxFn> fp8_amax;

/// q = fp8(x * scale) element by element: x f32, q e4m3 or e5m2 of as many elements.
using Fp8ScaleFn = void(const Tensor& x, float scale, Tensor& q);
extern Kernel<Fp8ScaleFn> fp8_scale;

/// MXFP8 of x (f32) as a [rows, cols] matrix into q (e4m3 or e5m2) and codes (u8,
/// [rows, ceil(cols / 32)]): kernels/fp8.h's fp8_quantize_mx.
using Fp8QuantizeMxFn = void(const Tensor& x, int64_t rows, int64_t cols, MxRounding rounding,
                             Tensor& q, Tensor& codes);
extern Kernel<Fp8QuantizeMxFn> fp8_quantize_mx;

/// Current scaling per block_rows x 128 tile of x (f32) as `batch` matrices [rows, cols] into q
/// and scale_inv (f32, [batch, ceil(rows / block_rows), ceil(cols / 128)]).
using Fp8QuantizeBlocksFn = void(const Tensor& x, int64_t batch, int64_t rows, int64_t cols,
                                 int64_t block_rows, Tensor& q, Tensor& scale_inv);
extern Kernel<Fp8QuantizeBlocksFn> fp8_quantize_blocks;

/// One operand of an FP8 GEMM as tensors: `batch` matrices [rows, k] of codes and their scaling
/// (kernels/fp8.h's Fp8Operand).
struct Fp8Matrix {
  Tensor codes;  ///< e4m3 or e5m2
  Fp8Operand::Kind kind = Fp8Operand::Kind::per_tensor;
  float scale_inv = 1.0f;  ///< per_tensor
  Tensor block_scales;     ///< mx: u8 E8M0 codes; blocks: f32 scale_inv
  int64_t block_rows = 1;  ///< blocks

  /// The device of its tensors; mixp::Error where they differ.
  Device device() const;
};

/// out (f32, [batch, rows, k]) = every code of q times its scale (kernels/fp8.h's
/// fp8_operand_value): the values the GEMM multiplies. Exact products, one rounding to fp32.
using Fp8DequantizeFn = void(const Fp8Matrix& q, int64_t batch, int64_t rows, int64_t k,
                             Tensor& out);
extern Kernel<Fp8DequantizeFn> fp8_dequantize;

/// c (f32, [batch, m, n]) = A[b] B[b]^T, A [batch, m, k] and B [batch, n, k] of one kind.
using Fp8GemmFn = void(const Fp8Matrix& a, const Fp8Matrix& b, int64_t batch, int64_t m,
                       int64_t n, int64_t k, Tensor& c);
extern Kernel<Fp8GemmFn> fp8_scaled_gemm;

}  // namespace mixp::kernels
