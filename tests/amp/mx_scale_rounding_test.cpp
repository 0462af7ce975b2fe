// The two rules for an MX block's E8M0 scale, floor (OCP) and up (NVIDIA's MXFP8 recipe):
// each checked against its defining property on a dense sweep of fp32 amax values and on every
// boundary fp8_max * 2^k, the fast and the reference kernel held together under both, and the
// rule carried by the preset and the run configuration.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/fp8.h"
#include "mixp/amp/fp8.h"
#include "mixp/amp/presets.h"
#include "mixp/error.h"
#include "mixp/float_types.h"
#include "mixp/train/run.h"

namespace mixp {
namespace {

using amp::MxScaleRounding;

// Checks the code of one positive finite amax against the rule's definition, computed in
// double with frexp and ldexp (not the library's ilogb path). Returns false on a mismatch.
bool code_matches_rule(float amax, DType element, MxScaleRounding rounding) {
  const uint8_t code = amp::mx_scale_code(amax, element, rounding);
  const int emax = element == DType::e4m3 ? 8 : 15;
  const double max = element == DType::e4m3 ? 448.0 : 57344.0;
  int exponent = 0;
  (void)std::frexp(double(amax), &exponent);  // amax = m * 2^exponent, m in [0.5, 1)
  const int floor_log2 = exponent - 1;
  int want = floor_log2 - emax;
  if (rounding == MxScaleRounding::up) {
    // The smallest e with amax <= max * 2^e, searched from below the floor rule's exponent.
    want = floor_log2 - emax - 2;
    while (double(amax) > std::ldexp(max, want)) ++want;
  }
  want = std::max(-127, std::min(127, want));
  return int(code) == want + 127;
}

TEST(MxScaleRounding, BothRulesOnASweepOfEveryBinade) {
  // Every 251st positive finite fp32 bit pattern (a prime stride, so every binade and many
  // significands), then every value within 4 ulps of each boundary fp8_max * 2^k.
  for (DType d : {DType::e4m3, DType::e5m2}) {
    for (MxScaleRounding r : {MxScaleRounding::floor, MxScaleRounding::up}) {
      int64_t mismatches = 0, checked = 0;
      for (uint32_t bits = 1; bits < 0x7F800000u; bits += 251, ++checked)
        mismatches += code_matches_rule(std::bit_cast<float>(bits), d, r) ? 0 : 1;
      const float max = amp::fp8_max(d);
      for (int k = -149; k <= 127; ++k) {
        const float boundary = std::ldexp(max, k);
        if (boundary == 0.0f || !std::isfinite(boundary)) continue;
        const uint32_t b = std::bit_cast<uint32_t>(boundary);
        for (uint32_t delta = 0; delta <= 8; ++delta, ++checked) {
          const uint32_t bits = b - 4 + delta;
          const float amax = std::bit_cast<float>(bits);
          if (amax > 0.0f && std::isfinite(amax))
            mismatches += code_matches_rule(amax, d, r) ? 0 : 1;
        }
      }
      EXPECT_EQ(mismatches, 0) << name_of(d) << " " << amp::name_of(r) << " of " << checked;
    }
  }
}

TEST(MxScaleRounding, EdgeCasesAndTheOneBinadeBetweenTheRules) {
  for (DType d : {DType::e4m3, DType::e5m2}) {
    const float max = amp::fp8_max(d);
    for (MxScaleRounding r : {MxScaleRounding::floor, MxScaleRounding::up}) {
      EXPECT_EQ(amp::mx_scale_code(0.0f, d, r), 0);
      EXPECT_EQ(amp::mx_scale_code(NAN, d, r), 0xFF);
      EXPECT_EQ(amp::mx_scale_code(INFINITY, d, r), 0xFF);
      EXPECT_EQ(amp::mx_scale_code(-INFINITY, d, r), 0xFF);
    }
    // At fp8_max * 2^k exactly both rules agree (the block's amax maps onto fp8_max); one ulp
    // above, floor keeps the exponent (and saturates) while up moves one binade.
    for (int k = -20; k <= 20; ++k) {
      const float at = std::ldexp(max, k);
      const float above = std::nextafter(at, INFINITY);
      EXPECT_EQ(amp::mx_scale_code(at, d, MxScaleRounding::floor),
                amp::mx_scale_code(at, d, MxScaleRounding::up));
      EXPECT_EQ(amp::mx_scale_code(above, d, MxScaleRounding::up),
                amp::mx_scale_code(above, d, MxScaleRounding::floor) + 1);
    }
  }
  EXPECT_EQ(amp::parse_mx_scale_rounding("up"), MxScaleRounding::up);
  EXPECT_EQ(amp::parse_mx_scale_rounding("floor"), MxScaleRounding::floor);
  EXPECT_STREQ(amp::name_of(MxScaleRounding::up), "up");
  EXPECT_THROW(amp::parse_mx_scale_rounding("ceil"), Error);
}

// Blocks whose amax sits anywhere in its binade: under up no element saturates (each block's
// amax divided by its scale stays within fp8_max), under floor those above fp8_max * 2^e do.
TEST(MxScaleRounding, UpNeverSaturatesAndFloorDoes) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  const int64_t rows = 64, cols = 32 * 5 + 7;
  std::vector<float> x(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      x[size_t(r * cols + c)] = std::ldexp(unit(gen), int(r % 40) - 20);
  const int64_t nb = (cols + 31) / 32;
  for (DType d : {DType::e4m3, DType::e5m2}) {
    const float max = amp::fp8_max(d);
    int64_t saturated_floor = 0, saturated_up = 0;
    for (auto [rule, count] : {std::pair{kernels::MxRounding::floor, &saturated_floor},
                               std::pair{kernels::MxRounding::up, &saturated_up}}) {
      std::vector<uint8_t> q(x.size()), codes(size_t(rows * nb));
      kernels::fp8_quantize_mx_reference(x.data(), rows, cols, d, q.data(), codes.data(), rule);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const float scaled =
              x[size_t(r * cols + c)] / amp::e8m0_value(codes[size_t(r * nb + c / 32)]);
          *count += std::fabs(scaled) > max ? 1 : 0;
        }
    }
    EXPECT_EQ(saturated_up, 0) << name_of(d);
    EXPECT_GT(saturated_floor, 0) << name_of(d);
  }
}

TEST(MxScaleRounding, FastKernelMatchesReferenceUnderBothRules) {
  std::mt19937 gen(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t cols : {1, 31, 32, 33, 100, 257}) {
    const int64_t rows = 9, nb = (cols + 31) / 32;
    std::vector<float> x(size_t(rows * cols));
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(normal(gen), int(i % 50) - 25);
    x[0] = 0.0f;
    for (DType d : {DType::e4m3, DType::e5m2})
      for (kernels::MxRounding rule : {kernels::MxRounding::floor, kernels::MxRounding::up}) {
        std::vector<uint8_t> qf(x.size()), qr(x.size()), cf(size_t(rows * nb)),
            cr(size_t(rows * nb));
        kernels::fp8_quantize_mx_fast(x.data(), rows, cols, d, qf.data(), cf.data(), rule);
        kernels::fp8_quantize_mx_reference(x.data(), rows, cols, d, qr.data(), cr.data(), rule);
        EXPECT_EQ(qf, qr) << cols << " " << name_of(d);
        EXPECT_EQ(cf, cr) << cols << " " << name_of(d);
      }
  }
}

TEST(MxScaleRounding, TheTensorQuantizerAndThePresetCarryTheRule) {
  // One block with amax 480 * 2^-20: floor gives scale 2^-20 and saturates 480 to 448; up gives
  // 2^-19, where 240 is an E4M3 value, so the block comes back exactly.
  const float amax = std::ldexp(480.0f, -20);
  const Tensor x = from_values({amax, -amax / 4, 0.0}, {1, 3}, DType::f32);
  const std::vector<double> floor_back =
      amp::quantize(x, DType::e4m3, amp::Fp8Scaling::mxfp8, 1.0f, MxScaleRounding::floor)
          .dequantize()
          .to_vector();
  const std::vector<double> up_back =
      amp::quantize(x, DType::e4m3, amp::Fp8Scaling::mxfp8, 1.0f, MxScaleRounding::up)
          .dequantize()
          .to_vector();
  EXPECT_EQ(floor_back[0], double(std::ldexp(448.0f, -20)));
  EXPECT_EQ(up_back, x.to_vector());

  EXPECT_EQ(amp::preset("mxfp8", MxScaleRounding::up).fp8->mx_scale_rounding, MxScaleRounding::up);
  EXPECT_EQ(amp::preset("mxfp8", MxScaleRounding::floor).fp8->mx_scale_rounding,
            MxScaleRounding::floor);
  EXPECT_EQ(amp::preset("mxfp8").fp8->mx_scale_rounding, amp::kDefaultMxScaleRounding);
  EXPECT_FALSE(amp::preset("amp-bf16", MxScaleRounding::up).fp8.has_value());
}

TEST(MxScaleRounding, TheRunConfigStoresTheRuleAndOlderRunsReadTheOldDefault) {
  train::RunConfig c;
  c.model.name = "mlp";
  c.train.precision = "mxfp8";
  for (MxScaleRounding r : {MxScaleRounding::floor, MxScaleRounding::up}) {
    c.train.mx_scale_rounding = r;
    EXPECT_EQ(train::run_config_from_json(train::run_config_json(c)).train.mx_scale_rounding, r);
  }
  // A configuration written before the key existed.
  nlohmann::json j = nlohmann::json::parse(train::run_config_json(c));
  bool removed = false;
  for (auto& [key, value] : j.items())
    if (value.is_object() && value.erase("mx_scale_rounding") > 0) removed = true;
  ASSERT_TRUE(removed);
  EXPECT_EQ(train::run_config_from_json(j.dump()).train.mx_scale_rounding,
            amp::kLegacyMxScaleRounding);
  j["train"]["mx_scale_rounding"] = "sideways";
  EXPECT_THROW(train::run_config_from_json(j.dump()), Error);
}

}  // namespace
}  // namespace mixp
