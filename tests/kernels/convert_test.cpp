// Bulk conversion: every ISA path against the scalar reference, bit for bit, on the reference
// vectors, on every code, on random bit patterns, at awkward sizes and offsets.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "mixp/convert.h"
#include "mixp/cpu.h"
#include "mixp/error.h"
#include "mixp/random.h"
#include "support/vectors.h"

namespace mixp {
namespace {

std::vector<Isa> available_isas() {
  std::vector<Isa> isas;
  for (Isa isa : kAllIsas) {
    if (isa <= best_isa()) isas.push_back(isa);
  }
  return isas;
}

// Inputs with every interesting fp32 class: the reference vectors' inputs, all fp32 patterns
// with a 16-bit low half of zero (every bf16 value, shifted), and random bits.
std::vector<float> f32_inputs() {
  std::vector<float> xs;
  for (const std::string& name : test::vector_file_names()) {
    const test::VectorFile file = test::read_vectors(name);
    if (file.in_name != "fp32") continue;
    for (const auto& line : file.lines) xs.push_back(std::bit_cast<float>(line.in));
  }
  for (uint32_t hi = 0; hi < 65536; ++hi) {
    xs.push_back(std::bit_cast<float>(hi << 16));
    xs.push_back(std::bit_cast<float>((hi << 16) | 0x8000u));  // bf16 ties
    xs.push_back(std::bit_cast<float>((hi << 16) | 0x7fffu));
  }
  Philox rng(PhiloxState{17, 0, 0});
  for (int i = 0; i < 100000; ++i) xs.push_back(std::bit_cast<float>(rng.next_u32()));
  return xs;
}

template <typename T>
std::vector<uint32_t> bits_of(const std::vector<T>& v) {
  std::vector<uint32_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_same_v<T, float>) {
      out[i] = std::bit_cast<uint32_t>(v[i]);
    } else {
      out[i] = v[i].bits;
    }
  }
  return out;
}

// Runs `convert_into(src, dst)` under each ISA cap and checks every path against the scalar one.
template <typename Src, typename Dst, typename Fn>
void expect_all_paths_equal(const std::vector<Src>& src, Fn convert_into, const char* what) {
  std::vector<Dst> reference(src.size());
  {
    IsaLimit scalar(Isa::scalar);
    convert_into(std::span<const Src>(src), std::span<Dst>(reference));
  }
  const std::vector<uint32_t> want = bits_of(reference);
  for (Isa isa : available_isas()) {
    IsaLimit limit(isa);
    std::vector<Dst> got(src.size());
    convert_into(std::span<const Src>(src), std::span<Dst>(got));
    const std::vector<uint32_t> have = bits_of(got);
    size_t mismatches = 0;
    for (size_t i = 0; i < src.size(); ++i) {
      if (have[i] != want[i] && ++mismatches <= 5) {
        ADD_FAILURE() << what << " on " << name_of(isa) << " element " << i << ": got " << std::hex
                      << have[i] << ", scalar gives " << want[i];
      }
    }
    EXPECT_EQ(mismatches, 0u) << what << " on " << name_of(isa);
  }
}

TEST(ConvertPaths, F32ToNarrowMatchesTheReference) {
  const std::vector<float> xs = f32_inputs();
  expect_all_paths_equal<float, float16>(
      xs, [](auto s, auto d) { convert(s, d); }, "f32->f16");
  expect_all_paths_equal<float, bfloat16>(
      xs, [](auto s, auto d) { convert(s, d); }, "f32->bf16");
  for (Overflow o : {Overflow::saturate, Overflow::inf_or_nan}) {
    for (float scale : {1.0f, 0.75f, 448.0f / 3.7f, 0x1p-20f}) {
      expect_all_paths_equal<float, float8_e4m3>(
          xs, [&](auto s, auto d) { convert(s, d, scale, o); }, "f32->e4m3");
      expect_all_paths_equal<float, float8_e5m2>(
          xs, [&](auto s, auto d) { convert(s, d, scale, o); }, "f32->e5m2");
    }
  }
}

template <typename T>
std::vector<T> every_code() {
  std::vector<T> codes(static_cast<size_t>(1) << (8 * sizeof(T)));
  for (size_t c = 0; c < codes.size(); ++c)
    codes[c] = T::from_bits(static_cast<decltype(T::bits)>(c));
  return codes;
}

TEST(ConvertPaths, NarrowToF32MatchesTheReferenceOnEveryCode) {
  expect_all_paths_equal<float16, float>(
      every_code<float16>(), [](auto s, auto d) { convert(s, d); }, "f16->f32");
  expect_all_paths_equal<bfloat16, float>(
      every_code<bfloat16>(), [](auto s, auto d) { convert(s, d); }, "bf16->f32");
  for (float scale_inv : {1.0f, 3.7f / 448.0f, 0x1p30f}) {
    expect_all_paths_equal<float8_e4m3, float>(
        every_code<float8_e4m3>(), [&](auto s, auto d) { convert(s, d, scale_inv); }, "e4m3->f32");
    expect_all_paths_equal<float8_e5m2, float>(
        every_code<float8_e5m2>(), [&](auto s, auto d) { convert(s, d, scale_inv); }, "e5m2->f32");
  }
}

TEST(ConvertPaths, ReferenceVectorsPassOnEveryPath) {
  for (Isa isa : available_isas()) {
    IsaLimit limit(isa);
    for (const std::string& name : test::vector_file_names()) {
      const test::VectorFile file = test::read_vectors(name);
      const Format out = test::vector_format(file.out_name);
      const Overflow o = file.op.ends_with("_sat") ? Overflow::saturate : Overflow::inf_or_nan;
      const size_t n = file.lines.size();
      std::vector<uint32_t> got(n);
      if (file.in_name == "fp32") {
        std::vector<float> x(n);
        for (size_t i = 0; i < n; ++i) x[i] = std::bit_cast<float>(file.lines[i].in);
        if (file.out_name == "fp16") {
          std::vector<float16> y(n);
          convert(x, y);
          got = bits_of(y);
        }
        if (file.out_name == "bf16") {
          std::vector<bfloat16> y(n);
          convert(x, y);
          got = bits_of(y);
        }
        if (file.out_name == "e4m3") {
          std::vector<float8_e4m3> y(n);
          convert(x, y, 1.0f, o);
          got = bits_of(y);
        }
        if (file.out_name == "e5m2") {
          std::vector<float8_e5m2> y(n);
          convert(x, y, 1.0f, o);
          got = bits_of(y);
        }
      } else {
        std::vector<float> y(n);
        auto load = [&](auto& v) {
          for (size_t i = 0; i < n; ++i)
            v[i].bits = static_cast<decltype(v[i].bits)>(file.lines[i].in);
        };
        if (file.in_name == "fp16") {
          std::vector<float16> x(n);
          load(x);
          convert(x, y);
        }
        if (file.in_name == "bf16") {
          std::vector<bfloat16> x(n);
          load(x);
          convert(x, y);
        }
        if (file.in_name == "e4m3") {
          std::vector<float8_e4m3> x(n);
          load(x);
          convert(x, y, 1.0f);
        }
        if (file.in_name == "e5m2") {
          std::vector<float8_e5m2> x(n);
          load(x);
          convert(x, y, 1.0f);
        }
        got = bits_of(y);
      }
      size_t mismatches = 0;
      for (size_t i = 0; i < n; ++i) {
        if (!test::output_matches(out, file.nan_rule, file.lines[i].expected, got[i])) ++mismatches;
      }
      EXPECT_EQ(mismatches, 0u) << name << " on " << name_of(isa);
    }
  }
}

TEST(ConvertPaths, AwkwardSizesAndOffsetsTouchOnlyTheirElements) {
  constexpr size_t kGuard = 40;
  Philox rng(PhiloxState{5, 5, 5});
  std::vector<float> src(300);
  for (float& x : src) x = rng.normal() * 100.0f;
  for (Isa isa : available_isas()) {
    IsaLimit limit(isa);
    for (size_t n : {0u, 1u, 2u, 7u, 8u, 15u, 16u, 17u, 31u, 33u, 63u, 127u, 257u}) {
      for (size_t offset : {0u, 1u, 3u}) {
        std::vector<bfloat16> b(n + 2 * kGuard, bfloat16::from_bits(0xdead));
        std::vector<float8_e4m3> q(n + 2 * kGuard, float8_e4m3::from_bits(0x5a));
        std::vector<float> back(n + 2 * kGuard, 12345.0f);
        std::span<const float> s(src.data() + offset, n);
        convert(s, std::span(b).subspan(kGuard, n));
        convert(s, std::span(q).subspan(kGuard, n), 1.0f, Overflow::saturate);
        convert(std::span<const float8_e4m3>(q).subspan(kGuard, n),
                std::span(back).subspan(kGuard, n), 1.0f);
        for (size_t i = 0; i < b.size(); ++i) {
          const bool inside = i >= kGuard && i < kGuard + n;
          if (inside) {
            ASSERT_EQ(b[i].bits, bfloat16(s[i - kGuard]).bits) << name_of(isa) << " n=" << n;
            ASSERT_EQ(q[i].bits, float8_e4m3(s[i - kGuard], Overflow::saturate).bits);
            ASSERT_EQ(back[i], float(q[i]));
          } else {
            ASSERT_EQ(b[i].bits, 0xdead) << "wrote outside: " << name_of(isa) << " n=" << n;
            ASSERT_EQ(q[i].bits, 0x5a) << "wrote outside: " << name_of(isa) << " n=" << n;
            ASSERT_EQ(back[i], 12345.0f) << "wrote outside: " << name_of(isa) << " n=" << n;
          }
        }
      }
    }
  }
}

TEST(ConvertPaths, Fp8ScaleIsOneMultiplyThenOneRounding) {
  std::vector<float> x = {1.0f, -2.5f, 0.0123f, 300.0f, 1e-6f};
  const float scale = 17.3f;
  std::vector<float8_e4m3> q(x.size());
  convert(x, q, scale, Overflow::saturate);
  std::vector<float> back(x.size());
  convert(std::span<const float8_e4m3>(q), back, 1.0f / scale);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(q[i].bits, float8_e4m3(x[i] * scale, Overflow::saturate).bits);
    EXPECT_EQ(back[i], float(q[i]) * (1.0f / scale));
  }
}

TEST(ConvertStochastic, MatchesTheScalarRuleAndIsSplitIndependent) {
  std::vector<float> x(10001);
  Philox rng(PhiloxState{1, 1, 1});
  for (float& v : x) v = rng.normal();
  const PhiloxState state{123, 4, 77};
  std::vector<bfloat16> whole(x.size()), parts(x.size());
  convert_stochastic(x, whole, state);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(whole[i].bits, bfloat16::round_stochastic(x[i], philox_word(state, i)).bits);
  }
  const size_t cut = 4099;
  convert_stochastic(std::span<const float>(x).first(cut), std::span(parts).first(cut), state);
  convert_stochastic(std::span<const float>(x).subspan(cut), std::span(parts).subspan(cut),
                     PhiloxState{state.seed, state.stream, state.offset + cut});
  EXPECT_EQ(bits_of(whole), bits_of(parts));
}

TEST(ConvertErrors, SizesOverlapAndScalesAreChecked) {
  std::vector<float> x(8), y(9);
  std::vector<bfloat16> b(7);
  EXPECT_THROW(convert(x, b), Error);
  std::vector<float8_e4m3> q(8);
  EXPECT_THROW(convert(x, q, 0.0f, Overflow::saturate), Error);
  EXPECT_THROW(convert(x, q, NAN, Overflow::saturate), Error);
  EXPECT_THROW(convert(std::span<const float8_e4m3>(q), std::span(y).first(8), INFINITY), Error);
  // A bf16 view of the same bytes as the source overlaps it.
  std::vector<float> buffer(16);
  std::span<bfloat16> alias(reinterpret_cast<bfloat16*>(buffer.data()), 16);
  EXPECT_THROW(convert(std::span<const float>(buffer), alias), Error);
  try {
    convert(x, b);
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("8"), std::string::npos);
    EXPECT_NE(e.message().find("7"), std::string::npos);
  }
}

}  // namespace
}  // namespace mixp
