// The GradScaler's check-and-unscale kernel: its candidates and its fallback give the same bits
// and the same first non-finite element, on every floating dtype.
#include "kernels/amp_unscale.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "mixp/cpu.h"
#include "mixp/runtime.h"

namespace mixp::kernels {
namespace {

Tensor gradient(DType dtype, int64_t n, int64_t bad_at) {
  Philox generator(PhiloxState{11});
  Tensor g = randn({n}, generator, 1000.0).to(dtype);
  if (bad_at >= 0) {
    Tensor host = g.to(DType::f64);
    std::vector<double> v = host.to_vector();
    v[size_t(bad_at)] = std::numeric_limits<double>::quiet_NaN();  // e4m3 has no inf
    g = from_values(v, {n}, dtype);
  }
  return g;
}

TEST(UnscaleAndCheck, TheThreadedCandidateGivesTheFallbacksBits) {
  // Three chunks of 64 Ki elements and a tail, so that the threads split the work.
  const int64_t n = 3 * 65536 + 77;
  for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::e4m3, DType::e5m2}) {
    for (int64_t bad_at : {int64_t(-1), int64_t(70000), n - 1}) {
      Tensor fast = gradient(dtype, n, bad_at), plain = fast.clone();
      const int64_t fast_first = unscale_and_check(fast, 0.0078125f, true);
      int64_t plain_first;
      {
        ReferenceMode reference;
        EXPECT_STREQ(unscale_and_check.select(plain, 0.0078125f, true).name, "scalar");
        plain_first = unscale_and_check(plain, 0.0078125f, true);
      }
      EXPECT_EQ(fast_first, bad_at) << name_of(dtype);
      EXPECT_EQ(plain_first, bad_at) << name_of(dtype);
      EXPECT_EQ(0, std::memcmp(fast.raw_data(), plain.raw_data(), fast.nbytes())) << name_of(dtype);
    }
  }
}

// Every cpu candidate this machine can run, on fp32 gradients of every kind of value (normal,
// subnormal, signed zeros, infinities, NaNs with payloads) at lengths that leave a tail of
// every size, scaled into the subnormals and past the largest finite value, or only checked.
TEST(UnscaleAndCheck, EveryCandidateGivesTheFallbacksBitsOnFp32) {
  if (reference_mode()) GTEST_SKIP() << "MIXP_REFERENCE=1 runs only the fallback";
  const std::vector<float> specials = {0.0f,
                                       -0.0f,
                                       0x1p-149f,
                                       -0x1.8p-140f,
                                       0x1.fffffep127f,
                                       std::numeric_limits<float>::infinity(),
                                       -std::numeric_limits<float>::infinity(),
                                       std::bit_cast<float>(0x7fa00001u),   // signalling NaN
                                       std::bit_cast<float>(0xffc01234u)};  // quiet, negative
  int compared = 0;
  for (const int64_t n : {int64_t(1), int64_t(15), int64_t(16), int64_t(33), int64_t(65536 + 7)}) {
    for (const int64_t bad_at : {int64_t(-1), int64_t(0), n / 2, n - 1}) {
      for (const float inv : {0.0078125f, 0x1p-30f, 0x1p+20f}) {
        for (const bool multiply : {true, false}) {
          Philox generator(PhiloxState{5, uint64_t(n)});
          std::vector<double> v = randn({n}, generator, 1000.0).to_vector();
          for (int64_t i = 0; i < n; i += 7) v[size_t(i)] = specials[size_t(i / 7) % 5];
          Tensor start = from_values(v, {n});
          if (bad_at >= 0) {
            float* p = start.data<float>();
            p[bad_at] = specials[size_t(5 + (n + bad_at) % 4)];
          }
          std::optional<std::vector<uint8_t>> fallback_bits;
          int64_t fallback_first = -2;
          const auto entries = unscale_and_check.entries();
          for (auto e = entries.rbegin(); e != entries.rend(); ++e) {  // the fallback first
            if (e->device != Device::cpu || e->isa > best_isa()) continue;
            std::optional<ReferenceMode> reference;
            std::optional<IsaLimit> limit;
            if (e->fallback)
              reference.emplace();
            else
              limit.emplace(e->isa);
            Tensor g = start.clone();
            if (std::string(unscale_and_check.select(g, inv, multiply).name) != e->name) continue;
            const int64_t first = unscale_and_check(g, inv, multiply);
            const auto* bytes = static_cast<const uint8_t*>(g.raw_data());
            const std::vector<uint8_t> bits(bytes, bytes + g.nbytes());
            if (!fallback_bits) {
              fallback_bits = bits;
              fallback_first = first;
              EXPECT_EQ(first, bad_at) << "n " << n;
              continue;
            }
            ++compared;
            EXPECT_EQ(first, fallback_first) << e->name << ", n " << n << ", bad at " << bad_at;
            EXPECT_TRUE(bits == *fallback_bits)
                << e->name << ", n " << n << ", inv " << inv << ", multiply " << multiply;
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 0) << "no candidate besides the fallback ran";
}

TEST(UnscaleAndCheck, MultipliesInFp32AndRoundsOnce) {
  Tensor g = from_values({3.0, -0.5, 65504.0}, {3}, DType::f16);
  EXPECT_EQ(unscale_and_check(g, 0.25f, true), -1);
  EXPECT_EQ(g.to_vector(), (std::vector<double>{0.75, -0.125, 16376.0}));
  Tensor nan = from_values({1.0, std::nan("")}, {2});
  EXPECT_EQ(unscale_and_check(nan, 1.0f, false), 1);
  EXPECT_EQ(nan.to_vector()[0], 1.0);  // not multiplied
}

TEST(CountFp16Flushable, CountsWhatFp16RoundsToZero) {
  const Tensor g = from_values({0x1p-25, 0x1.0001p-25, -0x1p-30, 7.0, -9.0}, {5});
  const FlushCount count = count_fp16_flushable(g);
  EXPECT_EQ(count.flushable, 2);
  EXPECT_EQ(count.max_abs, 9.0);
}

}  // namespace
}  // namespace mixp::kernels
