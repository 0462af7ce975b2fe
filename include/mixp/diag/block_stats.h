// mixp/diag/block_stats.h — what a block-scaled format does to a tensor, block by block.
//
// block_scale_stats() quantizes a tensor the way a block-scaled recipe does (amp::quantize or
// amp::quantize_fp4, not a copy of them), dequantizes it, and compares the two block by block:
//
//   format     blocks                         decode scale s of a block
//   mxfp8      1 x 32, E8M0                   2^(code - 127)
//   fp8 block  1 x 128 or 128 x 128, fp32     the block's fp32 scale_inv
//   nvfp4      1 x 16 or 16 x 16 tiles, E4M3  e4m3(code) / S_enc (S_enc the fp32 tensor scale)
//   mxfp4      1 x 32 or 32 x 32 tiles, E8M0  2^(code - 127)
//
// An element x of a block stands for e * s with e its element code's value. A block is
//   non-finite  when one of its source elements is a NaN or an infinity: it is counted, and
//               left out of everything below (the MX and NVFP4 scales make it NaN; the fp32
//               block scales put it out of range);
//   zero        when every source element is zero;
//   live        otherwise: finite, with a non-zero element.
// Of the live blocks:
//   scales      log2 s of those whose decode scale is positive (an NVFP4 scale that rounded
//               to zero has none to take): min, max, median (the lower middle value for an
//               even count, so that it is some block's scale) and spread = max - min, in
//               binades;
//   saturated   a block with an element that the element format clipped: |x| / s (in fp64)
//               rounds to nearest to a magnitude above the format's largest value
//               (diag::fate_of(format, |x| / s) == Fate::overflow), so that the format's max
//               stood in for it. A scaled value just above max that rounds down to it anyway is
//               rounding, not saturation (E4M3: above 464 = 448 + half its ulp; E2M1: 7 and up);
//   flushed     a block whose every element dequantizes to zero (an NVFP4 scale that rounded to
//               zero, a block far below its neighbours' amax);
//   flushed elements: the non-zero source elements that dequantize to zero, of all non-zero
//               finite source elements.
// Fractions of blocks are of all blocks. The error is against the source rounded to bf16 (the
// precision a bf16 model would have kept), over the elements of the finite blocks:
//   relative_rms_error = ||deq(q(x)) - bf16(x)||_2 / ||bf16(x)||_2 (0 when bf16(x) is all zero),
//   max_relative_error = max |deq - bf16(x)| / |bf16(x)| over the elements with bf16(x) != 0.
// Everything is accumulated in fp64.
//
// Example:
//
//   using namespace mixp;
//   diag::BlockScaleStats w = diag::block_scale_stats(weight, amp::Fp4Scaling::nvfp4,
//                                                     {.square_blocks = true});   // 16x16 tiles
//   diag::BlockScaleStats a = diag::block_scale_stats(x2d, DType::e4m3, amp::Fp8Scaling::mxfp8,
//                                                     amp::MxScaleRounding::up);
//   std::printf("%lld blocks, scales 2^%g..2^%g, %.2f%% saturated, rms error %.3g\n",
//               (long long)w.blocks, w.log2_scale_min, w.log2_scale_max,
//               100 * w.saturated_fraction(), w.relative_rms_error);
#pragma once

#include <cstdint>

#include "mixp/amp/fp4.h"
#include "mixp/amp/fp8.h"
#include "mixp/tensor.h"

namespace mixp::diag {

struct BlockScaleStats {
  int64_t block_rows = 1;  ///< the block's shape: 1 x block_cols, or square tiles
  int64_t block_cols = 0;
  int64_t blocks = 0;             ///< every block of the tensor
  int64_t non_finite_blocks = 0;  ///< holding a NaN or an infinity
  int64_t zero_blocks = 0;        ///< all zeros
  int64_t scaled_blocks = 0;      ///< live blocks with a positive decode scale: the scale figures
  double log2_scale_min = 0.0;    ///< over the scaled blocks; 0 when there are none
  double log2_scale_max = 0.0;
  double log2_scale_median = 0.0;
  int64_t saturated_blocks = 0;
  int64_t flushed_blocks = 0;
  int64_t nonzero_elements = 0;  ///< non-zero source elements of the finite blocks
  int64_t flushed_elements = 0;  ///< ... that dequantize to zero
  double relative_rms_error = 0.0;
  double max_relative_error = 0.0;

  /// log2_scale_max - log2_scale_min: how many binades the block scales span.
  double log2_scale_spread() const { return log2_scale_max - log2_scale_min; }
  double saturated_fraction() const;        ///< of all blocks
  double flushed_fraction() const;          ///< of all blocks
  double flushed_element_fraction() const;  ///< of nonzero_elements
};

/// The statistics of x (f32 or bf16, 2-D, or 3-D for 1 x block blocks) quantized to `fp8`
/// (e4m3 or e5m2) by a block scaling: mxfp8 (its scales rounded by `mx_rounding`), block_1x128
/// or block_128x128. Throws mixp::Error for a per-tensor scaling or what amp::quantize refuses.
BlockScaleStats block_scale_stats(const Tensor& x, DType fp8, amp::Fp8Scaling scaling,
                                  amp::MxScaleRounding mx_rounding = amp::kDefaultMxScaleRounding);

/// The statistics of x (f32 or bf16, [..., cols]; 2-D for square tiles) quantized by
/// amp::quantize_fp4(x, scaling, options): stochastic rounding too, with options.philox.
BlockScaleStats block_scale_stats(const Tensor& x, amp::Fp4Scaling scaling,
                                  const amp::Fp4Options& options = {});

}  // namespace mixp::diag
