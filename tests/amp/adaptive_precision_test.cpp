// Adaptive precision (mixp/amp/adaptive.h): the statistics of a quantization on tensors built so
// that every number is known, the detection of a layer whose blocks flush, the moves with their
// hysteresis, and the state's round trip through a checkpoint.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "mixp/amp/adaptive.h"
#include "mixp/amp/presets.h"
#include "mixp/error.h"
#include "mixp/random.h"

namespace mixp {
namespace {

using amp::LayerFormat;

Tensor normal(const Shape& shape, uint64_t seed, double scale = 1.0) {
  Philox rng(PhiloxState{seed, 5, 0});
  return randn(shape, rng, scale, DType::f32);
}

const amp::Fp4Recipe kNvfp4{};

// A block of 16 holding one value of 1 and fifteen of 2^-6: NVFP4 scales the block so that 1
// becomes 6, and 2^-6 * 6 = 0.09 is below E2M1's 0.25 rounding threshold, so the fifteen flush.
TEST(AdaptiveStats, KnownFlushedFractionErrorAndNonFinite) {
  std::vector<double> values(4 * 32);
  for (size_t i = 0; i < values.size(); ++i) values[i] = i % 16 == 0 ? 1.0 : 0x1p-6;
  const Tensor x = from_values(values, {4, 32});
  const amp::QuantizationStats s =
      amp::quantization_stats(x, LayerFormat::fp4, amp::Fp8Role::input, kNvfp4);
  EXPECT_DOUBLE_EQ(s.flushed, 15.0 / 16.0);
  EXPECT_EQ(s.saturated, 0.0);
  EXPECT_FALSE(s.nonfinite);
  // The error: the flushed values' energy over all of it.
  const double flushed_energy = 15.0 * 0x1p-12, total = 1.0 + flushed_energy;
  EXPECT_NEAR(s.error, std::sqrt(flushed_energy / total), 1e-12);
  // FP8 (E4M3, scales per 32) keeps 2^-6 next to 1 exactly.
  const amp::QuantizationStats f8 =
      amp::quantization_stats(x, LayerFormat::fp8, amp::Fp8Role::input, kNvfp4);
  EXPECT_EQ(f8.flushed, 0.0);
  EXPECT_EQ(f8.error, 0.0);
  const amp::QuantizationStats b =
      amp::quantization_stats(x, LayerFormat::bf16, amp::Fp8Role::input, kNvfp4);
  EXPECT_EQ(b.error, 0.0);
  values[7] = NAN;
  EXPECT_TRUE(amp::quantization_stats(from_values(values, {4, 32}), LayerFormat::fp4,
                                      amp::Fp8Role::input, kNvfp4)
                  .nonfinite);
  EXPECT_THROW((void)amp::quantization_stats(from_values({1.0}, {1}), LayerFormat::fp4,
                                             amp::Fp8Role::input, kNvfp4),
               Error);
}

TEST(AdaptiveStats, GemmErrorOrdersTheFormats) {
  const Tensor x = normal({32, 64}, 1), w = normal({16, 64}, 2);
  const double e4 = amp::gemm_error(x, w, LayerFormat::fp4, kNvfp4);
  const double e8 = amp::gemm_error(x, w, LayerFormat::fp8, kNvfp4);
  EXPECT_EQ(amp::gemm_error(x, w, LayerFormat::bf16, kNvfp4), 0.0);
  EXPECT_GT(e8, 0.0);
  EXPECT_GT(e4, 2.0 * e8);  // E2M1 keeps 1 mantissa bit, E4M3 3
}

amp::AdaptivePrecision two_layers(amp::AdaptiveRecipe recipe) {
  return amp::AdaptivePrecision(recipe, kNvfp4, {"a", "b"});
}

// Layer b's inputs flush in FP4 (the blocks above) and not in FP8: a measuring step moves it up
// once, to FP8, naming the statistic; layer a, normal data, stays.
TEST(AdaptiveDecisions, AFlushingLayerMovesUpAndANormalOneStays) {
  amp::AdaptivePrecision adaptive = two_layers({.interval = 2});
  std::vector<double> values(64 * 64);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = i % 16 == 0 ? 1.0 : 0x1p-6 * double(1 + i % 3);
  const Tensor flushing = from_values(values, {64, 64});
  adaptive.begin(1, 0);
  EXPECT_FALSE(adaptive.measuring());  // step 1 of interval 2
  adaptive.update();
  adaptive.begin(2, 0);
  ASSERT_TRUE(adaptive.measuring());
  adaptive.measure_inputs(0, normal({64, 64}, 3), normal({32, 64}, 4));
  adaptive.measure_inputs(1, flushing, normal({32, 64}, 5));
  adaptive.update();
  EXPECT_EQ(adaptive.format(0), LayerFormat::fp4);
  EXPECT_EQ(adaptive.format(1), LayerFormat::fp8);
  ASSERT_EQ(adaptive.decisions().size(), 1u);
  const amp::PrecisionDecision& d = adaptive.decisions()[0];
  EXPECT_EQ(d.step, 3);
  EXPECT_EQ(d.layer, "b");
  EXPECT_EQ(d.from, LayerFormat::fp4);
  EXPECT_EQ(d.to, LayerFormat::fp8);
  EXPECT_EQ(d.statistic, "flushed");
  EXPECT_GT(d.value, adaptive.recipe().flush_margin);
}

// Moves by measurements as the ranks agree on them (set_measurements): up at once past
// up_ratio; down only after `patience` safe measurements in a row, a measurement between
// down_ratio and up_ratio resetting the count.
TEST(AdaptiveDecisions, HysteresisUpAtOnceDownAfterPatience) {
  amp::AdaptivePrecision adaptive = two_layers({.interval = 1, .patience = 2});
  auto step = [&](int64_t s, double badness_fp4_b, double badness_fp8_b) {
    adaptive.begin(s, 0);
    // [layer][format][badness, flush excess, nonfinite, seen]
    adaptive.set_measurements({1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0,  //
                               badness_fp4_b, 0.0, 0.0, 1.0, badness_fp8_b, 0.0, 0.0, 1.0});
    adaptive.update();
    return adaptive.format(1);
  };
  const double up = adaptive.recipe().up_ratio, down = adaptive.recipe().down_ratio;
  EXPECT_EQ(step(0, up * 1.01, 1.0), LayerFormat::fp8);
  EXPECT_EQ(step(1, down * 0.9, 1.0), LayerFormat::fp8);       // safe 1
  EXPECT_EQ(step(2, (up + down) / 2, 1.0), LayerFormat::fp8);  // in between: count reset
  EXPECT_EQ(step(3, down * 0.9, 1.0), LayerFormat::fp8);       // safe 1
  EXPECT_EQ(step(4, down * 0.9, 1.0), LayerFormat::fp4);       // safe 2: down
  EXPECT_EQ(step(5, 1.0, up * 2), LayerFormat::fp4);  // FP8's figures do not move an FP4 layer
  ASSERT_EQ(adaptive.decisions().size(), 2u);
  EXPECT_EQ(adaptive.decisions()[1].statistic, "safe");
  EXPECT_EQ(adaptive.format(0), LayerFormat::fp4);
  EXPECT_THROW(adaptive.set_measurements({1.0}), Error);
}

// A layer the recipe keeps in bf16 (auto-fp4's last layers) starts there and never moves.
TEST(AdaptiveDecisions, ALayerTheRecipeKeepsStaysInBf16) {
  amp::AdaptivePrecision a({.interval = 1}, kNvfp4, {"a", "b"}, {true, false});
  EXPECT_EQ(a.format(0), LayerFormat::fp4);
  EXPECT_EQ(a.format(1), LayerFormat::bf16);
  a.begin(0, 0);
  a.set_measurements(std::vector<double>(16, 9.0));
  a.update();
  EXPECT_EQ(a.format(0), LayerFormat::fp8);
  EXPECT_EQ(a.format(1), LayerFormat::bf16);
  EXPECT_EQ(a.decisions().size(), 1u);
  EXPECT_THROW(amp::AdaptivePrecision({}, kNvfp4, {"a", "b"}, {true}), Error);
}

TEST(AdaptiveDecisions, TheStateRoundTripsThroughACheckpoint) {
  amp::AdaptivePrecision a = two_layers({.interval = 1});
  a.begin(0, 0);
  a.set_measurements(
      {9.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0});
  a.update();
  ASSERT_EQ(a.format(0), LayerFormat::fp8);
  StateDict saved;
  a.save(saved);
  amp::AdaptivePrecision b = two_layers({.interval = 1});
  b.load(saved);
  EXPECT_EQ(b.formats(), a.formats());
  ASSERT_EQ(b.decisions().size(), 1u);
  EXPECT_EQ(b.decisions()[0].layer, "a");
  EXPECT_EQ(b.decisions()[0].value, 9.0);
  amp::AdaptivePrecision other(a.recipe(), kNvfp4, {"a", "c"});
  EXPECT_THROW(other.load(saved), Error);
  EXPECT_THROW(other.load(StateDict{}), Error);
  EXPECT_THROW(amp::AdaptivePrecision({.lowest = LayerFormat::bf16}, kNvfp4, {"a"}), Error);
}

}  // namespace
}  // namespace mixp
