// The GradScaler's check-and-unscale kernel: its threaded candidate and its fallback give the
// same bits and the same first non-finite element, on every floating dtype.
#include "kernels/amp_unscale.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

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
