// FP4 (E2M1) block quantization: the element rounding of the fast paths (AVX-512 and the
// branch-free scalar code) against mixp/format.h's exact emulator on every fp32 pattern of the
// range that matters, the scale rules (the E4M3 block scale's rounding and saturation, the
// tensor scale's edge cases, zero and subnormal blocks, non-finite blocks), every E2M1 code's
// round trip, and the fast kernel against the reference on random tensors of awkward sizes.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/fp4.h"
#include "kernels/stochastic_rounding.h"
#include "mixp/amp/fp4.h"
#include "mixp/cpu.h"
#include "mixp/error.h"
#include "mixp/float_types.h"
#include "mixp/format.h"
#include "mixp/runtime.h"
#include "support/tolerance.h"

namespace mixp {
namespace {

using kernels::Fp4Kind;
using kernels::Fp4Params;

const Format kE2m1 = Format::e2m1();

uint32_t oracle_nearest(float y) {
  return encode(kE2m1, y, Rounding::nearest_even, Overflow::saturate);
}
uint32_t oracle_stochastic(float y, uint32_t random) {
  return encode(kE2m1, y, Rounding::stochastic, Overflow::saturate, random);
}

uint8_t nibble(const std::vector<uint8_t>& packed, size_t i) {
  return uint8_t(i % 2 == 0 ? packed[i / 2] & 0xF : packed[i / 2] >> 4);
}

// Rounds a chunk of values by every path and counts the codes that differ from the oracle.
int64_t chunk_mismatches(const std::vector<float>& y, const std::vector<uint32_t>& random,
                         bool stochastic) {
  const size_t n = y.size();
  int64_t bad = 0;
  std::vector<uint8_t> vector_packed(n / 2, 0);
  const bool has_avx512 = best_isa() >= Isa::avx512;
  if (has_avx512) {
    if (stochastic)
      kernels::avx512::e2m1_encode_stochastic(y.data(), random.data(), int64_t(n), 1.0f,
                                              vector_packed.data());
    else
      kernels::avx512::e2m1_encode_nearest(y.data(), int64_t(n), 1.0f, vector_packed.data());
  }
  for (size_t i = 0; i < n; ++i) {
    const uint32_t want = stochastic ? oracle_stochastic(y[i], random[i]) : oracle_nearest(y[i]);
    const uint8_t scalar = stochastic ? kernels::e2m1_round_stochastic(y[i], random[i])
                                      : kernels::e2m1_round_nearest(y[i]);
    const bool scalar_bad = scalar != want;
    const bool vector_bad = has_avx512 && nibble(vector_packed, i) != want;
    bad += (scalar_bad ? 1 : 0) + (vector_bad ? 1 : 0);
    if ((scalar_bad || vector_bad) && bad <= 8)
      ADD_FAILURE() << "y " << y[i] << " (bits " << std::bit_cast<uint32_t>(y[i]) << ") want "
                    << want << " scalar " << int(scalar) << " vector "
                    << (has_avx512 ? int(nibble(vector_packed, i)) : -1);
  }
  return bad;
}

// Every positive fp32 pattern from 2^-3 to 8 (every rounding boundary of E2M1 lies inside, and
// the saturation above 6), every 7th also negated; a stride elsewhere (below: all round to +-0 or
// 0.5; above: all saturate).
TEST(Fp4Elements, NearestEvenOnEveryPatternOfTheRange) {
  const uint32_t low = std::bit_cast<uint32_t>(0.125f), high = std::bit_cast<uint32_t>(8.0f);
  std::vector<float> y;
  y.reserve(1 << 17);
  int64_t bad = 0, checked = 0;
  auto flush = [&] {
    while (y.size() % 16 != 0) y.push_back(y.back());  // the vector path takes groups of 16
    bad += chunk_mismatches(y, {}, false);
    checked += int64_t(y.size());
    y.clear();
  };
  for (uint32_t bits = low; bits < high; ++bits) {
    y.push_back(std::bit_cast<float>(bits));
    // The sign takes no part in the magnitude's rounding: negatives on a stride of 7.
    if (bits % 7 == 0) y.push_back(-std::bit_cast<float>(bits));
    if (y.size() >= (1 << 17)) flush();
  }
  for (uint32_t bits = 0; bits < 0x7F800000u; bits += 4099) {
    y.push_back(std::bit_cast<float>(bits));
    y.push_back(-std::bit_cast<float>(bits));
    if (y.size() == (1 << 17)) flush();
  }
  y.push_back(INFINITY);
  y.push_back(-INFINITY);
  flush();
  EXPECT_EQ(bad, 0) << "of " << checked;
  EXPECT_GT(checked, int64_t(high - low));
}

// Stochastic rounding: the same range on a stride of 3 patterns, each with a held-out Philox
// word, plus for a few values every neighbour of their exact threshold.
TEST(Fp4Elements, StochasticOnTheRangeWithHeldOutWords) {
  const uint32_t low = std::bit_cast<uint32_t>(0.125f), high = std::bit_cast<uint32_t>(8.0f);
  const PhiloxState philox{.seed = 20261202, .stream = 4, .offset = 0};
  std::vector<float> y;
  std::vector<uint32_t> random;
  int64_t bad = 0, checked = 0;
  uint64_t word = 0;
  auto flush = [&] {
    random.resize(y.size());
    kernels::philox_words(philox, word, random.data(), random.size());
    word += random.size();
    bad += chunk_mismatches(y, random, true);
    checked += int64_t(y.size());
    y.clear();
  };
  for (uint32_t bits = low; bits < high; bits += 3) {
    y.push_back(std::bit_cast<float>(bits));
    y.push_back(-std::bit_cast<float>(bits));
    if (y.size() == (1 << 16)) flush();
  }
  while (y.size() % 16 != 0) y.push_back(8.0f);
  flush();
  // 1.25 lies a half-gap above 1: threshold 2^31; 0.3 rounds with a threshold that is not an
  // integer. Words at and around the threshold, computed here in double.
  for (float v : {1.25f, 0.3f, 4.5f, 2.75f, 0.0078125f}) {
    const double lo = v < 0.5   ? 0.0
                      : v < 1   ? 0.5
                      : v < 1.5 ? 1.0
                      : v < 2   ? 1.5
                      : v < 3   ? 2.0
                      : v < 4   ? 3.0
                                : 4.0;
    const double gap = v < 2 ? 0.5 : v < 4 ? 1.0 : 2.0;
    const double t = std::floor((double(v) - lo) / gap * 4294967296.0);
    for (double d = -2; d <= 2; ++d) {
      y.assign(16, v);
      random.assign(16, uint32_t(t + d));
      bad += chunk_mismatches(y, random, true);
    }
  }
  EXPECT_EQ(bad, 0) << "of " << checked;
}

TEST(Fp4Elements, EveryCodeRoundTrips) {
  for (uint8_t code = 0; code < 16; ++code) {
    const float v = amp::e2m1_value(code);
    EXPECT_EQ(v, decode(kE2m1, code)) << int(code);
    EXPECT_EQ(kernels::e2m1_round_nearest(v), code) << int(code);
    for (uint32_t random : {0u, 1u, 0x80000000u, 0xFFFFFFFFu})
      EXPECT_EQ(kernels::e2m1_round_stochastic(v, random), code) << int(code);
  }
  EXPECT_THROW(amp::e2m1_value(16), Error);
  // Through a whole quantization: an MXFP4 block holding every code with amax 6 has scale 2^0
  // under both rules and comes back exactly.
  std::vector<double> values;
  for (uint8_t code = 0; code < 16; ++code) values.push_back(decode(kE2m1, code));
  values.resize(32, 6.0);
  const Tensor x = from_values(values, {1, 32});
  for (auto rule : {amp::MxScaleRounding::floor, amp::MxScaleRounding::up}) {
    const amp::Fp4Tensor q = amp::quantize_fp4(x, amp::Fp4Scaling::mxfp4, {.mx_rounding = rule});
    EXPECT_EQ(q.block_scales.to_vector()[0], 127.0);
    EXPECT_EQ(q.dequantize().to_vector(), x.to_vector());
  }
}

// The E4M3 block scale: every E4M3 value is hit exactly, the midpoints between neighbours go
// to the even one, values past 448 saturate, and a sweep of block amaxes under several tensor
// scales agrees with format.h's E4M3 rounding of the same fp32 expression.
TEST(Fp4Scales, E4m3BlockScaleRoundingAndSaturation) {
  const Format e4m3 = Format::e4m3();
  for (uint32_t code = 0; code < 0x7F; ++code) {
    const float v = decode(e4m3, code);
    // block_amax / 6 * 1 = v needs block_amax = 6 v, exact for E4M3 values.
    EXPECT_EQ(amp::nvfp4_block_scale_code(6.0f * v, 1.0f), code) << code;
    if (code + 1 < 0x7F) {
      const float mid = (v + decode(e4m3, code + 1)) / 2;
      const uint32_t even = (code % 2 == 0) ? code : code + 1;
      EXPECT_EQ(amp::nvfp4_block_scale_code(6.0f * mid, 1.0f), even) << code;
    }
  }
  EXPECT_EQ(amp::nvfp4_block_scale_code(6.0f * 1e6f, 1.0f), 0x7E);  // 448
  EXPECT_EQ(amp::nvfp4_block_scale_code(FLT_MAX, 1.0f), 0x7E);
  EXPECT_EQ(amp::nvfp4_block_scale_code(NAN, 1.0f), 0x7F);
  EXPECT_EQ(amp::nvfp4_block_scale_code(INFINITY, 1.0f), 0x7F);
  int64_t bad = 0;
  for (float s : {1.0f, amp::nvfp4_tensor_scale(3.7f), amp::nvfp4_tensor_scale(1e-30f), FLT_MAX})
    for (uint32_t bits = 0; bits < 0x7F800000u; bits += 997) {
      const float amax = std::bit_cast<float>(bits);
      const uint32_t want =
          encode(e4m3, amax / 6.0f * s, Rounding::nearest_even, Overflow::saturate);
      bad += amp::nvfp4_block_scale_code(amax, s) != want ? 1 : 0;
    }
  EXPECT_EQ(bad, 0);
}

TEST(Fp4Scales, TensorScaleEdgeCases) {
  EXPECT_EQ(amp::nvfp4_tensor_scale(0.0f), 1.0f);
  EXPECT_EQ(amp::nvfp4_tensor_scale(INFINITY), 1.0f);
  EXPECT_EQ(amp::nvfp4_tensor_scale(NAN), 1.0f);
  EXPECT_EQ(amp::nvfp4_tensor_scale(-1.0f), 1.0f);
  EXPECT_EQ(amp::nvfp4_tensor_scale(std::numeric_limits<float>::denorm_min()), FLT_MAX);
  // Otherwise the tensor's amax lands on 6 x 448 up to the one rounding of the quotient.
  for (float amax : {1e-30f, 1e-3f, 0.1f, 1.0f, 2688.0f, 3.3e5f, 1e30f, FLT_MAX}) {
    const double s = amp::nvfp4_tensor_scale(amax);
    EXPECT_NEAR(double(amax) * s, 6.0 * 448.0, 6.0 * 448.0 * 0x1p-23) << amax;
  }
}

// Blocks of zeros and subnormal blocks, per kind: the scale codes and elements they get, the
// same from the fast kernel and the reference.
TEST(Fp4Scales, ZeroAndSubnormalBlocks) {
  const float sub = std::numeric_limits<float>::denorm_min() * 12345;
  // 64 columns: two MXFP4 blocks, four NVFP4 blocks a row. Row 0: zeros, then normal values.
  // Row 1: subnormals, then normal values (the tensor's amax is 1, so nvfp4's E4M3 scale of the
  // subnormal blocks underflows and they flush). Row 2: all subnormal.
  const int64_t cols = 64;
  std::vector<double> v(size_t(3 * cols), 0.0);
  for (int64_t c = 32; c < 64; ++c) {
    v[size_t(c)] = double(c - 31) / 32;
    v[size_t(cols + c)] = -double(c - 31) / 32;
  }
  for (int64_t c = 0; c < 32; ++c) v[size_t(cols + c)] = sub * double(c + 1) / 32;
  for (int64_t c = 0; c < 64; ++c) v[size_t(2 * cols + c)] = sub * double(c % 7 + 1) / 7;
  const Tensor x = from_values(v, {3, cols});
  for (auto scaling : {amp::Fp4Scaling::nvfp4, amp::Fp4Scaling::mxfp4}) {
    const amp::Fp4Tensor fast = amp::quantize_fp4(x, scaling);
    amp::Fp4Tensor ref;
    {
      ReferenceMode reference;
      ref = amp::quantize_fp4(x, scaling);
    }
    EXPECT_EQ(fast.data.to_vector(), ref.data.to_vector());
    EXPECT_EQ(fast.block_scales.to_vector(), ref.block_scales.to_vector());
    const std::vector<double> codes = fast.block_scales.to_vector();
    const std::vector<double> back = fast.dequantize().to_vector();
    const int64_t nb = fast.block_scales.size(1);
    const double subnormal_amax = sub;  // row 1's subnormal block: c = 31 gives sub exactly
    if (scaling == amp::Fp4Scaling::nvfp4) {
      EXPECT_EQ(fast.tensor_scale, amp::nvfp4_tensor_scale(1.0f));
      EXPECT_EQ(codes[0], 0.0);       // zeros: scale 0
      EXPECT_EQ(codes[nb + 1], 0.0);  // subnormal: the E4M3 scale underflows
      EXPECT_EQ(codes[nb + 1],
                double(amp::nvfp4_block_scale_code(float(subnormal_amax), fast.tensor_scale)));
      EXPECT_EQ(codes[3], double(amp::nvfp4_block_scale_code(1.0f, fast.tensor_scale)));
    } else {
      EXPECT_EQ(codes[0], 0.0);  // zeros: the smallest E8M0 scale
      // Subnormal: floor(log2(amax)) - 2 is below E8M0's range, clamped to 2^-127.
      EXPECT_EQ(codes[nb], double(amp::mxfp4_scale_code(float(subnormal_amax))));
      EXPECT_EQ(codes[nb], 0.0);
    }
    // The zero block and the subnormal ones come back as zeros; the normal ones do not.
    for (int64_t c : {int64_t{0}, int64_t{31}, cols, cols + 31, 2 * cols, 3 * cols - 1})
      EXPECT_EQ(back[size_t(c)], 0.0) << name_of(scaling) << c;
    EXPECT_NE(back[63], 0.0);
  }
  // A subnormal tensor alone: nvfp4's tensor scale saturates at FLT_MAX, and its blocks flush
  // too (below 448 * 6 * 2^-149 nothing survives two levels of scaling).
  const Tensor tiny = from_values(std::vector<double>(v.begin() + 2 * cols, v.end()), {1, cols});
  const amp::Fp4Tensor q = amp::quantize_fp4(tiny, amp::Fp4Scaling::nvfp4);
  EXPECT_EQ(q.tensor_scale, amp::nvfp4_tensor_scale(q.amax));
  EXPECT_EQ(q.block_scales.to_vector()[0],
            double(amp::nvfp4_block_scale_code(q.amax, q.tensor_scale)));
}

TEST(Fp4Scales, NonFiniteBlocksCarryANanScale) {
  std::vector<double> v(2 * 40, 0.5);
  v[3] = NAN;
  v[40 + 35] = -INFINITY;
  const Tensor x = from_values(v, {2, 40});
  for (auto scaling : {amp::Fp4Scaling::nvfp4, amp::Fp4Scaling::mxfp4}) {
    const amp::Fp4Tensor q = amp::quantize_fp4(x, scaling);
    const int64_t block = q.block_size();
    EXPECT_TRUE(std::isnan(q.amax));
    EXPECT_EQ(q.tensor_scale, 1.0f);
    const std::vector<double> back = q.dequantize().to_vector();
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t c = 0; c < 40; ++c) {
        const bool in_special = (r == 0 && c / block == 0) || (r == 1 && c / block == 35 / block);
        EXPECT_EQ(std::isnan(back[size_t(r * 40 + c)]), in_special) << name_of(scaling) << r << c;
        if (!in_special) {
          EXPECT_TRUE(std::isfinite(back[size_t(r * 40 + c)]));
        }
      }
  }
}

// The fast kernel against the reference: random tensors of sizes that leave tails everywhere,
// both kinds, both roundings, both E8M0 rules, with and without AVX-512 where the machine has it.
TEST(Fp4Kernels, FastMatchesReferenceOnOddSizes) {
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int64_t mismatches = 0, compared = 0;
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1},
                            {3, 15},
                            {5, 17},
                            {7, 33},
                            {2, 63},
                            {9, 100},
                            {4, 257},
                            {33, 48},
                            {301, 129}}) {
    std::vector<float> x(size_t(rows * cols));
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(normal(gen), int(i % 23) - 11);
    for (Fp4Kind kind : {Fp4Kind::nvfp4, Fp4Kind::mxfp4})
      for (bool stochastic : {false, true})
        for (auto rule : {kernels::MxRounding::floor, kernels::MxRounding::up}) {
          float amax = 0.0f;
          for (float e : x) amax = std::max(amax, std::fabs(e));
          const Fp4Params p{
              .kind = kind,
              .tensor_scale = kind == Fp4Kind::nvfp4 ? kernels::nvfp4_tensor_scale(amax) : 1.0f,
              .mx_rounding = rule,
              .stochastic = stochastic,
              .philox = {.seed = 3, .stream = 1, .offset = 17}};
          const int64_t nb = (cols + kernels::fp4_block(kind) - 1) / kernels::fp4_block(kind);
          std::vector<uint8_t> qr(size_t(rows * ((cols + 1) / 2))), sr(size_t(rows * nb));
          kernels::fp4_quantize_reference(x.data(), rows, cols, p, qr.data(), sr.data());
          for (bool vector : {false, true}) {
            if (vector && best_isa() < Isa::avx512) continue;
            std::vector<uint8_t> qf(qr.size(), 0xAA), sf(sr.size(), 0xAA);
            kernels::fp4_quantize_fast(x.data(), rows, cols, p, qf.data(), sf.data(), vector);
            for (size_t i = 0; i < qf.size(); ++i) mismatches += qf[i] != qr[i];
            for (size_t i = 0; i < sf.size(); ++i) mismatches += sf[i] != sr[i];
            compared += int64_t(qf.size() + sf.size());
          }
        }
  }
  EXPECT_EQ(mismatches, 0) << "of " << compared << " bytes";
}

TEST(Fp4Kernels, StochasticRoundingDoesNotDependOnThreadsAndFollowsTheStream) {
  std::mt19937 gen(9);
  std::uniform_real_distribution<float> unit(-3.0f, 3.0f);
  std::vector<double> v(size_t(64 * 96));
  for (double& e : v) e = unit(gen);
  const Tensor x = from_values(v, {64, 96});
  const amp::Fp4Options sr{.rounding = amp::Fp4Rounding::stochastic,
                           .philox = {.seed = 1, .stream = 2, .offset = 3}};
  const int threads = num_threads();
  set_num_threads(1);
  const std::vector<double> one = amp::quantize_fp4(x, amp::Fp4Scaling::nvfp4, sr).data.to_vector();
  set_num_threads(2);
  const std::vector<double> two = amp::quantize_fp4(x, amp::Fp4Scaling::nvfp4, sr).data.to_vector();
  set_num_threads(threads);
  EXPECT_EQ(one, two);
  amp::Fp4Options other = sr;
  other.philox.offset = 4;
  EXPECT_NE(amp::quantize_fp4(x, amp::Fp4Scaling::nvfp4, other).data.to_vector(), one);
  EXPECT_NE(amp::quantize_fp4(x, amp::Fp4Scaling::nvfp4).data.to_vector(), one);
}

// dequantize() against the codes decoded here in double: e2m1 * scale (/ S_enc for nvfp4).
void expect_dequantized_from_codes(const amp::Fp4Tensor& q) {
  const std::vector<double> data = q.data.to_vector(), scales = q.block_scales.to_vector();
  const int64_t nb = q.block_scales.size(1), row_bytes = q.data.size(1);
  std::vector<double> want(size_t(q.rows * q.cols));
  for (int64_t r = 0; r < q.rows; ++r)
    for (int64_t c = 0; c < q.cols; ++c) {
      const uint32_t byte = uint32_t(data[size_t(r * row_bytes + c / 2)]);
      const double e = decode(kE2m1, c % 2 == 0 ? byte & 0xF : byte >> 4);
      const uint32_t s = uint32_t(scales[size_t(r * nb + c / q.block_size())]);
      want[size_t(r * q.cols + c)] =
          q.scaling == amp::Fp4Scaling::nvfp4
              ? e * double(decode(Format::e4m3(), s)) / double(q.tensor_scale)
              : e * std::ldexp(1.0, int(s) - 127);
    }
  const std::string worst =
      test::compare(q.dequantize().reshape({q.rows, q.cols}), from_values(want, {q.rows, q.cols}),
                    test::tolerance(DType::f32));
  EXPECT_TRUE(worst.empty()) << worst;
}

TEST(Fp4Tensor, PackedStorageAndShapes) {
  std::mt19937 gen(13);
  std::normal_distribution<double> normal(0.0, 2.0);
  std::vector<double> v(size_t(3 * 5 * 37));
  for (double& e : v) e = normal(gen);
  const Tensor x = from_values(v, {3, 5, 37});
  const amp::Fp4Tensor nv = amp::quantize_fp4(x, amp::Fp4Scaling::nvfp4);
  EXPECT_EQ(nv.rows, 15);
  EXPECT_EQ(nv.cols, 37);
  EXPECT_EQ(nv.data.shape(), (Shape{15, 19}));
  EXPECT_EQ(nv.block_scales.shape(), (Shape{15, 3}));
  EXPECT_EQ(nv.bytes(), 15 * 19 + 15 * 3 + 4);
  EXPECT_EQ(nv.dequantize().shape(), x.shape());
  expect_dequantized_from_codes(nv);
  const amp::Fp4Tensor mx = amp::quantize_fp4(x, amp::Fp4Scaling::mxfp4);
  expect_dequantized_from_codes(mx);
  EXPECT_EQ(mx.block_scales.shape(), (Shape{15, 2}));
  EXPECT_EQ(mx.bytes(), 15 * 19 + 15 * 2 + 4);
  EXPECT_THROW(amp::quantize_fp4(Tensor(), amp::Fp4Scaling::nvfp4), Error);
  EXPECT_THROW(amp::quantize_fp4(from_values({1.0}, {1}, DType::f64), amp::Fp4Scaling::nvfp4),
               Error);
}

}  // namespace
}  // namespace mixp
