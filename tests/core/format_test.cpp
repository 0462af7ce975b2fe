// The format emulator: against the storage types on every code and on the reference vectors,
// against a search of the value table for every rounding mode, and stochastic rounding for bias.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>

#include "mixp/error.h"
#include "mixp/float_types.h"
#include "mixp/format.h"
#include "mixp/random.h"
#include "support/oracle.h"
#include "support/vectors.h"

namespace mixp {
namespace {

constexpr Rounding kDeterministicRoundings[] = {Rounding::nearest_even, Rounding::toward_zero,
                                                Rounding::up, Rounding::down, Rounding::odd};

// Inputs that probe every interval of a format: each value, its neighbours in fp32, the
// midpoints and their neighbours, and random bit patterns.
std::vector<float> probe_inputs(const Format& f, size_t random_count) {
  std::vector<float> xs;
  const test::ValueTable t = test::value_table(f);
  auto around = [&xs](float v) {
    const uint32_t b = std::bit_cast<uint32_t>(v);
    for (int d = -2; d <= 2; ++d) xs.push_back(std::bit_cast<float>(b + uint32_t(d)));
  };
  for (size_t i = 0; i < t.values.size(); ++i) {
    around(float(t.values[i]));
    if (i + 1 < t.values.size()) around(float((t.values[i] + t.values[i + 1]) / 2));
  }
  const double top = t.values.back();
  const double step = std::ldexp(1.0, std::ilogb(top) - f.mantissa_bits);
  around(float(top + step / 2));
  around(float(top + step));
  around(float(top * 4));
  Philox rng(PhiloxState{1, 2, 3});
  for (size_t i = 0; i < random_count; ++i) xs.push_back(std::bit_cast<float>(rng.next_u32()));
  const size_t n = xs.size();
  for (size_t i = 0; i < n; ++i) xs.push_back(-xs[i]);
  xs.insert(xs.end(), {0.0f, -0.0f, INFINITY, -INFINITY, 1e-45f, -1e-45f, 3.4e38f});
  return xs;
}

TEST(Emulator, MatchesTheStorageTypesOnEveryCode) {
  for (uint32_t c = 0; c < 65536; ++c) {
    ASSERT_EQ(std::bit_cast<uint32_t>(decode(Format::fp16(), c)) & 0xffbfffffu,
              std::bit_cast<uint32_t>(float(float16::from_bits(uint16_t(c)))) & 0xffbfffffu);
    const float b = bfloat16::from_bits(uint16_t(c));
    const float e = decode(Format::bf16(), c);
    ASSERT_TRUE(std::bit_cast<uint32_t>(b) == std::bit_cast<uint32_t>(e) ||
                (std::isnan(b) && std::isnan(e)))
        << std::hex << c;
  }
  for (uint32_t c = 0; c < 256; ++c) {
    ASSERT_EQ(std::bit_cast<uint32_t>(decode(Format::e4m3(), c)),
              std::bit_cast<uint32_t>(float(float8_e4m3::from_bits(uint8_t(c)))));
    ASSERT_EQ(std::bit_cast<uint32_t>(decode(Format::e5m2(), c)),
              std::bit_cast<uint32_t>(float(float8_e5m2::from_bits(uint8_t(c)))));
  }
}

TEST(Emulator, EncodesLikeTheStorageTypes) {
  const std::vector<float> f16_inputs = probe_inputs(Format::fp16(), 200000);
  for (float x : f16_inputs) {
    ASSERT_EQ(encode(Format::fp16(), x, Rounding::nearest_even, Overflow::inf_or_nan),
              float16(x).bits)
        << std::hexfloat << x;
    ASSERT_EQ(encode(Format::bf16(), x, Rounding::nearest_even, Overflow::inf_or_nan),
              bfloat16(x).bits)
        << std::hexfloat << x;
  }
  for (Overflow o : {Overflow::saturate, Overflow::inf_or_nan}) {
    for (float x : probe_inputs(Format::e4m3(), 100000)) {
      ASSERT_EQ(encode(Format::e4m3(), x, Rounding::nearest_even, o), float8_e4m3(x, o).bits)
          << std::hexfloat << x;
    }
    for (float x : probe_inputs(Format::e5m2(), 100000)) {
      ASSERT_EQ(encode(Format::e5m2(), x, Rounding::nearest_even, o), float8_e5m2(x, o).bits)
          << std::hexfloat << x;
    }
  }
}

TEST(Emulator, PassesTheReferenceVectors) {
  for (const std::string& name : test::vector_file_names()) {
    const test::VectorFile file = test::read_vectors(name);
    const Format in = test::vector_format(file.in_name);
    const Format out = test::vector_format(file.out_name);
    const Overflow overflow = file.op.ends_with("_sat") ? Overflow::saturate : Overflow::inf_or_nan;
    size_t mismatches = 0;
    for (const auto& line : file.lines) {
      const float x = decode(in, line.in);
      const uint32_t got = encode(out, x, Rounding::nearest_even, overflow);
      if (!test::output_matches(out, file.nan_rule, line.expected, got)) ++mismatches;
    }
    EXPECT_EQ(mismatches, 0u) << name;
  }
}

// Every format the emulator is asked to serve, including ones without a storage type.
std::vector<Format> oracle_formats() {
  Format e3m4 = Format::ieee_like(3, 4);
  Format e5m2_biased = Format::e5m2();
  e5m2_biased.bias = 10;
  Format e4m3_inf = Format::ieee_like(4, 3);
  return {Format::fp16(), Format::e4m3(),     Format::e5m2(),     Format::e3m2(), Format::e2m3(),
          Format::e2m1(), Format::e4m3fnuz(), Format::e5m2fnuz(), e3m4,           e5m2_biased,
          e4m3_inf};
}

TEST(Emulator, AgreesWithTheValueTableSearchForEveryRounding) {
  for (const Format& f : oracle_formats()) {
    const test::ValueTable table = test::value_table(f);
    const std::vector<float> inputs = probe_inputs(f, 20000);
    for (Rounding r : kDeterministicRoundings) {
      for (Overflow o : {Overflow::saturate, Overflow::inf_or_nan}) {
        for (float x : inputs) {
          if (!std::isfinite(x)) continue;
          const uint32_t want = test::oracle_encode(f, table, double(x), r, o);
          const uint32_t got = encode(f, x, r, o);
          ASSERT_EQ(got, want) << f.name() << " " << name_of(r) << " overflow " << int(o)
                               << " x=" << std::hexfloat << x;
        }
      }
    }
  }
}

TEST(Emulator, DecodesEveryCodeOfEveryFormat) {
  for (const Format& f : oracle_formats()) {
    for (uint32_t c = 0; c < (1u << f.total_bits()); ++c) {
      const double want = test::slow_decode(f, c);
      const float got = decode(f, c);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got)) << f.name() << " " << std::hex << c;
      } else {
        ASSERT_EQ(double(got), want) << f.name() << " " << std::hex << c;
        ASSERT_EQ(std::signbit(got), std::signbit(want)) << f.name() << " " << std::hex << c;
        // and every finite value encodes back to its code
        if (!(want == 0.0 && f.nan == NanEncoding::negative_zero)) {
          ASSERT_EQ(encode(f, got, Rounding::nearest_even, Overflow::inf_or_nan), c)
              << f.name() << " " << std::hex << c;
        }
      }
    }
  }
}

TEST(Emulator, OcpMicroscalingElementFormats) {
  // The limits the OCP MX v1.0 specification gives for its element formats.
  EXPECT_EQ(Format::e2m1().max(), 6.0);
  EXPECT_EQ(Format::e2m1().min_subnormal(), 0.5);
  EXPECT_EQ(Format::e2m3().max(), 7.5);
  EXPECT_EQ(Format::e2m3().min_subnormal(), 0.125);
  EXPECT_EQ(Format::e3m2().max(), 28.0);
  EXPECT_EQ(Format::e3m2().min_subnormal(), 0.0625);
  // No NaN, no infinity: overflow saturates in either mode, and NaN stays an fp32 NaN.
  EXPECT_EQ(round_to_format(Format::e2m1(), 100.0f, Rounding::nearest_even, Overflow::inf_or_nan),
            6.0f);
  EXPECT_EQ(
      round_to_format(Format::e2m1(), -INFINITY, Rounding::nearest_even, Overflow::inf_or_nan),
      -6.0f);
  EXPECT_TRUE(
      std::isnan(round_to_format(Format::e2m1(), NAN, Rounding::nearest_even, Overflow::saturate)));
  EXPECT_THROW(encode(Format::e2m1(), NAN, Rounding::nearest_even, Overflow::saturate), Error);
}

TEST(Emulator, WithoutSubnormalsFlushesBelowTheSmallestNormal) {
  Format f = Format::e4m3();
  f.subnormals = false;
  const Format with = Format::e4m3();
  const float min_normal = float(f.min_normal());
  EXPECT_EQ(f.min_subnormal(), f.min_normal());
  for (float x : probe_inputs(with, 20000)) {
    if (!std::isfinite(x)) continue;
    const float got = round_to_format(f, x, Rounding::nearest_even, Overflow::saturate);
    const float a = std::fabs(x);
    if (a >= min_normal) {
      ASSERT_EQ(got, round_to_format(with, x, Rounding::nearest_even, Overflow::saturate)) << x;
    } else if (a < min_normal * (1.0f - 0x1p-5f)) {
      // Rounded at the precision of the binade below, 2^-10, only the top half step reaches
      // the smallest normal, 2^-6.
      ASSERT_EQ(got, 0.0f) << x;
      ASSERT_EQ(std::signbit(got), std::signbit(x)) << x;
    } else {
      ASSERT_EQ(std::fabs(got), min_normal) << x;
    }
  }
}

// Stochastic rounding: results are the two neighbours, and the mean is the input.
TEST(Stochastic, IsUnbiased) {
  const int kSamples = 200000;
  struct Case {
    Format format;
    float x;
  };
  const Case cases[] = {{Format::bf16(), 1.0f + 0x1p-10f},
                        {Format::bf16(), -3.3f},
                        {Format::fp16(), 0.1f},
                        {Format::fp16(), 1e-7f},  // subnormal
                        {Format::e4m3(), 0.3f},
                        {Format::e5m2(), -1000.0f},
                        {Format::e2m1(), 2.6f},
                        {Format::e3m2(), 0.01f}};
  for (const Case& c : cases) {
    const float lo = round_to_format(c.format, c.x, Rounding::toward_zero, Overflow::saturate);
    const Rounding away = c.x > 0 ? Rounding::up : Rounding::down;
    const float hi = round_to_format(c.format, c.x, away, Overflow::saturate);
    ASSERT_NE(lo, hi) << "test value must not be representable: " << c.x;
    std::vector<float> in(kSamples, c.x), out(kSamples);
    round_to_format(c.format, in, out, Rounding::stochastic, Overflow::saturate,
                    PhiloxState{7, 11, 0});
    double sum = 0;
    for (float y : out) {
      ASSERT_TRUE(y == lo || y == hi) << c.format.name() << " " << c.x << " -> " << y;
      sum += double(y);
    }
    const double p = (double(c.x) - double(lo)) / (double(hi) - double(lo));
    const double gap = std::fabs(double(hi) - double(lo));
    // The mean of n draws has standard deviation gap * sqrt(p (1 - p) / n); allow 5 of them,
    // plus the 2^-32 truncation of the probability.
    const double bound = 5.0 * gap * std::sqrt(p * (1.0 - p) / kSamples) + gap * 0x1p-32;
    EXPECT_NEAR(sum / kSamples, double(c.x), bound) << c.format.name() << " x=" << c.x;
  }
}

TEST(Stochastic, IsReproducibleAndIndependentOfTheSplit) {
  std::vector<float> in(5000);
  Philox rng(PhiloxState{3, 0, 0});
  for (float& x : in) x = rng.normal();
  std::vector<float> whole(in.size()), parts(in.size());
  const PhiloxState state{99, 5, 1000};
  round_to_format(Format::e4m3(), in, whole, Rounding::stochastic, Overflow::saturate, state);
  const size_t cut = 1237;
  round_to_format(Format::e4m3(), std::span(in).first(cut), std::span(parts).first(cut),
                  Rounding::stochastic, Overflow::saturate, state);
  round_to_format(Format::e4m3(), std::span(in).subspan(cut), std::span(parts).subspan(cut),
                  Rounding::stochastic, Overflow::saturate,
                  PhiloxState{state.seed, state.stream, state.offset + cut});
  EXPECT_EQ(whole, parts);
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(whole[i], round_to_format(Format::e4m3(), in[i], Rounding::stochastic,
                                        Overflow::saturate, philox_word(state, i)));
  }
}

TEST(FormatApi, NamesParseBack) {
  for (const Format& f : standard_formats()) EXPECT_EQ(parse_format(f.name()), f) << f.name();
  EXPECT_EQ(parse_format("e3m4"), Format::ieee_like(3, 4));
  EXPECT_EQ(parse_format("fp16"), Format::fp16());
  Format odd = Format::e4m3();
  odd.subnormals = false;
  EXPECT_EQ(odd.name(), "e4m3(nan=all_ones,no_inf,no_subnormals)");
}

TEST(FormatApi, BadFormatsAreClearErrors) {
  EXPECT_THROW(parse_format("e9m2"), Error);
  EXPECT_THROW(parse_format("fp7"), Error);
  EXPECT_THROW(parse_format("e4m"), Error);
  Format wide = Format::ieee_like(8, 7);
  wide.bias = 100;  // largest exponent 2^154
  EXPECT_THROW(wide.validate(), Error);
  Format inf_without_ieee_nan = Format::e4m3();
  inf_without_ieee_nan.has_infinity = true;
  EXPECT_THROW(inf_without_ieee_nan.validate(), Error);
  try {
    parse_format("q8");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("'q8'"), std::string::npos) << e.message();
  }
  EXPECT_THROW(decode(Format::e4m3(), 0x100), Error);
  EXPECT_THROW(parse_rounding("nearest"), Error);
  std::vector<float> a(3), b(4);
  EXPECT_THROW(round_to_format(Format::e4m3(), a, b, Rounding::nearest_even, Overflow::saturate),
               Error);
}

}  // namespace
}  // namespace mixp
