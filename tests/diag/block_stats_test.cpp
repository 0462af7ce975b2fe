// diag::block_scale_stats on tensors built block by block, where each block's decode scale, fate
// and dequantized values follow from its construction and the format's definition: exact blocks
// at known binades, a saturating block, a flushed block, blocks of zeros, NaN and infinity
// blocks, in 1 x block rows and in square tiles, for mxfp8 (both scale rules), fp8 block
// (1x128, 128x128), nvfp4 and mxfp4.
#include "mixp/diag/block_stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "mixp/error.h"
#include "mixp/float_types.h"
#include "mixp/format.h"
#include "support/tolerance.h"

namespace mixp::diag {
namespace {

// E8M0's smallest scale is 2^-127 (code 0): where an MX block far below every other clamps.
constexpr int kE8m0MinExponent = -127;
// NVFP4's tensor scale maps the tensor's amax onto E2M1's max times E4M3's max.
const double kE4m3Max = Format::e4m3().max();

enum class Kind { live, zero, non_finite };

// One block: its source values, what each must dequantize to, and what the block must count as.
struct Block {
  std::vector<float> x;
  std::vector<double> want;
  Kind kind = Kind::live;
  bool saturated = false;
  bool flushed = false;
  std::optional<double> log2_scale;
};

// Values the element format holds exactly, the format's largest first (so a block of them has
// amax = max), with a negative, a normal and a subnormal one and a zero.
std::vector<double> exact_values(const Format& f) {
  return {f.max(), -f.min_normal(), 1.5 * f.min_normal(), -f.min_subnormal(), 0.0, f.max() / 2};
}

// A block of n exact values times 2^k: decode scale 2^k under every rule built here.
Block exact_block(const Format& f, int64_t n, double unit, double log2_scale) {
  const std::vector<double> v = exact_values(f);
  Block b;
  for (int64_t i = 0; i < n; ++i) {
    b.x.push_back(float(v[size_t(i) % v.size()] * unit));
    b.want.push_back(b.x.back());
  }
  b.log2_scale = log2_scale;
  return b;
}

Block exact_block(const Format& f, int64_t n, int k) {
  return exact_block(f, n, std::ldexp(1.0, k), k);
}

// An exact block with one element a quarter of the smallest subnormal: it rounds to zero.
Block block_with_a_flushed_element(const Format& f, int64_t n, int k) {
  Block b = exact_block(f, n, k);
  b.x[1] = float(f.min_subnormal() / 4 * std::ldexp(1.0, k));
  b.want[1] = 0.0;
  return b;
}

// An exact block whose largest element is max + 3/4 of max's ulp: above max + ulp/2, so it
// rounds above max and is clipped to it, yet below 2^(emax+1), so the floor rule keeps 2^k.
Block saturating_block(const Format& f, int64_t n, int k) {
  Block b = exact_block(f, n, k);
  const double ulp = std::ldexp(1.0, std::ilogb(f.max()) - f.mantissa_bits);
  b.x[0] = float((f.max() + 0.75 * ulp) * std::ldexp(1.0, k));
  b.want[0] = f.max() * std::ldexp(1.0, k);
  b.saturated = true;
  return b;
}

// The same with max + 1/4 ulp: it rounds to max, which is rounding, not saturation.
Block rounded_to_max_block(const Format& f, int64_t n, int k) {
  Block b = saturating_block(f, n, k);
  const double ulp = std::ldexp(1.0, std::ilogb(f.max()) - f.mantissa_bits);
  b.x[0] = float((f.max() + 0.25 * ulp) * std::ldexp(1.0, k));
  b.saturated = false;
  return b;
}

Block zero_block(int64_t n) {
  Block b;
  b.x.assign(size_t(n), 0.0f);
  b.want.assign(size_t(n), 0.0);
  b.kind = Kind::zero;
  return b;
}

Block non_finite_block(const Format& f, int64_t n, int k, float bad) {
  Block b = exact_block(f, n, k);
  b.x[2] = bad;
  b.kind = Kind::non_finite;
  b.log2_scale.reset();
  return b;
}

// The smallest positive fp32 value, alone in a block: every block scale rule here clamps its
// scale, and the element, far below the smallest subnormal, becomes zero.
Block flushed_block(int64_t n, std::optional<double> log2_scale) {
  Block b = zero_block(n);
  b.x[0] = std::numeric_limits<float>::denorm_min();
  b.kind = Kind::live;
  b.flushed = true;
  b.log2_scale = log2_scale;
  return b;
}

// The tensor [grid_rows * block_rows, grid_cols * block_cols] holding blocks[k] in tile k
// (row-major); with block_rows 1 every row of the grid is one row of blocks.
Tensor assemble(const std::vector<Block>& blocks, int64_t grid_cols, int64_t block_rows,
                int64_t block_cols) {
  const int64_t grid_rows = int64_t(blocks.size()) / grid_cols;
  const int64_t cols = grid_cols * block_cols;
  std::vector<double> values(static_cast<size_t>(grid_rows * block_rows * cols));
  for (size_t k = 0; k < blocks.size(); ++k)
    for (size_t e = 0; e < blocks[k].x.size(); ++e) {
      const int64_t row = int64_t(k) / grid_cols * block_rows + int64_t(e) / block_cols;
      const int64_t col = int64_t(k) % grid_cols * block_cols + int64_t(e) % block_cols;
      values[size_t(row * cols + col)] = blocks[k].x[e];
    }
  return from_values(values, Shape{grid_rows * block_rows, cols});
}

// What block_scale_stats must report for `blocks`, from their construction.
void expect_stats(const BlockScaleStats& got, const std::vector<Block>& blocks, bool check_error) {
  int64_t zero = 0, non_finite = 0, saturated = 0, flushed = 0, nonzero = 0, flushed_elements = 0;
  std::vector<double> scales;
  double error_squares = 0, reference_squares = 0, max_relative = 0;
  for (const Block& b : blocks) {
    zero += b.kind == Kind::zero;
    non_finite += b.kind == Kind::non_finite;
    if (b.kind == Kind::non_finite) continue;
    saturated += b.saturated;
    flushed += b.flushed;
    if (b.log2_scale) scales.push_back(*b.log2_scale);
    for (size_t e = 0; e < b.x.size(); ++e) {
      const double reference = float(bfloat16(b.x[e]));
      nonzero += b.x[e] != 0.0f;
      flushed_elements += b.x[e] != 0.0f && b.want[e] == 0.0;
      error_squares += (b.want[e] - reference) * (b.want[e] - reference);
      reference_squares += reference * reference;
      if (reference != 0)
        max_relative =
            std::max(max_relative, std::fabs(b.want[e] - reference) / std::fabs(reference));
    }
  }
  EXPECT_EQ(got.blocks, int64_t(blocks.size()));
  EXPECT_EQ(got.zero_blocks, zero);
  EXPECT_EQ(got.non_finite_blocks, non_finite);
  EXPECT_EQ(got.saturated_blocks, saturated);
  EXPECT_EQ(got.flushed_blocks, flushed);
  EXPECT_DOUBLE_EQ(got.saturated_fraction(), double(saturated) / double(blocks.size()));
  EXPECT_DOUBLE_EQ(got.flushed_fraction(), double(flushed) / double(blocks.size()));
  EXPECT_EQ(got.nonzero_elements, nonzero);
  EXPECT_EQ(got.flushed_elements, flushed_elements);
  EXPECT_EQ(got.scaled_blocks, int64_t(scales.size()));
  std::sort(scales.begin(), scales.end());
  ASSERT_FALSE(scales.empty());
  EXPECT_DOUBLE_EQ(got.log2_scale_min, scales.front());
  EXPECT_DOUBLE_EQ(got.log2_scale_max, scales.back());
  EXPECT_DOUBLE_EQ(got.log2_scale_median, scales[(scales.size() - 1) / 2]);
  EXPECT_DOUBLE_EQ(got.log2_scale_spread(), scales.back() - scales.front());
  if (!check_error) return;
  const test::Tolerance tol =
      test::tolerance(DType::f64, int64_t(blocks.size() * blocks[0].x.size()));
  const double rms = reference_squares > 0 ? std::sqrt(error_squares / reference_squares) : 0.0;
  EXPECT_NEAR(got.relative_rms_error, rms, tol.atol + tol.rtol * rms);
  EXPECT_NEAR(got.max_relative_error, max_relative, tol.atol + tol.rtol * max_relative);
}

// The MX blocks: exact ones at three binades, one with a flushed element, a saturating one (the
// floor rule keeps its scale and clips), a flushed one at E8M0's smallest scale, one whose
// largest element rounds to max, zeros, NaN, inf.
std::vector<Block> mx_blocks(const Format& f, int64_t n) {
  return {exact_block(f, n, -30),
          exact_block(f, n, 0),
          exact_block(f, n, 12),
          block_with_a_flushed_element(f, n, -3),
          saturating_block(f, n, 5),
          flushed_block(n, kE8m0MinExponent),
          rounded_to_max_block(f, n, -7),
          zero_block(n),
          non_finite_block(f, n, 1, std::numeric_limits<float>::quiet_NaN()),
          non_finite_block(f, n, 2, -std::numeric_limits<float>::infinity())};
}

TEST(BlockScaleStats, Mxfp8FloorRuleCountsEveryKindOfBlock) {
  for (DType fp8 : {DType::e4m3, DType::e5m2}) {
    SCOPED_TRACE(name_of(fp8));
    const Format f = fp8 == DType::e4m3 ? Format::e4m3() : Format::e5m2();
    const std::vector<Block> blocks = mx_blocks(f, 32);
    const Tensor x = assemble(blocks, 5, 1, 32);
    const BlockScaleStats s =
        block_scale_stats(x, fp8, amp::Fp8Scaling::mxfp8, amp::MxScaleRounding::floor);
    EXPECT_EQ(s.block_rows, 1);
    EXPECT_EQ(s.block_cols, 32);
    expect_stats(s, blocks, true);
  }
}

TEST(BlockScaleStats, Mxfp8UpRuleTakesTheBlocksAboveMaxOneBinadeUp) {
  const Format f = Format::e4m3();
  std::vector<Block> blocks = mx_blocks(f, 32);
  // The up rule's scale: the smallest 2^e with amax <= max * 2^e, one above the floor rule's
  // for the two blocks whose amax lies above max * 2^k: the saturating one and the rounded one.
  for (Block* above : {&blocks[4], &blocks[6]}) {
    above->saturated = false;
    const double k = *above->log2_scale;
    above->log2_scale = k + 1;
    // One binade less below: its smallest subnormals become ties at half E4M3's smallest
    // subnormal, which go to the even neighbour, zero.
    for (size_t e = 0; e < above->x.size(); ++e)
      if (std::fabs(above->x[e]) == f.min_subnormal() * std::ldexp(1.0, int(k)))
        above->want[e] = 0.0;
  }
  const BlockScaleStats s = block_scale_stats(assemble(blocks, 5, 1, 32), DType::e4m3,
                                              amp::Fp8Scaling::mxfp8, amp::MxScaleRounding::up);
  // Rescaled by one more binade, those blocks no longer dequantize to their construction: the
  // error is left to the floor test.
  expect_stats(s, blocks, false);
  EXPECT_EQ(s.saturated_blocks, 0);
}

TEST(BlockScaleStats, Fp8BlockScalesEachRowBlockAndEachTile) {
  const Format f = Format::e4m3();
  // Current scaling per block: amax = max * 2^k gives the fp32 scale 2^-k, exactly; the
  // denormal block's scale overflows to FLT_MAX, its scale_inv is 1 / FLT_MAX in fp32.
  const double overflowed = std::log2(double(1.0f / std::numeric_limits<float>::max()));
  std::vector<Block> rows = {exact_block(f, 128, -20),
                             exact_block(f, 128, 3),
                             block_with_a_flushed_element(f, 128, 0),
                             flushed_block(128, overflowed),
                             zero_block(128),
                             non_finite_block(f, 128, 0, std::numeric_limits<float>::quiet_NaN())};
  expect_stats(
      block_scale_stats(assemble(rows, 2, 1, 128), DType::e4m3, amp::Fp8Scaling::block_1x128), rows,
      true);
  std::vector<Block> tiles = {exact_block(f, 128 * 128, 7), flushed_block(128 * 128, overflowed),
                              block_with_a_flushed_element(f, 128 * 128, -9),
                              zero_block(128 * 128)};
  const BlockScaleStats t =
      block_scale_stats(assemble(tiles, 2, 128, 128), DType::e4m3, amp::Fp8Scaling::block_128x128);
  EXPECT_EQ(t.block_rows, 128);
  EXPECT_EQ(t.block_cols, 128);
  expect_stats(t, tiles, true);
}

// NVFP4 with the tensor's amax 6 * 448 * 2^t, so that S_enc = 2^-t exactly, and blocks whose
// E4M3 scales follow: amax 6 * 2^k gives e4m3(2^(k-t)) = 2^(k-t) (decode 2^k) while k - t is
// within E4M3's exponents; 7.5 * 2^(t-9) asks for 1.25 * 2^-9, which E4M3's subnormals round
// down to 2^-9, so its largest element scales to 7.5 and is clipped to 6; 6 * 2^(t-11) asks for
// 2^-11, below half E4M3's smallest subnormal: a zero scale and a flushed block.
std::vector<Block> nvfp4_blocks(int64_t n, int t, bool non_finite) {
  const Format f = Format::e2m1();
  const double top_scale = kE4m3Max * std::ldexp(1.0, t);
  std::vector<Block> blocks = {exact_block(f, n, top_scale, std::log2(top_scale)),
                               exact_block(f, n, t - 3), block_with_a_flushed_element(f, n, t - 8),
                               saturating_block(f, n, t - 9)};
  Block flushed = exact_block(f, n, t - 11);
  for (double& w : flushed.want) w = 0.0;
  flushed.flushed = true;
  flushed.log2_scale.reset();
  blocks.push_back(flushed);
  blocks.push_back(zero_block(n));
  if (non_finite) {
    // A NaN or an infinity makes the tensor's amax non-finite, and S_enc 1: t = 0 keeps it so.
    blocks.push_back(non_finite_block(f, n, t, std::numeric_limits<float>::quiet_NaN()));
    blocks.push_back(non_finite_block(f, n, t, std::numeric_limits<float>::infinity()));
  }
  return blocks;
}

TEST(BlockScaleStats, Nvfp4TwoLevelScalesInRowsAndTiles) {
  for (int t : {0, -20, 9}) {
    SCOPED_TRACE(t);
    const std::vector<Block> blocks = nvfp4_blocks(16, t, t == 0);
    expect_stats(block_scale_stats(assemble(blocks, 2, 1, 16), amp::Fp4Scaling::nvfp4), blocks,
                 true);
    const std::vector<Block> tiles = nvfp4_blocks(16 * 16, t, t == 0);
    const BlockScaleStats s = block_scale_stats(assemble(tiles, 2, 16, 16), amp::Fp4Scaling::nvfp4,
                                                {.square_blocks = true});
    EXPECT_EQ(s.block_rows, 16);
    EXPECT_EQ(s.block_cols, 16);
    expect_stats(s, tiles, true);
  }
}

TEST(BlockScaleStats, Mxfp4FloorRuleInRowsAndTiles) {
  const Format f = Format::e2m1();
  const std::vector<Block> blocks = mx_blocks(f, 32);
  const amp::Fp4Options floor{.mx_rounding = amp::MxScaleRounding::floor};
  expect_stats(block_scale_stats(assemble(blocks, 5, 1, 32), amp::Fp4Scaling::mxfp4, floor), blocks,
               true);
  std::vector<Block> tiles = mx_blocks(f, 32 * 32);
  tiles.pop_back();  // the NaN block stays, the infinity goes: a 3 x 3 grid
  const BlockScaleStats s =
      block_scale_stats(assemble(tiles, 3, 32, 32), amp::Fp4Scaling::mxfp4,
                        {.square_blocks = true, .mx_rounding = amp::MxScaleRounding::floor});
  EXPECT_EQ(s.block_rows, 32);
  expect_stats(s, tiles, true);
}

TEST(BlockScaleStats, StochasticRoundingKeepsExactValuesExact) {
  // Values E2M1 holds have nothing to round: stochastic rounding gives them back, any stream.
  const Format f = Format::e2m1();
  // The tensor's amax 6 * 448 makes S_enc 1, and dequantization exact.
  const std::vector<Block> blocks = {exact_block(f, 16, kE4m3Max, std::log2(kE4m3Max)),
                                     exact_block(f, 16, -4), exact_block(f, 16, -6),
                                     zero_block(16)};
  const BlockScaleStats s = block_scale_stats(
      assemble(blocks, 2, 1, 16), amp::Fp4Scaling::nvfp4,
      {.rounding = amp::Fp4Rounding::stochastic, .philox = {.seed = 7, .stream = 3}});
  expect_stats(s, blocks, true);
  EXPECT_EQ(s.relative_rms_error, 0.0);
}

TEST(BlockScaleStats, CountsPartialBlocksAtTheEndOfEveryRow) {
  // cols = 2 blocks + 5: every row has a third, partial block; rows * ceil(cols / block) blocks.
  for (int64_t block : {16, 32}) {
    const int64_t rows = 3, cols = 2 * block + 5;
    const std::vector<double> ones(static_cast<size_t>(rows * cols), 1.0);
    const Tensor x = from_values(ones, Shape{rows, cols});
    const BlockScaleStats s =
        block_scale_stats(x, block == 16 ? amp::Fp4Scaling::nvfp4 : amp::Fp4Scaling::mxfp4);
    EXPECT_EQ(s.blocks, rows * ((cols + block - 1) / block));
    EXPECT_EQ(s.relative_rms_error, 0.0);  // 1 is exact in E2M1 with any power-of-two scale
  }
  const Tensor x = from_values(std::vector<double>(3 * 130, 1.0), Shape{3, 130});
  EXPECT_EQ(block_scale_stats(x, DType::e4m3, amp::Fp8Scaling::mxfp8).blocks, 3 * 5);
  EXPECT_EQ(block_scale_stats(x, DType::e4m3, amp::Fp8Scaling::block_1x128).blocks, 3 * 2);
}

TEST(BlockScaleStats, MeasuresTheErrorAgainstTheSourceRoundedToBf16) {
  // 1 + 2^-12 is 1 in bf16, and E4M3 and E2M1 round it to 1 under a power-of-two scale: no
  // error against bf16, though fp32 would see 2^-12. (NVFP4's fp32 tensor scale is no power of
  // two for this amax; given in bf16, the source is 1 and every step exact.)
  const std::vector<double> values(64, 1.0 + std::ldexp(1.0, -12));
  const Tensor x = from_values(values, Shape{2, 32});
  for (const BlockScaleStats& s : {block_scale_stats(x, DType::e4m3, amp::Fp8Scaling::mxfp8),
                                   block_scale_stats(x, DType::e5m2, amp::Fp8Scaling::mxfp8),
                                   block_scale_stats(x, amp::Fp4Scaling::mxfp4),
                                   block_scale_stats(x.to(DType::bf16), amp::Fp4Scaling::nvfp4)}) {
    EXPECT_EQ(s.relative_rms_error, 0.0);
    EXPECT_EQ(s.max_relative_error, 0.0);
  }
}

TEST(BlockScaleStats, RefusesPerTensorScalingsAndOtherDtypes) {
  const Tensor x = from_values(std::vector<double>(64, 1.0), Shape{2, 32});
  for (amp::Fp8Scaling s :
       {amp::Fp8Scaling::delayed, amp::Fp8Scaling::current, amp::Fp8Scaling::none}) {
    try {
      block_scale_stats(x, DType::e4m3, s);
      ADD_FAILURE() << amp::name_of(s);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(amp::name_of(s)), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("not blocks"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(block_scale_stats(x, DType::bf16, amp::Fp8Scaling::mxfp8), Error);
  EXPECT_THROW(block_scale_stats(x.to(DType::f16), amp::Fp4Scaling::nvfp4), Error);
  EXPECT_THROW(block_scale_stats(Tensor(), amp::Fp4Scaling::mxfp4), Error);
}

}  // namespace
}  // namespace mixp::diag
