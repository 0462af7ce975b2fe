// FP4 (E2M1) block quantization on raw buffers: the scale rules (kernels/fp4_scales.cpp), the
// fast kernels (kernels/cpu/fp4_cpu.cpp, AVX-512 in kernels/cpu/fp4_avx512.cpp) and their scalar
// references (kernels/ref/fp4_ref.cpp), which round through mixp/format.h's exact emulator and
// give the same bits. mixp/amp/fp4.h states the rules; it calls these. Private to mixp.
//
// Layout: x is [rows, cols], blocks run along cols (the last one may be shorter). Elements are
// packed two a byte per row: element 2j in bits 0-3 of byte j, element 2j + 1 in bits 4-7, so
// a row takes ceil(cols / 2) bytes; an odd row's last high nibble is 0. One scale code a block:
// scales [ceil(rows / block_rows), ceil(cols / block)]. block_rows is 1 (1 x block blocks) or
// the block size (square tiles, for weights: a tile's scale is the same whichever of its
// dimensions a GEMM reduces over, so a weight and its transpose quantize to the same values).
#pragma once

#include <cstdint>

#include "kernels/fp8.h"
#include "mixp/random.h"

namespace mixp::kernels {

inline constexpr int64_t kNvfp4Block = 16;
inline constexpr int64_t kMxfp4Block = 32;
inline constexpr float kE2m1Max = 6.0f;
inline constexpr int kE2m1Emax = 2;  ///< 6 = 1.5 * 2^2

enum class Fp4Kind : uint8_t { nvfp4 = 0, mxfp4 = 1 };

struct Fp4Params {
  Fp4Kind kind = Fp4Kind::nvfp4;
  /// nvfp4: the per-tensor encode scale S_enc (nvfp4_tensor_scale of the tensor's amax).
  float tensor_scale = 1.0f;
  MxRounding mx_rounding = MxRounding::floor;  ///< mxfp4's E8M0 rule
  /// Stochastic rounding of the elements: element (r, c) consumes Philox word
  /// philox.offset + r * cols + c, whatever the threads.
  bool stochastic = false;
  PhiloxState philox{};
  /// 1, or fp4_block(kind) for square tiles (the last ones may be shorter).
  int64_t block_rows = 1;
  /// mxfp4 only: every block's scale is 2^0 (code 127), whatever its values: E2M1 unscaled.
  bool unit_scales = false;
};

int64_t fp4_block(Fp4Kind kind);  ///< 16 (nvfp4), 32 (mxfp4)

/// The value of an E2M1 code (bits 0-3; bit 3 the sign).
float e2m1_value(uint8_t code);
/// E2M1 code of y rounded to nearest even, saturating at ±6 (NaN gives +0's code; the
/// quantizers never pass one).
uint8_t e2m1_round_nearest(float y);
/// E2M1 code of y rounded away from zero with probability (|y| - lo) / (hi - lo), lo and hi its
/// neighbours, by comparing `random` with that fraction in 32-bit fixed point; saturating.
uint8_t e2m1_round_stochastic(float y, uint32_t random);

/// S_enc = (448 * 6) / amax (Transformer Engine's compute_global_encode_scaling_factor_FP4),
/// FLT_MAX where that overflows, and 1 for amax 0, infinite or NaN.
float nvfp4_tensor_scale(float amax);
/// The E4M3 code of a block's decode scale: e4m3(block_amax / 6 * S_enc), rounded to nearest
/// even and saturated at 448; 0x7F (NaN) for a NaN or infinite block_amax.
uint8_t nvfp4_block_scale_code(float block_amax, float tensor_scale);
/// What multiplies a block's elements before rounding: S_enc / e4m3 value, 0 for a zero scale.
float nvfp4_element_scale(uint8_t scale_code, float tensor_scale);
/// The E8M0 code of an MXFP4 block: e8m0_scale_code(amax, 2, 6, rounding).
uint8_t mxfp4_scale_code(float amax, MxRounding rounding);

/// Quantizes x [rows, cols] into packed [rows, ceil(cols / 2)] and scales [rows, nblocks].
/// A block holding a NaN or an infinity gets the NaN scale (E4M3 0x7F, E8M0 0xFF) and zero codes.
/// fp4_quantize_fast rounds 16 elements a step on AVX-512 where `vector` is set (the caller has
/// checked the CPU has it), and by the branch-free scalar rounding otherwise; the same bits.
void fp4_quantize_fast(const float* x, int64_t rows, int64_t cols, const Fp4Params& params,
                       uint8_t* packed, uint8_t* scales, bool vector);
void fp4_quantize_reference(const float* x, int64_t rows, int64_t cols, const Fp4Params& params,
                            uint8_t* packed, uint8_t* scales);

/// out[r, c] = e2m1 * block scale (* 1 / S_enc for nvfp4), in fp32; NaN under a NaN scale.
void fp4_dequantize_rows(const uint8_t* packed, const uint8_t* scales, int64_t rows,
                         int64_t cols, Fp4Kind kind, float tensor_scale, int64_t block_rows,
                         float* out);
/// out[r, c] = e2m1 * block scale, without nvfp4's 1 / S_enc: what an FP4 tensor
/// core multiplies. Exact: an E2M1 value has 2 significant bits and an E4M3 scale 4, and E8M0
/// scales are powers of two within bf16's exponent range (the smallest products, 2^-128 and
/// below, are bf16 subnormals with room to spare), so every product is a bf16 value, except
/// where E8M0's largest scales (2^126, 2^127) times the largest elements pass fp32's range:
/// those overflow to infinity, as they would in the hardware's fp32.
/// `out` holds bf16 bits (uint16_t) when `bf16`, else floats (the same values, widened).
void fp4_block_values(const uint8_t* packed, const uint8_t* scales, int64_t rows, int64_t cols,
                      Fp4Kind kind, int64_t block_rows, bool bf16, void* out);
/// The codes and scales of the transpose of a square-tiled [rows, cols] tensor: packed_t
/// [cols, ceil(rows / 2)], scales_t [ceil(cols / block), ceil(rows / block)].
void fp4_transpose_tiled(const uint8_t* packed, const uint8_t* scales, int64_t rows, int64_t cols,
                         int64_t block, uint8_t* packed_t, uint8_t* scales_t);

/// The 16-point random Hadamard transform along the last dimension, in place: every 16
/// consecutive elements x of a row (cols a multiple of 16) become H (s * x) / 4, H the
/// Sylvester-Hadamard matrix of order 16 (entries +-1) and s the signs (+1 or -1, one per
/// position). Orthogonal, so the transform of both operands of a product along their
/// reduction dimension leaves the exact product unchanged. fp32 arithmetic: the four butterfly
/// stages of the fast Walsh-Hadamard transform, then the exact division by 4.
void hadamard16_rows(float* x, int64_t rows, int64_t cols, const float* signs);

namespace avx512 {
/// n codes of y[i] * scale into packed nibbles (n even; the output starts on a byte).
void e2m1_encode_nearest(const float* y, int64_t n, float scale, uint8_t* packed);
void e2m1_encode_stochastic(const float* y, const uint32_t* random, int64_t n, float scale,
                            uint8_t* packed);
}  // namespace avx512

}  // namespace mixp::kernels
