// round_to_f16_values (kernels/round_to_f16.h): every candidate gives the fallback's bits, which
// are those of a cast to f16 and back, on every kind of fp32 value, in place or not, for any
// thread count; and its users, gemm_product with an f16 a and an f32 b and linear_weight_grads
// into an f32 dW, give the bits of the paths through an f16 copy.
#include "kernels/round_to_f16.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/gemm_product.h"
#include "kernels/linear_grads.h"
#include "mixp/cpu.h"
#include "mixp/error.h"
#include "mixp/random.h"
#include "mixp/runtime.h"

namespace mixp::kernels {
namespace {

// Every fp32 pattern with a low half of zero, the f16 ties and their neighbours around each,
// and random bits: normals, subnormals of both formats, overflow, infinities and NaNs.
Tensor every_kind_of_value() {
  std::vector<uint32_t> bits;
  for (uint32_t hi = 0; hi < 65536; ++hi) {
    bits.push_back(hi << 16);
    bits.push_back((hi << 16) | 0x1000u);  // an f16 tie for normal f16 values
    bits.push_back((hi << 16) | 0x0fffu);
    bits.push_back((hi << 16) | 0x1001u);
  }
  Philox rng(PhiloxState{23, 0, 0});
  for (int i = 0; i < 100003; ++i) bits.push_back(rng.next_u32());
  Tensor t = empty(Shape{int64_t(bits.size())}, DType::f32);
  std::memcpy(t.raw_data(), bits.data(), bits.size() * sizeof(uint32_t));
  return t;
}

std::vector<uint32_t> bits_of(const Tensor& t) {
  std::vector<uint32_t> v(size_t(t.numel()));
  std::memcpy(v.data(), t.raw_data(), v.size() * sizeof(uint32_t));
  return v;
}

size_t mismatches(const std::vector<uint32_t>& got, const std::vector<uint32_t>& want,
                  const std::string& what) {
  size_t count = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i] && ++count <= 5) {
      ADD_FAILURE() << what << ": element " << i << " gives " << std::hex << got[i] << ", want "
                    << want[i];
    }
  }
  return count;
}

TEST(RoundToF16Values, TheFallbackIsTheCastToF16AndBack) {
  const Tensor src = every_kind_of_value();
  Tensor got = empty(src.shape(), DType::f32);
  {
    ReferenceMode reference;
    ASSERT_STREQ(round_to_f16_values.select(src, got).name, "scalar");
    round_to_f16_values(src, got);
  }
  // Tensor::to runs the conversion kernels, which the convert tests hold to float16's bits.
  const Tensor cast = src.to(DType::f16).to(DType::f32);
  EXPECT_EQ(mismatches(bits_of(got), bits_of(cast), "fallback against the cast"), 0u);
}

TEST(RoundToF16Values, EveryCandidateGivesTheFallbacksBitsForAnyThreadCount) {
  if (reference_mode()) GTEST_SKIP() << "MIXP_REFERENCE=1 runs only the fallback";
  const int threads = num_threads();
  Tensor src = every_kind_of_value();
  Tensor want = empty(src.shape(), DType::f32);
  {
    ReferenceMode reference;
    round_to_f16_values(src, want);
  }
  const std::vector<uint32_t> want_bits = bits_of(want);
  int compared = 0;
  for (Isa isa : kAllIsas) {
    if (isa > best_isa()) continue;
    IsaLimit limit(isa);
    for (int t : {1, 2, 3}) {
      set_num_threads(t);
      const std::string what = std::string(round_to_f16_values.select(src, want).name) + " on " +
                               name_of(isa) + ", " + std::to_string(t) + " threads";
      Tensor got = empty(src.shape(), DType::f32);
      round_to_f16_values(src, got);
      EXPECT_EQ(mismatches(bits_of(got), want_bits, what), 0u);
      Tensor in_place = src.clone();
      round_to_f16_values(in_place, in_place);
      EXPECT_EQ(mismatches(bits_of(in_place), want_bits, what + ", in place"), 0u);
      ++compared;
    }
  }
  set_num_threads(threads);
  EXPECT_GT(compared, 0);
}

TEST(RoundToF16Values, AwkwardLengthsTouchOnlyTheirElements) {
  Philox rng(PhiloxState{3, 1, 4});
  for (int64_t n : {0, 1, 15, 16, 17, 65535, 65537}) {
    const Tensor src = randn({n + 32}, rng, 100.0, DType::f32);
    Tensor dst = full({n + 32}, 12345.0);
    Tensor src_part = src.slice(0, n), dst_part = dst.slice(16, 16 + n);
    round_to_f16_values(src_part, dst_part);
    const std::vector<double> d = dst.to_vector(), s = src.to(DType::f16).to_vector();
    for (int64_t i = 0; i < n + 32; ++i) {
      const bool inside = i >= 16 && i < 16 + n;
      EXPECT_EQ(d[size_t(i)], inside ? s[size_t(i - 16)] : 12345.0) << "n " << n << " at " << i;
    }
  }
}

TEST(RoundToF16Values, RefusesOtherDtypesAndLengths) {
  const Tensor f32 = zeros({8}), f16 = zeros({8}).to(DType::f16);
  Tensor out8 = zeros({8}), out7 = zeros({7}), out16 = zeros({8}).to(DType::f16);
  EXPECT_THROW(round_to_f16_values(f16, out8), Error);
  EXPECT_THROW(round_to_f16_values(f32, out16), Error);
  EXPECT_THROW(round_to_f16_values(f32, out7), Error);
}

// The users: the same bits as the f16 copies they replace (oneDNN's fp32 product either way).
TEST(RoundToF16Values, ItsUsersGiveTheBitsOfTheF16Copies) {
  Philox rng(PhiloxState{8, 2, 0});
  const int64_t rows = 64, in = 80, out = 48;
  const Tensor x = randn({rows, in}, rng, 1.0, DType::f16);
  const Tensor g = randn({rows, out}, rng, 1.0, DType::f16);
  const Tensor w = randn({out, in}, rng, 0.1, DType::f32);
  const GemmShape forward{.m = rows, .n = out, .k = in, .trans_b = true};
  Tensor y = empty({rows, out}, DType::f16), y_cast = empty({rows, out}, DType::f16);
  gemm_product(forward, x, w, Tensor(), y);
  gemm_product(forward, x, w.to(DType::f16), Tensor(), y_cast);
  EXPECT_EQ(bits_of(y.to(DType::f32)), bits_of(y_cast.to(DType::f32)));

  Tensor dw = empty({out, in}, DType::f32), dw_narrow = empty({out, in}, DType::f16), db;
  if (!reference_mode()) {
    EXPECT_STREQ(linear_weight_grads.select(g, x, dw, db).name,
                 best_isa() >= Isa::avx512 ? "tiles_f16" : "f16_into_f32");
  }
  linear_weight_grads(g, x, dw, db);
  linear_weight_grads(g, x, dw_narrow, db);
  EXPECT_EQ(bits_of(dw), bits_of(dw_narrow.to(DType::f32)));
}

}  // namespace
}  // namespace mixp::kernels
