// The storage types: every reference vector, every code decoded against the textbook formula,
// and decode/encode round trips.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>

#include "mixp/float_types.h"
#include "support/oracle.h"
#include "support/vectors.h"

namespace mixp {
namespace {

using test::VectorFile;

// Converts one input pattern the way the vector file's op names, with the scalar types.
uint32_t scalar_convert(const std::string& op, uint32_t in) {
  const float x = std::bit_cast<float>(in);
  if (op == "f32_to_f16") return float16(x).bits;
  if (op == "f32_to_bf16") return bfloat16(x).bits;
  if (op == "f32_to_e4m3_sat") return float8_e4m3(x, Overflow::saturate).bits;
  if (op == "f32_to_e4m3_nosat") return float8_e4m3(x, Overflow::inf_or_nan).bits;
  if (op == "f32_to_e5m2_sat") return float8_e5m2(x, Overflow::saturate).bits;
  if (op == "f32_to_e5m2_nosat") return float8_e5m2(x, Overflow::inf_or_nan).bits;
  if (op == "f16_to_f32") return std::bit_cast<uint32_t>(float(float16::from_bits(uint16_t(in))));
  if (op == "bf16_to_f32") return std::bit_cast<uint32_t>(float(bfloat16::from_bits(uint16_t(in))));
  if (op == "e4m3_to_f32")
    return std::bit_cast<uint32_t>(float(float8_e4m3::from_bits(uint8_t(in))));
  if (op == "e5m2_to_f32")
    return std::bit_cast<uint32_t>(float(float8_e5m2::from_bits(uint8_t(in))));
  ADD_FAILURE() << "unknown op " << op;
  return 0;
}

class VectorTest : public ::testing::TestWithParam<std::string> {};

TEST_P(VectorTest, EveryLineMatches) {
  const VectorFile file = test::read_vectors(GetParam());
  ASSERT_FALSE(file.lines.empty());
  const Format out = test::vector_format(file.out_name);
  size_t mismatches = 0;
  for (const auto& line : file.lines) {
    const uint32_t got = scalar_convert(file.op, line.in);
    if (!test::output_matches(out, file.nan_rule, line.expected, got)) {
      if (++mismatches <= 10) {
        ADD_FAILURE() << file.op << " " << std::hex << line.in << ": expected " << line.expected
                      << ", got " << got << " (" << line.tag << ")";
      }
    }
  }
  EXPECT_EQ(mismatches, 0u) << file.path;
}

INSTANTIATE_TEST_SUITE_P(AllFiles, VectorTest, ::testing::ValuesIn(test::vector_file_names()),
                         [](const auto& info) {
                           std::string name = info.param.substr(0, info.param.find('.'));
                           return name;
                         });

// Exhaustive decoding against the textbook formula.
template <typename T>
void expect_every_code_decodes(const Format& format) {
  constexpr uint32_t kCodes = 1u << (8 * sizeof(T));
  for (uint32_t code = 0; code < kCodes; ++code) {
    const float got = T::from_bits(static_cast<decltype(T::bits)>(code));
    const double want = test::slow_decode(format, code);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << code;
      ASSERT_TRUE(std::bit_cast<uint32_t>(got) & 0x00400000u)
          << "NaN not quiet: " << std::hex << code;
      ASSERT_EQ(std::signbit(got), (code >> (format.total_bits() - 1)) != 0) << std::hex << code;
    } else {
      ASSERT_EQ(double(got), want) << std::hex << code;
      ASSERT_EQ(std::signbit(got), std::signbit(want)) << std::hex << code;
    }
  }
}

TEST(Decode, EveryF16Code) { expect_every_code_decodes<float16>(Format::fp16()); }
TEST(Decode, EveryE4M3Code) { expect_every_code_decodes<float8_e4m3>(Format::e4m3()); }
TEST(Decode, EveryE5M2Code) { expect_every_code_decodes<float8_e5m2>(Format::e5m2()); }
TEST(Decode, EveryBF16Code) {
  // bf16 decodes by widening the bits, so a signalling NaN stays signalling: check values only.
  for (uint32_t code = 0; code < 65536; ++code) {
    const float got = bfloat16::from_bits(uint16_t(code));
    const double want = test::slow_decode(Format::bf16(), code);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << code;
    } else {
      ASSERT_EQ(double(got), want) << std::hex << code;
      ASSERT_EQ(std::signbit(got), std::signbit(want)) << std::hex << code;
    }
  }
}

// decode(encode(x)) == x for every representable x, and encode(decode(c)) == c for every
// non-NaN code.
template <typename T, typename Encode>
void expect_round_trip(Encode encode) {
  constexpr uint32_t kCodes = 1u << (8 * sizeof(T));
  for (uint32_t code = 0; code < kCodes; ++code) {
    const float x = T::from_bits(static_cast<decltype(T::bits)>(code));
    const T back = encode(x);
    if (std::isnan(x)) {
      ASSERT_TRUE(std::isnan(float(back))) << std::hex << code;
      continue;
    }
    ASSERT_EQ(uint32_t(back.bits), code) << std::hex << code;
  }
}

TEST(RoundTrip, F16) {
  expect_round_trip<float16>([](float x) { return float16(x); });
}
TEST(RoundTrip, BF16) {
  expect_round_trip<bfloat16>([](float x) { return bfloat16(x); });
}
TEST(RoundTrip, E4M3BothOverflowModes) {
  for (Overflow o : {Overflow::saturate, Overflow::inf_or_nan}) {
    expect_round_trip<float8_e4m3>([o](float x) { return float8_e4m3(x, o); });
  }
}
TEST(RoundTrip, E5M2BothOverflowModes) {
  // Saturation maps inf to max, so only the non-saturating mode round-trips the infinities.
  expect_round_trip<float8_e5m2>([](float x) { return float8_e5m2(x, Overflow::inf_or_nan); });
  expect_round_trip<float8_e5m2>([](float x) {
    return std::isinf(x) ? float8_e5m2::from_bits(std::signbit(x) ? 0xfc : 0x7c)
                         : float8_e5m2(x, Overflow::saturate);
  });
}

TEST(Conversions, AreConstexpr) {
  static_assert(bfloat16(1.0f).bits == 0x3f80);
  static_assert(float16(1.0f).bits == 0x3c00);
  static_assert(float(float16::from_bits(0x3c00)) == 1.0f);
  static_assert(float8_e4m3(1.0f, Overflow::saturate).bits == 0x38);
  static_assert(float8_e5m2(1.0f, Overflow::saturate).bits == 0x3c);
  SUCCEED();
}

TEST(Conversions, KeepTheSignOfZeroAndOfUnderflow) {
  EXPECT_EQ(float16(-0.0f).bits, 0x8000);
  EXPECT_EQ(bfloat16(-0.0f).bits, 0x8000);
  EXPECT_EQ(float8_e4m3(-1e-30f, Overflow::saturate).bits, 0x80);
  EXPECT_EQ(float8_e5m2(-1e-30f, Overflow::saturate).bits, 0x80);
  EXPECT_EQ(float16(-1e-30f).bits, 0x8000);
}

TEST(Conversions, FP8OverflowModes) {
  const float big = 1e6f;
  EXPECT_EQ(float(float8_e4m3(big, Overflow::saturate)), 448.0f);
  EXPECT_TRUE(std::isnan(float(float8_e4m3(big, Overflow::inf_or_nan))));
  EXPECT_EQ(float(float8_e4m3(-INFINITY, Overflow::saturate)), -448.0f);
  EXPECT_EQ(float(float8_e5m2(big, Overflow::saturate)), 57344.0f);
  EXPECT_EQ(float(float8_e5m2(-big, Overflow::inf_or_nan)), -INFINITY);
}

TEST(StochasticBF16, RoundsOnlyToTheTwoNeighbours) {
  const float x = 1.0f + 0x1p-9f;  // between 1 and 1 + 2^-7
  for (uint32_t r : {0u, 1u, 0x7fffu, 0xbfffu, 0xc000u, 0xffffu, 0xffffffffu}) {
    const float y = bfloat16::round_stochastic(x, r);
    EXPECT_TRUE(y == 1.0f || y == 1.0f + 0x1p-7f) << r;
  }
  // The distance is a quarter of the gap: it rounds up for the top quarter of the draws.
  EXPECT_EQ(float(bfloat16::round_stochastic(x, 0xbfffu)), 1.0f);
  EXPECT_EQ(float(bfloat16::round_stochastic(x, 0xc000u)), 1.0f + 0x1p-7f);
  EXPECT_EQ(float(bfloat16::round_stochastic(1.0f, 0xffffu)), 1.0f);  // exact stays exact
  EXPECT_TRUE(std::isinf(float(bfloat16::round_stochastic(INFINITY, 0xffffu))));
  EXPECT_TRUE(std::isnan(float(bfloat16::round_stochastic(NAN, 0u))));
}

}  // namespace
}  // namespace mixp
