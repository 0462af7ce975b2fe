// fp16 products on a CPU without fp16 arithmetic, by mixp's own fp32 tiles on AVX-512 F: the
// exact widening of the f16 operand and the rounding of an fp32 weight to f16's values are done
// in the packing the tiles read, not in passes of their own before oneDNN's product. Private to
// mixp; the candidate tiles_f16 of kernels/gemm_product.h.
//
// C [m][n] = op(A) op(B) (+ bias): A f16, [m][k] or [k][m] with s.trans_a (a linear layer's
// output gradient in its weight gradient), widened exactly; B [k][n], or [n][k] with s.trans_b
// (a linear layer's weight in its forward), f32 read as its rounding to f16 (nearest even, as
// autocast's cast) or f16; sums in fp32, each a chain of fused multiply-adds in the order of k
// from +0, then plus the bias, rounded once into C as F16TileOut says. Every sum is the same for
// any thread count.
//
// Example (the mlp's first layer under amp-fp16: 64 images, 784 inputs, 1024 outputs):
//   const GemmShape s{.m = 64, .n = 1024, .k = 784, .trans_b = true};
//   std::vector<uint8_t> space(f16_tiles_workspace_bytes(s, threads));
//   avx512::matmul_f16_tiles(s, x_bits, w, DType::f32, y_bits, F16TileOut::f16, bias,
//                            space.data(), threads);
#pragma once

#include <cstdint>

#include "kernels/gemm.h"
#include "mixp/dtype.h"

namespace mixp::kernels {

/// A batch of up to kF16TileBatch rows (of images: each packed panel serves all of them while
/// it is in L2): m with A [m][k], then k up to 4096; or k with A [k][m] (a weight gradient, which
/// sums over the batch), then m up to 4096. Batch 1.
constexpr int64_t kF16TileBatch = 128;
bool f16_tiles_supported(const GemmShape& s);

/// Bytes of workspace matmul_f16_tiles needs: per thread, A widened and one panel of B.
int64_t f16_tiles_workspace_bytes(const GemmShape& s, int threads);

/// What C holds: the sums rounded to f16, the sums in fp32, or the sums rounded to f16's values
/// and kept in fp32 (an autocast linear's fp32 weight gradient: the bits of an f16 result
/// widened).
enum class F16TileOut { f16, f32, f16_values_in_f32 };

namespace avx512 {

/// The product above on up to `threads` threads, in one region: panels of 64 columns of C
/// handed out as the threads ask, each packed from B and run over every row of A. b_dtype: f32
/// or f16; bias: n fp32 values or null.
void matmul_f16_tiles(const GemmShape& s, const uint16_t* a, const void* b, DType b_dtype, void* c,
                      F16TileOut out, const float* bias, void* workspace, int threads);

}  // namespace avx512
}  // namespace mixp::kernels
