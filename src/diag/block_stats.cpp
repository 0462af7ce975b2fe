#include "mixp/diag/block_stats.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "mixp/autograd.h"
#include "mixp/diag/stats.h"
#include "mixp/error.h"
#include "mixp/float_types.h"
#include "mixp/format.h"

namespace mixp::diag {
namespace {

double fraction(int64_t part, int64_t whole) {
  return whole > 0 ? double(part) / double(whole) : 0.0;
}

// A quantized tensor as the comparison sees it: the source and its dequantized values, both
// f32 [batch, rows, cols], and one decode scale per block (NaN where the scale is NaN), blocks
// of block_rows x block_cols within each batch matrix, numbered row-major over the stacked
// [batch * ceil(rows / block_rows), ceil(cols / block_cols)] grid.
struct Blocked {
  Tensor source, dequantized;
  int64_t batch = 1, rows = 0, cols = 0;
  int64_t block_rows = 1, block_cols = 0;
  std::vector<double> decode_scales;
  Format element;
};

struct BlockTally {
  bool non_finite = false, nonzero = false, any_kept = false, saturated = false;
};

// The blocks' grid and the block of each element.
struct BlockGrid {
  int64_t rows = 0, cols = 0;  // blocks per batch matrix, down and across
  int64_t block_rows = 1, block_cols = 1;
  int64_t blocks(int64_t batch) const { return batch * rows * cols; }
  int64_t of(int64_t matrix, int64_t r, int64_t c) const {
    return (matrix * rows + r / block_rows) * cols + c / block_cols;
  }
};

// What each block holds, from one pass over the elements.
std::vector<BlockTally> tally_blocks(const Blocked& b, const BlockGrid& grid) {
  const float* x = b.source.data<float>();
  const float* d = b.dequantized.data<float>();
  const double element_max = b.element.max();
  std::vector<BlockTally> tallies(static_cast<size_t>(grid.blocks(b.batch)));
  for (int64_t m = 0; m < b.batch; ++m)
    for (int64_t r = 0; r < b.rows; ++r)
      for (int64_t c = 0; c < b.cols; ++c) {
        const int64_t i = (m * b.rows + r) * b.cols + c;
        const size_t k = size_t(grid.of(m, r, c));
        BlockTally& t = tallies[k];
        const double v = x[i];
        if (!std::isfinite(v)) t.non_finite = true;
        if (v != 0.0) t.nonzero = true;
        if (d[i] != 0.0f) t.any_kept = true;
        // A scale of zero (or NaN) flushed the block: nothing in it was clipped.
        const double scale = b.decode_scales[k];
        if (!(scale > 0)) continue;
        const double y = std::fabs(v) / scale;
        if (y > element_max && fate_of(b.element, y) == Fate::overflow) t.saturated = true;
      }
  return tallies;
}

BlockScaleStats compare_blocks(const Blocked& b) {
  const BlockGrid grid{.rows = (b.rows + b.block_rows - 1) / b.block_rows,
                       .cols = (b.cols + b.block_cols - 1) / b.block_cols,
                       .block_rows = b.block_rows,
                       .block_cols = b.block_cols};
  const int64_t blocks = grid.blocks(b.batch);
  MIXP_ASSERT(int64_t(b.decode_scales.size()) == blocks,
              "block_scale_stats: ", b.decode_scales.size(), " scales for ", blocks, " blocks");
  const std::vector<BlockTally> tallies = tally_blocks(b, grid);

  BlockScaleStats s;
  s.block_rows = b.block_rows;
  s.block_cols = b.block_cols;
  s.blocks = blocks;
  std::vector<double> log2_scales;
  for (int64_t k = 0; k < blocks; ++k) {
    const BlockTally& t = tallies[size_t(k)];
    const double scale = b.decode_scales[size_t(k)];
    if (t.non_finite) {
      ++s.non_finite_blocks;
    } else if (!t.nonzero) {
      ++s.zero_blocks;
    } else {
      if (scale > 0 && std::isfinite(scale)) log2_scales.push_back(std::log2(scale));
      if (t.saturated) ++s.saturated_blocks;
      if (!t.any_kept) ++s.flushed_blocks;
    }
  }
  s.scaled_blocks = int64_t(log2_scales.size());
  if (!log2_scales.empty()) {
    std::sort(log2_scales.begin(), log2_scales.end());
    s.log2_scale_min = log2_scales.front();
    s.log2_scale_max = log2_scales.back();
    s.log2_scale_median = log2_scales[(log2_scales.size() - 1) / 2];
  }

  // The error, over the finite blocks' elements.
  const float* x = b.source.data<float>();
  const float* d = b.dequantized.data<float>();
  double error_squares = 0.0, reference_squares = 0.0;
  for (int64_t m = 0; m < b.batch; ++m)
    for (int64_t r = 0; r < b.rows; ++r)
      for (int64_t c = 0; c < b.cols; ++c) {
        if (tallies[size_t(grid.of(m, r, c))].non_finite) continue;
        const int64_t i = (m * b.rows + r) * b.cols + c;
        const double reference = float(bfloat16(x[i]));
        const double got = d[i];
        if (x[i] != 0.0f) {
          ++s.nonzero_elements;
          if (got == 0.0) ++s.flushed_elements;
        }
        error_squares += (got - reference) * (got - reference);
        reference_squares += reference * reference;
        if (reference != 0.0)
          s.max_relative_error =
              std::max(s.max_relative_error, std::fabs(got - reference) / std::fabs(reference));
      }
  s.relative_rms_error = reference_squares > 0 ? std::sqrt(error_squares / reference_squares) : 0.0;
  return s;
}

Tensor as_f32(const Tensor& x) { return x.dtype() == DType::f32 ? x : x.to(DType::f32); }

void check_input(const Tensor& x, const char* format) {
  MIXP_CHECK(x.defined() && x.numel() > 0, "block_scale_stats (", format,
             "): expected a non-empty tensor, got ",
             x.defined() ? x.shape().to_string() : "an undefined tensor");
  MIXP_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::bf16, "block_scale_stats (", format,
             "): the tensor must be f32 or bf16, got ", name_of(x.dtype()));
}

}  // namespace

double BlockScaleStats::saturated_fraction() const { return fraction(saturated_blocks, blocks); }
double BlockScaleStats::flushed_fraction() const { return fraction(flushed_blocks, blocks); }
double BlockScaleStats::flushed_element_fraction() const {
  return fraction(flushed_elements, nonzero_elements);
}

BlockScaleStats block_scale_stats(const Tensor& x, DType fp8, amp::Fp8Scaling scaling,
                                  amp::MxScaleRounding mx_rounding) {
  const char* name = amp::name_of(scaling);
  check_input(x, name);
  MIXP_CHECK(scaling == amp::Fp8Scaling::mxfp8 || scaling == amp::Fp8Scaling::block_1x128 ||
                 scaling == amp::Fp8Scaling::block_128x128,
             "block_scale_stats: ", name,
             " scales the whole tensor, not blocks; use mxfp8, block_1x128 or block_128x128");
  MIXP_CHECK(fp8 == DType::e4m3 || fp8 == DType::e5m2,
             "block_scale_stats: the element format must be e4m3 or e5m2, got ", name_of(fp8));
  NoGradGuard no_grad;
  const amp::Fp8Tensor q = amp::quantize(x, fp8, scaling, 1.0f, mx_rounding);
  Blocked b;
  b.source = as_f32(x);
  b.dequantized = q.dequantize();
  b.batch = x.ndim() == 3 ? x.size(0) : 1;
  b.rows = x.size(x.ndim() - 2);
  b.cols = x.size(x.ndim() - 1);
  b.block_rows = q.block_rows;
  b.block_cols = q.block_cols;
  b.element = fp8 == DType::e4m3 ? Format::e4m3() : Format::e5m2();
  const int64_t n = q.block_scales.numel();
  b.decode_scales.resize(static_cast<size_t>(n));
  if (scaling == amp::Fp8Scaling::mxfp8) {
    const uint8_t* codes = q.block_scales.data<uint8_t>();
    for (int64_t k = 0; k < n; ++k) b.decode_scales[size_t(k)] = amp::e8m0_value(codes[k]);
  } else {
    const float* scale_inv = q.block_scales.data<float>();
    for (int64_t k = 0; k < n; ++k) b.decode_scales[size_t(k)] = scale_inv[k];
  }
  return compare_blocks(b);
}

BlockScaleStats block_scale_stats(const Tensor& x, amp::Fp4Scaling scaling,
                                  const amp::Fp4Options& options) {
  check_input(x, amp::name_of(scaling));
  NoGradGuard no_grad;
  const amp::Fp4Tensor q = amp::quantize_fp4(x, scaling, options);
  Blocked b;
  b.source = as_f32(x);
  b.dequantized = q.dequantize();
  b.rows = q.rows;
  b.cols = q.cols;
  b.block_rows = q.block_rows;
  b.block_cols = q.block_size();
  b.element = Format::e2m1();
  const int64_t n = q.block_scales.numel();
  const uint8_t* codes = q.block_scales.data<uint8_t>();
  b.decode_scales.resize(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k)
    b.decode_scales[size_t(k)] =
        scaling == amp::Fp4Scaling::nvfp4
            ? double(float(float8_e4m3::from_bits(codes[k]))) / double(q.tensor_scale)
            : double(amp::e8m0_value(codes[k]));
  return compare_blocks(b);
}

}  // namespace mixp::diag
