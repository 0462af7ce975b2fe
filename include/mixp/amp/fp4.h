// mixp/amp/fp4.h — FP4 block quantization: E2M1 elements with NVFP4's two-level scales or
// MXFP4's power-of-two scales, packed two elements a byte.
//
// Example:
//
//   using namespace mixp;
//   amp::Fp4Tensor q = amp::quantize_fp4(x2d, amp::Fp4Scaling::nvfp4);   // weights, activations
//   Tensor back = q.dequantize();                 // f32: the values an FP4 tensor core multiplies
//   int64_t bytes = q.bytes();                    // 4 bits an element, plus the scales
//   amp::Fp4Tensor g = amp::quantize_fp4(grad2d, amp::Fp4Scaling::nvfp4,
//                                        {.rounding = amp::Fp4Rounding::stochastic,
//                                         .philox = {seed, stream, offset}});  // gradients
//
// E2M1 (OCP MX FP4): 1 sign, 2 exponent bits (bias 1), 1 mantissa bit; the magnitudes
// 0, 0.5, 1, 1.5, 2, 3, 4, 6; no infinity, no NaN. Code = sign << 3 | magnitude index.
//
// The blocks run along the last dimension (the reduction dimension of the GEMM that reads the
// tensor); x of shape [..., cols] is quantized as rows = numel / cols rows.
//
//   nvfp4 (NVIDIA, arXiv 2509.25149; the formulas of the CPU reference quantizer in Transformer
//   Engine's NVFP4 tests, quantize_nvfp4_1d, without its fast-math option):
//     tensor:  S_enc = (448 * 6) / amax in fp32, so that the tensor's amax maps onto 6 x 448,
//              the largest E2M1 value times the largest E4M3 value. amax 0 gives 1 (nothing to
//              scale), and so do an infinite or NaN amax (they say nothing about the finite
//              values; TE also returns 1 for an infinite one); a quotient that overflows gives
//              FLT_MAX.
//     block of 16: s = e4m3(block_amax / 6 * S_enc), the decode scale, rounded to nearest even
//              and saturated at 448 (fp32 arithmetic, left to right, as TE). A scale that
//              rounds to 0 (a block far below the tensor's amax) flushes the block to zeros.
//     elements: e2m1(x * (S_enc / s)), so x = e2m1 * s * (1 / S_enc) on the way back.
//   mxfp4 (OCP Microscaling Formats v1.0): block of 32, E8M0 scale 2^e with e by `mx_rounding`
//     as for mxfp8 (mixp/amp/fp8.h) and E2M1's emax 2 and max 6: floor(log2(amax)) - 2, or the
//     smallest e with amax <= 6 * 2^e. Elements e2m1(x * 2^-e).
//   none: E2M1 without scaling, stored as mxfp4 with every block's scale 2^0 (E8M0 127): values
//     beyond 6 saturate and those below 0.25 flush to zero. The floor the scalings are measured
//     against.
// A block with a NaN or an infinity gets the NaN scale (E4M3 0x7F, E8M0 0xFF) and zero codes,
// and dequantizes to NaN: E2M1 cannot hold either, so the scale carries it.
// Elements round to nearest even by default, saturating at ±6. Stochastic rounding (for
// gradients) rounds away from zero with probability (|y| - lo) / (hi - lo) in 32-bit fixed
// point, exactly as mixp/format.h's Rounding::stochastic; element i of the flattened tensor
// uses Philox word philox.offset + i, so the result does not depend on the threads.
//
// The fast kernel (AVX-512 when the CPU has it, else branch-free scalar code) and the scalar
// reference, which rounds through mixp/format.h's emulator, give the same bits; the reference
// runs under reference_mode().
#pragma once

#include <array>
#include <cstdint>

#include "mixp/amp/fp8.h"
#include "mixp/random.h"
#include "mixp/tensor.h"

namespace mixp::amp {

enum class Fp4Rounding : uint8_t { nearest_even = 0, stochastic = 1 };

const char* name_of(Fp4Scaling scaling);

struct Fp4Options {
  Fp4Rounding rounding = Fp4Rounding::nearest_even;
  /// Square block x block tiles over a 2-D tensor's two dimensions instead of 1 x block
  /// blocks (weights: the tensor and its transpose then quantize to the same values).
  bool square_blocks = false;
  PhiloxState philox{};                                  ///< the stream of stochastic rounding
  MxScaleRounding mx_rounding = MxScaleRounding::floor;  ///< mxfp4's E8M0 rule
};

/// A tensor in FP4: packed E2M1 codes with their block scales.
struct Fp4Tensor {
  Fp4Scaling scaling = Fp4Scaling::nvfp4;
  Shape shape;  ///< of the source
  int64_t rows = 0, cols = 0;
  Tensor data;  ///< u8 [rows, ceil(cols / 2)]: element 2j bits 0-3, 2j + 1 bits 4-7
  /// u8 [ceil(rows / block_rows), ceil(cols / block)]: E4M3 (nvfp4) or E8M0 (mxfp4)
  Tensor block_scales;
  int64_t block_rows = 1;     ///< 1, or block_size() for square tiles
  float tensor_scale = 1.0f;  ///< nvfp4: S_enc; mxfp4: 1
  float amax = 0.0f;          ///< max |x| of the source (NaN if it held a NaN)

  /// 16 (nvfp4) or 32 (mxfp4).
  int64_t block_size() const;
  /// The storage: packed elements, block scales and the fp32 tensor scale.
  int64_t bytes() const;
  /// The values this tensor stands for, f32 of `shape`.
  Tensor dequantize() const;
  /// The transpose of a 2-D tensor in square tiles: the same values, [cols, rows], with its
  /// blocks along the other dimension; mixp::Error for 1 x block blocks, whose transpose would
  /// need new scales (quantize the transposed values instead).
  Fp4Tensor transposed() const;
};

/// Quantizes x (f32 or bf16, at least 1-D, last dimension at least 1) to FP4 by `scaling`.
Fp4Tensor quantize_fp4(const Tensor& x, Fp4Scaling scaling, const Fp4Options& options = {});

/// C = A B^T in fp32 from two FP4 tensors of one scaling with the same k (their last
/// dimension): A [m, k] (or [..., k]: m rows), B [n, k]; C [m, n]. What an FP4 tensor core
/// computes: each element times its block scale, exact as a bf16 value, multiplied exactly and
/// summed in fp32 (a bf16 GEMM); then, for nvfp4, the product times (1 / S_enc(A)) x
/// (1 / S_enc(B)), each reciprocal and their product in fp32, one rounding per element.
Tensor fp4_gemm(const Fp4Tensor& a, const Fp4Tensor& b);

/// The 16-point random Hadamard transform of x's rows (f32 or bf16, 2-D [rows, cols]): f32
/// [rows, ceil(cols / 16) x 16], x zero-padded, every 16 consecutive elements v of a row made
/// H (signs * v) / 4 (kernels: the Sylvester-Hadamard butterfly in fp32).
Tensor random_hadamard16(const Tensor& x, const std::array<float, 16>& signs);

/// The value of an E2M1 code 0..15; mixp::Error for a larger code.
float e2m1_value(uint8_t code);
/// NVFP4's per-tensor encode scale S_enc from the tensor's amax (the rule above).
float nvfp4_tensor_scale(float amax);
/// NVFP4's E4M3 block scale code from the block's amax and S_enc (the rule above).
uint8_t nvfp4_block_scale_code(float block_amax, float tensor_scale);
/// MXFP4's E8M0 block scale code from the block's amax.
uint8_t mxfp4_scale_code(float amax, MxScaleRounding rounding = MxScaleRounding::floor);

}  // namespace mixp::amp
