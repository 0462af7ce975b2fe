// max_pool2d's AVX-512 kernel for 2 x 2 windows every two columns gives the scalar fast
// kernel's values and indices, bit for bit, on ties, signed zeros, infinities and NaN, at
// widths that leave a partial vector and with rows that overlap; the registry runs it where it
// applies and the AVX-512 ISA is active.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/max_pool2d.h"
#include "kernels/pool.h"
#include "mixp/cpu.h"
#include "mixp/float_types.h"
#include "mixp/random.h"
#include "mixp/runtime.h"

namespace mixp {
namespace {

// Values with many ties (a few levels), both zeros, infinities and NaN.
std::vector<float> awkward_values(size_t n, uint64_t seed) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = INFINITY;
  const float specials[] = {0.0f, -0.0f, inf, -inf, nan, 1.0f, -1.0f, 0.5f};
  Philox rng(PhiloxState{seed, 0, 0});
  std::vector<float> x(n);
  for (float& v : x) {
    const double u = rng.uniform();
    v = u < 0.3 ? specials[size_t(rng.uniform() * 8) % 8] : float(std::round(rng.normal() * 2));
  }
  return x;
}

template <typename T>
void expect_avx512_matches_scalar(const kernels::Pool2dShape& p, DType dt) {
  ASSERT_TRUE(kernels::avx512::max_pool2d_pairs_apply(p, dt));
  const std::vector<float> values = awkward_values(size_t(p.planes * p.h * p.w), 7);
  std::vector<T> x(values.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = T(values[i]);
  const size_t outputs = size_t(p.planes) * p.rows.start.size() * p.cols.start.size();
  std::vector<T> want(outputs), got(outputs);
  std::vector<int64_t> want_index(outputs), got_index(outputs);
  kernels::max_pool2d_forward_fast(p, dt, x.data(), want.data(), want_index.data());
  kernels::avx512::max_pool2d_pairs(p, dt, x.data(), got.data(), got_index.data());
  EXPECT_EQ(got_index, want_index);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), outputs * sizeof(T)), 0);
}

TEST(MaxPoolKernel, Avx512PairsGiveTheScalarResults) {
  if (best_isa() < Isa::avx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  for (int64_t ow : {1, 7, 8, 9, 15, 16, 17, 33}) {
    for (int64_t extra_column : {0, 1}) {  // an odd width leaves the last column unread
      for (const auto& [kernel, stride] : {std::pair{2, 2}, std::pair{3, 2}, std::pair{2, 1}}) {
        kernels::Pool2dShape p;
        p.planes = 3;
        p.h = 9;
        p.w = 2 * ow + extra_column;
        p.rows = kernels::sliding_axis(p.h, kernel, stride, kernel == 3 ? 1 : 0);
        p.cols = kernels::sliding_axis(p.w, 2, 2, 0);
        SCOPED_TRACE(testing::Message()
                     << "ow " << ow << ", w " << p.w << ", rows " << kernel << "/" << stride);
        expect_avx512_matches_scalar<float>(p, DType::f32);
        expect_avx512_matches_scalar<bfloat16>(p, DType::bf16);
        expect_avx512_matches_scalar<float16>(p, DType::f16);
      }
    }
  }
}

TEST(MaxPoolKernel, PairsApplyOnlyToTwoWideWindowsEveryTwoColumns) {
  kernels::Pool2dShape p;
  p.planes = 1;
  p.h = 4;
  p.w = 8;
  p.rows = kernels::sliding_axis(4, 2, 2, 0);
  p.cols = kernels::sliding_axis(8, 2, 2, 0);
  EXPECT_TRUE(kernels::avx512::max_pool2d_pairs_apply(p, DType::f32));
  EXPECT_TRUE(kernels::avx512::max_pool2d_pairs_apply(p, DType::bf16));
  EXPECT_TRUE(kernels::avx512::max_pool2d_pairs_apply(p, DType::f16));
  EXPECT_FALSE(kernels::avx512::max_pool2d_pairs_apply(p, DType::f64));
  p.cols = kernels::sliding_axis(8, 3, 2, 1);  // 3 wide, padded
  EXPECT_FALSE(kernels::avx512::max_pool2d_pairs_apply(p, DType::f32));
  p.cols = kernels::sliding_axis(8, 2, 1, 0);  // overlapping columns
  EXPECT_FALSE(kernels::avx512::max_pool2d_pairs_apply(p, DType::f32));
}

// The name of the candidate max_pool2d_forward runs on an x of dtype `dt` pooled by p.
const char* forward_candidate(const kernels::Pool2dShape& p, DType dt) {
  const Tensor x = zeros({p.planes, p.h, p.w}, dt);
  Tensor y = empty({p.planes, p.rows.size(), p.cols.size()}, dt);
  Tensor index = empty(y.shape(), DType::i64);
  return kernels::max_pool2d_forward.select(p, x, y, index).name;
}

TEST(MaxPoolKernel, TheRegistryRunsThePairsWhereTheyApplyAndTheFallbackForReference) {
  kernels::Pool2dShape p;
  p.planes = 2;
  p.h = 4;
  p.w = 8;
  p.rows = kernels::sliding_axis(4, 2, 2, 0);
  p.cols = kernels::sliding_axis(8, 2, 2, 0);
  {
    ReferenceMode reference;
    EXPECT_STREQ(forward_candidate(p, DType::f32), "scalar");
  }
  if (reference_mode()) GTEST_SKIP() << "MIXP_REFERENCE=1 chooses the fallback everywhere";
  if (best_isa() >= Isa::avx512) {
    EXPECT_STREQ(forward_candidate(p, DType::f32), "avx512_pairs");
    EXPECT_STREQ(forward_candidate(p, DType::bf16), "avx512_pairs");
    EXPECT_STREQ(forward_candidate(p, DType::f16), "avx512_pairs");
  }
  EXPECT_STREQ(forward_candidate(p, DType::f64), "openmp");
  {
    IsaLimit avx2(Isa::avx2);
    EXPECT_STREQ(forward_candidate(p, DType::f32), "openmp");
  }
  p.cols = kernels::sliding_axis(8, 3, 2, 1);  // 3 wide, padded
  EXPECT_STREQ(forward_candidate(p, DType::f32), "openmp");
}

}  // namespace
}  // namespace mixp
