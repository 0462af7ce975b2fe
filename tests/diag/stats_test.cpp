// diag::tensor_stats against the converters: every classification (zero, subnormal, overflow)
// is checked value by value against what the format emulator and the storage types actually
// do, on the boundary values of each format and on many random ones.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <vector>

#include "mixp/diag/stats.h"
#include "mixp/error.h"
#include "mixp/float_types.h"
#include "mixp/format.h"
#include "mixp/random.h"

namespace mixp::diag {
namespace {

// The reference fate of y > 0 (an fp32 value) in `f`: round it with the emulator into f and
// into f with one more exponent bit and the same bias (the same grid, extended upward), so that
// an overflow is seen even in formats that saturate (no infinity, no NaN).
Fate reference_fate(const Format& f, float y) {
  const float r = round_to_format(f, y, Rounding::nearest_even, Overflow::inf_or_nan);
  if (r == 0.0f) return Fate::zero;
  if (!std::isfinite(r)) return Fate::overflow;
  if (f.exponent_bits < 8) {  // bf16 has infinities; there is no 9-bit exponent to widen to
    Format wider = f;
    wider.exponent_bits += 1;
    const float w = round_to_format(wider, y, Rounding::nearest_even, Overflow::inf_or_nan);
    if (double(w) > f.max()) return Fate::overflow;
  }
  if (double(r) < f.min_normal()) return Fate::subnormal;
  return Fate::normal;
}

// Boundary values: each threshold of the header's derivation, its fp32 neighbours, and the
// format's own special values with theirs.
std::vector<float> boundary_values(const Format& f) {
  const double s = f.min_subnormal(), n = f.min_normal(), m = f.max();
  const double ulp = std::ldexp(1.0, std::ilogb(m) - f.mantissa_bits);
  std::vector<double> points = {s / 2,
                                s,
                                1.5 * s,
                                n - s / 2,
                                n - s,
                                n,
                                m,
                                m + ulp / 2,
                                m + ulp,
                                m - ulp / 2,
                                n - std::ldexp(n, -f.mantissa_bits - 2),
                                n / 2};
  std::vector<float> out;
  for (double p : points) {
    const float x = float(p);
    if (!(x > 0) || !std::isfinite(x)) continue;
    out.push_back(x);
    out.push_back(std::nextafter(x, 0.0f));
    out.push_back(std::nextafter(x, INFINITY));
  }
  return out;
}

std::vector<float> random_values(uint64_t seed, int count) {
  Philox rng(PhiloxState{seed, 0, 0});
  std::vector<float> out;
  for (int i = 0; i < count; ++i) {
    // Exponents 2^-60 .. 2^30 with random mantissas: every format's whole range.
    const uint32_t exponent = 127 - 60 + rng.next_u32() % 91;
    const uint32_t bits = (exponent << 23) | (rng.next_u32() & 0x7fffffu);
    out.push_back(std::bit_cast<float>(bits));
  }
  return out;
}

std::vector<Format> formats_under_test() {
  Format fp16_no_sub = Format::fp16();
  fp16_no_sub.subnormals = false;
  Format e4m3_no_sub = Format::e4m3();
  e4m3_no_sub.subnormals = false;
  return {Format::fp16(),     Format::bf16(), Format::e4m3(), Format::e5m2(),
          Format::e3m2(),     Format::e2m3(), Format::e2m1(), Format::e4m3fnuz(),
          Format::e5m2fnuz(), fp16_no_sub,    e4m3_no_sub,    parse_format("e3m4")};
}

TEST(DiagStats, FateMatchesTheEmulatorOnBoundaryAndRandomValues) {
  std::vector<float> random = random_values(1, 20000);
  for (const Format& f : formats_under_test()) {
    std::vector<float> values = boundary_values(f);
    values.insert(values.end(), random.begin(), random.end());
    int fates[4] = {0, 0, 0, 0};
    for (float y : values) {
      const Fate want = reference_fate(f, y);
      ASSERT_EQ(int(fate_of(f, double(y))), int(want))
          << f.name() << " at " << y << " (bits " << std::hex << std::bit_cast<uint32_t>(y) << ")";
      ++fates[int(want)];
    }
    // Every fate occurs (the random exponents span each format's range).
    for (int k = 0; k < 4; ++k)
      EXPECT_TRUE(fates[k] > 0 || (k == int(Fate::subnormal) && !f.subnormals))
          << f.name() << ": no value of fate " << k;
  }
}

// The storage types' own converters (not the emulator) agree with the classification too.
template <typename T>
Fate converter_fate(float y, double min_normal) {
  float r;
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>)
    r = float(T(y));
  else
    r = float(T(y, Overflow::inf_or_nan));
  if (r == 0.0f) return Fate::zero;
  if (!std::isfinite(r)) return Fate::overflow;
  if (double(r) < min_normal) return Fate::subnormal;
  return Fate::normal;
}

template <typename T>
void check_converter(const Format& f) {
  std::vector<float> values = boundary_values(f);
  const std::vector<float> random = random_values(2, 20000);
  values.insert(values.end(), random.begin(), random.end());
  for (float y : values)
    ASSERT_EQ(int(fate_of(f, double(y))), int(converter_fate<T>(y, f.min_normal())))
        << f.name() << " at " << y;
}

TEST(DiagStats, FateMatchesTheStorageTypes) {
  check_converter<float16>(Format::fp16());
  check_converter<bfloat16>(Format::bf16());
  check_converter<float8_e4m3>(Format::e4m3());
  check_converter<float8_e5m2>(Format::e5m2());
}

TEST(DiagStats, CountsAgreeWithFatePerValueAndWithAScale) {
  const std::vector<float> raw = random_values(3, 5000);
  std::vector<double> values;
  for (size_t i = 0; i < raw.size(); ++i) values.push_back(i % 2 ? -double(raw[i]) : raw[i]);
  values.push_back(0.0);
  values.push_back(-0.0);
  values.push_back(INFINITY);
  values.push_back(NAN);
  for (double scale : {1.0, 65536.0, 0x1p-10, 3.0}) {
    const std::vector<FormatQuery> queries = standard_queries(scale);
    const TensorStats s = value_stats(values, queries);
    EXPECT_EQ(s.count, int64_t(values.size()));
    EXPECT_EQ(s.zeros, 2);
    EXPECT_EQ(s.non_finite, 2);
    ASSERT_EQ(s.formats.size(), queries.size());
    for (const FormatCounts& c : s.formats) {
      int64_t zero = 0, sub = 0, over = 0;
      for (float x : raw) {
        const Fate fate = fate_of(c.query.format, double(x) * scale);
        zero += fate == Fate::zero;
        sub += fate == Fate::subnormal;
        over += fate == Fate::overflow;
      }
      EXPECT_EQ(c.of, int64_t(raw.size()));
      EXPECT_EQ(c.underflow, zero) << c.query.label << " at " << scale;
      EXPECT_EQ(c.subnormal, sub) << c.query.label << " at " << scale;
      EXPECT_EQ(c.overflow, over) << c.query.label << " at " << scale;
      EXPECT_DOUBLE_EQ(c.underflow_fraction(), double(zero) / double(raw.size()));
    }
  }
}

TEST(DiagStats, TensorStatsOfEveryDtypeEqualsTheStatsOfItsValues) {
  Philox rng(PhiloxState{4, 0, 0});
  const Tensor base = randn({37, 29}, rng, 1e-3);
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::e4m3, DType::e5m2}) {
    const Tensor t = base.to(d);
    const std::vector<double> v = t.to_vector();
    const auto q = standard_queries(1024.0);
    const TensorStats a = tensor_stats(t, q), b = value_stats(v, q);
    EXPECT_EQ(a.count, b.count) << name_of(d);
    EXPECT_EQ(a.zeros, b.zeros) << name_of(d);
    EXPECT_EQ(a.histogram, b.histogram) << name_of(d);
    EXPECT_EQ(a.wide, b.wide) << name_of(d);
    for (size_t i = 0; i < q.size(); ++i) EXPECT_EQ(a.formats[i].underflow, b.formats[i].underflow);
  }
  const Tensor ints = from_values({0, 3, -4, 1}, {4}, DType::i64);
  const TensorStats s = tensor_stats(ints);
  EXPECT_EQ(s.zeros, 1);
  EXPECT_EQ(s.max_abs, 4.0);
  EXPECT_EQ(s.min_abs, 1.0);
}

TEST(DiagStats, HistogramHasOneBucketPerBinadeAndExactPowersOfTwo) {
  std::vector<double> values;
  for (int e = -45; e <= 45; ++e) values.push_back(std::ldexp(1.0, e));   // 2^e
  for (int e = -45; e <= 45; ++e) values.push_back(std::ldexp(1.75, e));  // inside it
  const TensorStats s = value_stats(values);
  EXPECT_EQ(s.min_abs, std::ldexp(1.0, -45));
  EXPECT_EQ(s.max_abs, std::ldexp(1.75, 45));
  for (int e = kHistogramMinExponent; e < kHistogramMaxExponent; ++e) {
    EXPECT_EQ(s.histogram[size_t(1 + e - kHistogramMinExponent)], 2) << "binade " << e;
    EXPECT_EQ(s.powers_of_two[size_t(e - kWideMinExponent)], 1) << "binade " << e;
    EXPECT_EQ(histogram_bucket(std::ldexp(1.0, e)), 1 + e - kHistogramMinExponent);
    EXPECT_EQ(histogram_bucket(std::nextafter(std::ldexp(1.0, e), 0.0)), e - kHistogramMinExponent);
  }
  EXPECT_EQ(s.histogram[0], 2 * 5);                      // 2^-45 .. 2^-41, twice each
  EXPECT_EQ(s.histogram[kHistogramBuckets - 1], 2 * 6);  // 2^40 .. 2^45
}

TEST(DiagStats, UnderflowAtAPowerOfTwoScaleFromTheHistogramIsExact) {
  std::vector<double> values;
  for (float x : random_values(5, 4000)) values.push_back(x);
  // The fp16 zero thresholds 2^(-25 - k) themselves, and their neighbours.
  for (int k = -10; k <= 30; ++k) {
    const double t = std::ldexp(1.0, -25 - k);
    values.push_back(t);
    values.push_back(std::nextafter(t, 1.0));
    values.push_back(std::nextafter(t, 0.0));
  }
  const TensorStats s = value_stats(values);
  for (const Format& f : {Format::fp16(), Format::bf16(), Format::e4m3(), Format::e5m2()}) {
    for (int k = -10; k <= 30; ++k) {
      const double scale = std::ldexp(1.0, k);
      const TensorStats exact = value_stats(values, std::vector<FormatQuery>{{f, scale}});
      EXPECT_DOUBLE_EQ(underflow_fraction_at(s, f, scale), exact.formats[0].underflow_fraction())
          << f.name() << " at 2^" << k;
    }
  }
  EXPECT_THROW(underflow_fraction_at(s, Format::fp16(), 3.0), Error);
}

TEST(DiagStats, SafeScalesAreTheBoundaries) {
  // 1000 values spread over 2^-40 .. 2^-31: with 99.9% kept, at most one may flush.
  std::vector<double> values;
  for (int i = 0; i < 1000; ++i) values.push_back(std::ldexp(1.0 + (i % 7) / 8.0, -40 + i % 10));
  const TensorStats s = value_stats(values);
  const Format fp16 = Format::fp16();
  const std::optional<int> k = smallest_safe_scale_exponent(s, fp16, 0.999);
  ASSERT_TRUE(k.has_value());
  EXPECT_LE(underflow_fraction_at(s, fp16, std::ldexp(1.0, *k)), 0.001);
  EXPECT_GT(underflow_fraction_at(s, fp16, std::ldexp(1.0, *k - 1)), 0.001);

  const std::optional<int> big = largest_safe_scale_exponent(s.max_abs, fp16);
  ASSERT_TRUE(big.has_value());
  EXPECT_NE(fate_of(fp16, std::ldexp(s.max_abs, *big)), Fate::overflow);
  EXPECT_EQ(fate_of(fp16, std::ldexp(s.max_abs, *big + 1)), Fate::overflow);
  EXPECT_FALSE(largest_safe_scale_exponent(0.0, fp16).has_value());
  // 65504 itself fits fp16 at scale 1, 65520 (the tie above it) does not.
  EXPECT_EQ(largest_safe_scale_exponent(65504.0, fp16), 0);
  EXPECT_EQ(largest_safe_scale_exponent(65520.0, fp16), -1);
}

TEST(DiagStats, MergeAddsAndRefusesDifferentQueries) {
  const std::vector<double> a = {1e-9, 2.0, 0.0}, b = {1e9, -3e-3, INFINITY};
  const auto q = standard_queries();
  TensorStats s = value_stats(a, q);
  s.merge(value_stats(b, q));
  std::vector<double> both = a;
  both.insert(both.end(), b.begin(), b.end());
  const TensorStats t = value_stats(both, q);
  EXPECT_EQ(s.count, t.count);
  EXPECT_EQ(s.zeros, t.zeros);
  EXPECT_EQ(s.non_finite, t.non_finite);
  EXPECT_EQ(s.min_abs, t.min_abs);
  EXPECT_EQ(s.max_abs, t.max_abs);
  EXPECT_EQ(s.histogram, t.histogram);
  for (size_t i = 0; i < q.size(); ++i) {
    EXPECT_EQ(s.formats[i].underflow, t.formats[i].underflow);
    EXPECT_EQ(s.formats[i].overflow, t.formats[i].overflow);
  }
  EXPECT_THROW(s.merge(value_stats(b, standard_queries(2.0))), Error);
  EXPECT_THROW(value_stats(a, standard_queries(0.0)), Error);
}

TEST(DiagStats, SampleIsDeterministicSpreadAndKeepsTheDtype) {
  const Tensor t = arange(100000).to(DType::bf16);
  const Tensor s1 = sample(t, 1000), s2 = sample(t, 1000);
  ASSERT_EQ(s1.numel(), 1000);
  EXPECT_EQ(s1.dtype(), DType::bf16);
  EXPECT_EQ(s1.to_vector(), s2.to_vector());
  // One element from each stride of 100: element i lies in [100 i, 100 (i + 1)).
  const std::vector<double> idx = sample(arange(100000, DType::f32), 1000).to_vector();
  bool varied = false;
  for (size_t i = 0; i < idx.size(); ++i) {
    EXPECT_GE(idx[i], 100.0 * double(i));
    EXPECT_LT(idx[i], 100.0 * double(i + 1));
    varied = varied || int64_t(idx[i]) % 100 != int64_t(idx[0]) % 100;
  }
  EXPECT_TRUE(varied) << "the offsets within strides should vary";
  EXPECT_TRUE(sample(t, 100000).is_same(t));
  // A size that is not a multiple: the last stride is shorter, every pick in range.
  const std::vector<double> odd = sample(arange(1001, DType::f32), 10).to_vector();
  EXPECT_EQ(odd.size(), 10u);
  for (double v : odd) EXPECT_LT(v, 1001.0);
  EXPECT_THROW(sample(t, 0), Error);
}

}  // namespace
}  // namespace mixp::diag
