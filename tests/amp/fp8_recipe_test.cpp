// The FP8 recipes: the scale rules with their edge cases, the delayed-scaling history, the MX
// shared exponent on every binade and every E8M0 code, and the quantized tensors they produce.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include "mixp/amp/fp8.h"
#include "mixp/error.h"
#include "mixp/float_types.h"

namespace mixp {
namespace {

using amp::AmaxAlgorithm;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Every fp32 binade [2^e, 2^(e+1)), subnormal ones included, as (e, its smallest and largest
// value).
struct Binade {
  int e;
  float low, high;
};
std::vector<Binade> all_binades() {
  std::vector<Binade> out;
  for (int e = -149; e <= 127; ++e) {
    const float low = std::ldexp(1.0f, e);
    const float high = e == 127 ? FLT_MAX : std::nextafter(std::ldexp(1.0f, e + 1), 0.0f);
    out.push_back({e, low, high});
  }
  return out;
}

TEST(Fp8Recipe, FormatsByRole) {
  using amp::Fp8Format;
  using amp::Fp8Role;
  EXPECT_EQ(amp::fp8_dtype(Fp8Format::hybrid, Fp8Role::input), DType::e4m3);
  EXPECT_EQ(amp::fp8_dtype(Fp8Format::hybrid, Fp8Role::weight), DType::e4m3);
  EXPECT_EQ(amp::fp8_dtype(Fp8Format::hybrid, Fp8Role::gradient), DType::e5m2);
  for (Fp8Role r : {Fp8Role::input, Fp8Role::weight, Fp8Role::gradient})
    EXPECT_EQ(amp::fp8_dtype(Fp8Format::e4m3, r), DType::e4m3);
  EXPECT_EQ(amp::fp8_max(DType::e4m3), float(float8_e4m3::from_bits(0x7E)));
  EXPECT_EQ(amp::fp8_max(DType::e5m2), float(float8_e5m2::from_bits(0x7B)));
  EXPECT_THROW(amp::fp8_max(DType::bf16), Error);
}

TEST(Fp8Recipe, ScaleFromAmaxEdgeCases) {
  const float max = 448.0f;
  // amax 0, negative, NaN or infinite: the previous scale is kept.
  for (float amax : {0.0f, -0.0f, -3.0f, kNaN, kInf, -kInf}) {
    EXPECT_EQ(amp::scale_from_amax(amax, max, 0, 0.25f), 0.25f) << amax;
    EXPECT_EQ(amp::current_scale(amax, max), 1.0f) << amax;
  }
  // A subnormal amax overflows max / amax: the largest finite scale.
  EXPECT_EQ(amp::scale_from_amax(std::numeric_limits<float>::denorm_min(), max, 0, 1.0f), FLT_MAX);
  // The margin divides by 2^margin exactly.
  EXPECT_EQ(amp::scale_from_amax(3.5f, max, 2, 1.0f), float(448.0 / 3.5) / 4.0f);
  // Every binade of amax, both formats, margins 0 and 3: finite, positive, and the formula
  // (the quotient correctly rounded: the double quotient rounded to float is that).
  for (DType d : {DType::e4m3, DType::e5m2}) {
    const float m = amp::fp8_max(d);
    for (const Binade& b : all_binades()) {
      for (float amax : {b.low, b.high}) {
        for (int margin : {0, 3}) {
          const float s = amp::scale_from_amax(amax, m, margin, 1.0f);
          ASSERT_TRUE(std::isfinite(s) && s > 0.0f) << amax << " margin " << margin;
          const double want = double(float(double(m) / double(amax))) / std::ldexp(1.0, margin);
          if (std::isfinite(float(double(m) / double(amax))) && want >= double(FLT_MIN)) {
            EXPECT_EQ(double(s), want) << amax << " margin " << margin;
          }
        }
      }
    }
  }
}

TEST(Fp8Recipe, HistoryAmax) {
  const std::vector<float> h = {1.0f, 7.0f, 2.0f};
  EXPECT_EQ(amp::history_amax(h, AmaxAlgorithm::max), 7.0f);
  EXPECT_EQ(amp::history_amax(h, AmaxAlgorithm::most_recent), 2.0f);
  EXPECT_EQ(amp::history_amax({}, AmaxAlgorithm::max), 0.0f);
  const std::vector<float> with_nan = {1.0f, kNaN, 2.0f};
  EXPECT_TRUE(std::isnan(amp::history_amax(with_nan, AmaxAlgorithm::max)));
  EXPECT_EQ(amp::history_amax(with_nan, AmaxAlgorithm::most_recent), 2.0f);
  // delayed_scale is scale_from_amax of it.
  EXPECT_EQ(amp::delayed_scale(h, AmaxAlgorithm::max, 448.0f, 0, 1.0f), 448.0f / 7.0f);
  EXPECT_EQ(amp::delayed_scale(h, AmaxAlgorithm::most_recent, 448.0f, 1, 1.0f), 448.0f / 2.0f / 2);
  EXPECT_EQ(amp::delayed_scale(with_nan, AmaxAlgorithm::max, 448.0f, 0, 0.5f), 0.5f);
}

TEST(Fp8Recipe, MetaHistoryRollsAfterEachStep) {
  amp::Fp8Recipe r;
  r.amax_history_len = 3;
  amp::Fp8Meta m;
  EXPECT_EQ(m.scale, 1.0f);  // the first step quantizes with scale 1
  // Nothing recorded: amax 0, the scale stays.
  m.update(r, DType::e4m3);
  EXPECT_EQ(m.history, std::vector<float>({0.0f}));
  EXPECT_EQ(m.scale, 1.0f);
  const std::vector<float> amaxes = {4.0f, 2.0f, 1.0f, 0.5f};
  std::vector<float> seen = {0.0f};
  for (float a : amaxes) {
    m.record(a / 2);
    m.record(-a);  // the running max of |amax| over the step's quantizations
    m.update(r, DType::e4m3);
    seen.push_back(a);
    const std::vector<float> want(seen.end() - std::min<size_t>(3, seen.size()), seen.end());
    EXPECT_EQ(m.history, want);
    EXPECT_EQ(m.amax, 0.0f);
    EXPECT_EQ(m.scale, 448.0f / *std::max_element(want.begin(), want.end()));
  }
  // most_recent uses the newest entry.
  r.amax_history_len = 1024;
  r.amax_algorithm = AmaxAlgorithm::most_recent;
  m.record(8.0f);
  m.update(r, DType::e5m2);
  EXPECT_EQ(m.scale, 57344.0f / 8.0f);
  // A NaN sticks for the step and keeps the scale.
  m.record(kNaN);
  m.record(3.0f);
  EXPECT_TRUE(std::isnan(m.amax));
  m.update(r, DType::e5m2);
  EXPECT_EQ(m.scale, 57344.0f / 8.0f);
  EXPECT_TRUE(std::isnan(m.history.back()));
  // An infinity likewise.
  m.record(kInf);
  m.update(r, DType::e5m2);
  EXPECT_EQ(m.scale, 57344.0f / 8.0f);
}

TEST(Fp8Recipe, MxScaleCodeOnEveryBinade) {
  for (DType d : {DType::e4m3, DType::e5m2}) {
    const int emax = d == DType::e4m3 ? 8 : 15;
    EXPECT_EQ(amp::mx_emax(d), emax);
    for (const Binade& b : all_binades()) {
      const int want = std::max(-127, std::min(127, b.e - emax)) + 127;
      for (float amax : {b.low, b.high, b.low + (b.high - b.low) / 2}) {
        EXPECT_EQ(int(amp::mx_scale_code(amax, d)), want) << name_of(d) << " amax " << amax;
      }
    }
    EXPECT_EQ(amp::mx_scale_code(0.0f, d), 0);
    EXPECT_EQ(amp::mx_scale_code(kNaN, d), 0xFF);
    EXPECT_EQ(amp::mx_scale_code(kInf, d), 0xFF);
  }
  EXPECT_THROW(amp::mx_scale_code(1.0f, DType::bf16), Error);
}

TEST(Fp8Recipe, EveryE8M0Code) {
  for (int c = 0; c < 256; ++c) {
    const float v = amp::e8m0_value(uint8_t(c));
    if (c == 255) {
      EXPECT_TRUE(std::isnan(v));
      continue;
    }
    // 2^(c - 127) from its fp32 bits: exponent field c for c >= 1, the subnormal 2^-127 for 0.
    const float want =
        c == 0 ? std::bit_cast<float>(0x00400000u) : std::bit_cast<float>(uint32_t(c) << 23);
    EXPECT_EQ(v, want) << c;
    // The code comes back from the amax of a block whose largest element sits at 2^emax after
    // scaling, where that amax is a finite fp32.
    for (DType d : {DType::e4m3, DType::e5m2}) {
      const int e = c - 127 + amp::mx_emax(d);
      if (c >= 1 && e <= 127) {
        EXPECT_EQ(amp::mx_scale_code(std::ldexp(1.0f, e), d), c);
      }
    }
  }
}

TEST(Fp8Recipe, MxBlocksSaturateAndFlagSpecials) {
  for (DType d : {DType::e4m3, DType::e5m2}) {
    const float max = amp::fp8_max(d);
    const int emax = amp::mx_emax(d);
    // Row 0: amax just below 2^(emax+1) * 2^-20: the top element lands above fp8_max and
    // saturates. Row 1: zeros. Row 2: an infinity. Row 3: a NaN. 40 columns: a full block and
    // one of 8.
    const int64_t cols = 40;
    std::vector<double> v(static_cast<size_t>(4 * cols), 0.0);
    const double top = std::ldexp(1.0, emax + 1 - 20) * (1 - 1.0 / 64);
    for (int64_t j = 0; j < cols; ++j) v[size_t(j)] = top * double(j + 1) / double(cols);
    v[size_t(2 * cols + 3)] = INFINITY;
    v[size_t(3 * cols + 35)] = NAN;
    const Tensor x = from_values(v, {4, cols}, DType::f32);
    const amp::Fp8Tensor q = amp::quantize(x, d, amp::Fp8Scaling::mxfp8, 1.0f, amp::MxScaleRounding::floor);
    ASSERT_EQ(q.block_scales.shape(), (Shape{4, 2}));
    ASSERT_EQ(q.block_scales.dtype(), DType::u8);
    const std::vector<double> codes = q.block_scales.to_vector();
    EXPECT_EQ(codes[0], double(amp::mx_scale_code(float(top * 32 / cols), d)));
    EXPECT_EQ(codes[0], double(127 - 20 + 0));  // floor(log2(amax)) = emax - 20, minus emax
    EXPECT_EQ(codes[2], 0.0);
    EXPECT_EQ(codes[3], 0.0);
    EXPECT_EQ(codes[4], 255.0);
    EXPECT_EQ(codes[5], 0.0);  // the infinity's block only
    EXPECT_EQ(codes[6], 0.0);
    EXPECT_EQ(codes[7], 255.0);
    const std::vector<double> back = q.dequantize().to_vector();
    // Row 0, block 1 (columns 32..39): its top element, top, scaled by 2^-(emax-20) is
    // 2^(emax+1)(1 - 1/64), above max: saturated to max.
    EXPECT_EQ(back[size_t(cols - 1)], double(max) * std::ldexp(1.0, int(codes[1]) - 127));
    EXPECT_GT(top, back[size_t(cols - 1)]);
    for (int64_t j = 0; j < cols; ++j) EXPECT_EQ(back[size_t(cols + j)], 0.0);
    for (int64_t j = 0; j < 32; ++j) EXPECT_TRUE(std::isnan(back[size_t(2 * cols + j)]));
    for (int64_t j = 32; j < cols; ++j) EXPECT_EQ(back[size_t(2 * cols + j)], 0.0);
    for (int64_t j = 32; j < cols; ++j) EXPECT_TRUE(std::isnan(back[size_t(3 * cols + j)]));
  }
}

TEST(Fp8Recipe, PerTensorAndPerBlockScales) {
  Philox rng({5});
  const Tensor x = randn({130, 300}, rng, 3.0);
  double amax = 0;
  for (double v : x.to_vector()) amax = std::max(amax, std::fabs(v));
  const amp::Fp8Tensor cur = amp::quantize(x, DType::e4m3, amp::Fp8Scaling::current);
  EXPECT_EQ(cur.amax, float(amax));
  EXPECT_EQ(cur.scale, 448.0f / float(amax));
  EXPECT_EQ(cur.scale_inv, 1.0f / cur.scale);
  const amp::Fp8Tensor none = amp::quantize(x, DType::e4m3, amp::Fp8Scaling::none, 7.0f);
  EXPECT_EQ(none.scale, 1.0f);
  const amp::Fp8Tensor delayed = amp::quantize(x, DType::e4m3, amp::Fp8Scaling::delayed, 7.0f);
  EXPECT_EQ(delayed.scale, 7.0f);
  EXPECT_THROW(amp::quantize(x, DType::e4m3, amp::Fp8Scaling::delayed, 0.0f), Error);
  EXPECT_THROW(amp::quantize(x, DType::e4m3, amp::Fp8Scaling::delayed, kInf), Error);
  EXPECT_THROW(amp::quantize(x, DType::bf16, amp::Fp8Scaling::current), Error);
  // Per block: each tile's scale_inv is its own amax / fp8_max.
  const std::vector<double> xv = x.to_vector();
  for (amp::Fp8Scaling s : {amp::Fp8Scaling::block_1x128, amp::Fp8Scaling::block_128x128}) {
    const amp::Fp8Tensor q = amp::quantize(x, DType::e4m3, s);
    const int64_t br = s == amp::Fp8Scaling::block_1x128 ? 1 : 128;
    const int64_t tiles_r = (130 + br - 1) / br;
    ASSERT_EQ(q.block_scales.shape(), (Shape{1, tiles_r, 3}));
    const std::vector<double> inv = q.block_scales.to_vector();
    for (int64_t tr = 0; tr < tiles_r; ++tr) {
      for (int64_t tc = 0; tc < 3; ++tc) {
        double m = 0;
        for (int64_t r = tr * br; r < std::min<int64_t>(130, (tr + 1) * br); ++r)
          for (int64_t c = tc * 128; c < std::min<int64_t>(300, (tc + 1) * 128); ++c)
            m = std::max(m, std::fabs(xv[size_t(r * 300 + c)]));
        EXPECT_EQ(inv[size_t(tr * 3 + tc)], double(1.0f / (448.0f / float(m))));
      }
    }
  }
}

}  // namespace
}  // namespace mixp
