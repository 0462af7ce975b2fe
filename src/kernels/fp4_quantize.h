// FP4 block quantization and the FP4 GEMM on tensors, chosen by the registry: what mixp::amp's
// quantize_fp4 and fp4_gemm (autograd/fp4_scaling.cpp) call. The CPU candidates are kernels/fp4.h's
// fast quantizer (threads, AVX-512 where active) and oneDNN products of the exact block values;
// the fallbacks are the scalar reference quantizer, which gives the same bits, and the reference
// GEMM summing in double. Private to mixp.
#pragma once

#include <array>
#include <cstdint>

#include "kernels/fp4.h"
#include "kernels/registry.h"

namespace mixp::kernels {

/// x (f32) as [rows, cols] into packed (u8, [rows, ceil(cols / 2)]) and scales (u8, one code a
/// block): kernels/fp4.h's fp4_quantize.
using Fp4QuantizeFn = void(const Tensor& x, int64_t rows, int64_t cols, const Fp4Params& params,
                           Tensor& packed, Tensor& scales);
extern Kernel<Fp4QuantizeFn> fp4_quantize;

/// One operand of an FP4 GEMM as tensors: [rows, cols] in packed E2M1 codes and block scales.
struct Fp4Matrix {
  Tensor packed;  ///< u8 [rows, ceil(cols / 2)]
  Tensor scales;  ///< u8 [ceil(rows / block_rows), ceil(cols / block)]
  Fp4Kind kind = Fp4Kind::nvfp4;
  int64_t rows = 0, cols = 0, block_rows = 1;

  /// The device of its tensors; mixp::Error where they differ.
  Device device() const;
};

/// out (f32 [q.rows, q.cols]) = each E2M1 element times its block scale, times 1 / tensor_scale
/// for nvfp4 (kernels/fp4.h's fp4_dequantize_rows); NaN under a NaN scale.
using Fp4DequantizeFn = void(const Fp4Matrix& q, float tensor_scale, Tensor& out);
extern Kernel<Fp4DequantizeFn> fp4_dequantize;

/// t = the transpose of q, a [rows, cols] matrix in square tiles (q.block_rows == the block
/// size): t's codes u8 [cols, ceil(rows / 2)] and scales u8 [ceil(cols / block),
/// ceil(rows / block)], allocated by the caller; t.rows, t.cols and t.kind describe it. The same
/// values, transposed, with no rounding (kernels/fp4.h's fp4_transpose_tiled).
using Fp4TransposeFn = void(const Fp4Matrix& q, Fp4Matrix& t);
extern Kernel<Fp4TransposeFn> fp4_transpose;

/// out (f32 [rows, padded], padded = cols rounded up to 16) = the 16-point random Hadamard
/// transform (kernels/fp4.h's hadamard16_rows) of x (f32 [rows, cols]) with zeros appended to
/// each row.
using Hadamard16Fn = void(const Tensor& x, const std::array<float, 16>& signs, Tensor& out);
extern Kernel<Hadamard16Fn> hadamard16;

/// c (f32 [a.rows, b.rows]) = (A B^T) * global, A's and B's values each element times its block
/// scale (kernels/fp4.h's fp4_block_values: exact in bf16 and in f32), summed in fp32 (in double
/// by the fallback), then each sum multiplied once by `global` (nvfp4: 1 / S_enc(A) x
/// 1 / S_enc(B); 1 leaves the sums as they are).
using Fp4GemmFn = void(const Fp4Matrix& a, const Fp4Matrix& b, float global, Tensor& c);
extern Kernel<Fp4GemmFn> fp4_block_gemm;

/// c (f32 [m, n]) = A B^T for bf16 A [m, k] and B [n, k]: the exact products summed in fp32 by
/// oneDNN where the CPU has AVX-512 BF16, else (and in the fallback) widened to f32 and summed in
/// double by the reference GEMM. Adaptive precision's bf16 baseline of a layer's product.
using Bf16ProductFn = void(const Tensor& a, const Tensor& b, Tensor& c);
extern Kernel<Bf16ProductFn> bf16_product;

}  // namespace mixp::kernels
