// The fast FP8 kernels against their scalar references: the same quantized bits and scales for
// every scaling, both formats and awkward shapes with special values; the FP8 GEMM within the
// fp32-accumulation tolerance of the double reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/fp8.h"
#include "mixp/amp/fp8.h"
#include "mixp/cpu.h"
#include "mixp/random.h"
#include "mixp/runtime.h"
#include "mixp/tensor.h"
#include "support/tolerance.h"

namespace mixp {
namespace {

// Values over many binades with signs, zeros, subnormals, huge values, infinities and NaNs.
std::vector<float> awkward(int64_t n, uint64_t seed, bool specials) {
  Philox rng({seed});
  const Tensor g = randn({n}, rng, 1.0);
  const Tensor e = uniform({n}, rng, -30.0, 30.0);
  std::vector<float> out(static_cast<size_t>(n));
  const std::vector<double> gv = g.to_vector(), ev = e.to_vector();
  for (int64_t i = 0; i < n; ++i)
    out[size_t(i)] = float(gv[size_t(i)] * std::exp2(std::floor(ev[size_t(i)])));
  if (specials && n > 20) {
    out[3] = 0.0f;
    out[4] = -0.0f;
    out[5] = 1e-40f;
    out[6] = 3e38f;
    out[7] = std::numeric_limits<float>::infinity();
    out[11] = std::numeric_limits<float>::quiet_NaN();
    out[size_t(n - 1)] = -std::numeric_limits<float>::infinity();
  }
  return out;
}

TEST(Fp8Kernels, AmaxAndScaledConversionFastIsReference) {
  for (int64_t n : {int64_t(1), int64_t(31), int64_t(1000), int64_t(70001)}) {
    for (bool specials : {false, true}) {
      const std::vector<float> x = awkward(n, uint64_t(n), specials);
      const float fa = kernels::fp8_amax_fast(x.data(), n),
                  ra = kernels::fp8_amax_reference(x.data(), n);
      if (std::isnan(ra)) {
        EXPECT_TRUE(std::isnan(fa));
      } else {
        EXPECT_EQ(fa, ra);
      }
      for (DType d : {DType::e4m3, DType::e5m2}) {
        for (float scale : {1.0f, 448.0f / 3.0f, 0x1p-20f}) {
          std::vector<uint8_t> qf(static_cast<size_t>(n)), qr(static_cast<size_t>(n));
          kernels::fp8_scale_fast(x.data(), n, d, scale, qf.data());
          kernels::fp8_scale_reference(x.data(), n, d, scale, qr.data());
          EXPECT_EQ(qf, qr) << name_of(d) << " n " << n << " scale " << scale;
        }
      }
    }
  }
}

TEST(Fp8Kernels, BlockQuantizationFastIsReference) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {3, 31}, {5, 33}, {130, 257}}) {
    for (bool specials : {false, true}) {
      const std::vector<float> x = awkward(rows * cols, uint64_t(rows * 7 + cols), specials);
      for (DType d : {DType::e4m3, DType::e5m2}) {
        const size_t n = size_t(rows * cols);
        const size_t nb = size_t(rows * ((cols + 31) / 32));
        std::vector<uint8_t> qf(n), qr(n), cf(nb), cr(nb);
        kernels::fp8_quantize_mx_fast(x.data(), rows, cols, d, qf.data(), cf.data());
        kernels::fp8_quantize_mx_reference(x.data(), rows, cols, d, qr.data(), cr.data());
        EXPECT_EQ(qf, qr) << "mx " << rows << "x" << cols;
        EXPECT_EQ(cf, cr) << "mx " << rows << "x" << cols;
        for (int64_t block_rows : {int64_t(1), int64_t(128)}) {
          for (int64_t batch : {int64_t(1), int64_t(2)}) {
            if (batch == 2 && n % 2 != 0) continue;
            const int64_t r = rows / batch;
            if (r == 0) continue;
            const size_t ns =
                size_t(batch * ((r + block_rows - 1) / block_rows) * ((cols + 127) / 128));
            std::vector<float> sf(ns), sr(ns);
            std::fill(qf.begin(), qf.end(), 0);
            std::fill(qr.begin(), qr.end(), 0);
            kernels::fp8_quantize_blocks_fast(x.data(), batch, r, cols, block_rows, d, qf.data(),
                                              sf.data());
            kernels::fp8_quantize_blocks_reference(x.data(), batch, r, cols, block_rows, d,
                                                   qr.data(), sr.data());
            EXPECT_EQ(qf, qr) << "blocks " << block_rows << " batch " << batch;
            EXPECT_EQ(std::memcmp(sf.data(), sr.data(), ns * sizeof(float)), 0);
          }
        }
      }
    }
  }
}

// The fast GEMM (oneDNN bf16 on exactly widened values) against the double reference.
TEST(Fp8Kernels, GemmFastMatchesReference) {
  using amp::Fp8Scaling;
  for (Fp8Scaling s : {Fp8Scaling::current, Fp8Scaling::mxfp8, Fp8Scaling::block_1x128,
                       Fp8Scaling::block_128x128}) {
    for (auto [batch, m, n, k] :
         {std::array<int64_t, 4>{1, 1, 1, 1}, {1, 7, 5, 33}, {3, 17, 9, 130}, {1, 130, 129, 300}}) {
      Philox rng({uint64_t(m * n * k)});
      const Shape sa = batch == 1 ? Shape{m, k} : Shape{batch, m, k};
      const Shape sb = batch == 1 ? Shape{n, k} : Shape{batch, n, k};
      // Rows of very different magnitudes: the block scales matter.
      Tensor a = randn(sa, rng, 1.0), b = randn(sb, rng, 1e-3);
      float* av = a.data<float>();
      for (int64_t i = 0; i < a.numel(); ++i) av[i] *= std::exp2(float((i / k) % 9) - 4.0f);
      const DType db =
          s == Fp8Scaling::mxfp8 || s == Fp8Scaling::block_128x128 ? DType::e4m3 : DType::e5m2;
      const amp::Fp8Tensor qa = amp::quantize(
          a, DType::e4m3, s == Fp8Scaling::block_128x128 ? Fp8Scaling::block_1x128 : s);
      const amp::Fp8Tensor qb = amp::quantize(b, db, s);
      const Tensor fast = amp::fp8_gemm(qa, qb);
      Tensor ref;
      {
        ReferenceMode reference;
        ref = amp::fp8_gemm(qa, qb);
      }
      ASSERT_EQ(fast.shape(), ref.shape());
      EXPECT_EQ(test::compare(fast, ref, test::tolerance(DType::f32, k)), "")
          << amp::name_of(s) << " " << batch << "x" << m << "x" << n << "x" << k;
    }
  }
}

// MX scales fold into the widening exactly: a one-term product is the exact product of the
// two dequantized values, for scales far from 1.
TEST(Fp8Kernels, MxWideningIsExact) {
  const int64_t k = 32;
  std::vector<double> av(k), bv(k);
  for (int64_t p = 0; p < k; ++p) {
    av[size_t(p)] = std::ldexp(1.0 + double(p) / 8, 60);
    bv[size_t(p)] = std::ldexp(1.0 + double(k - p) / 16, -70);
  }
  const Tensor a = from_values(av, {1, k}), b = from_values(bv, {1, k});
  const amp::Fp8Tensor qa = amp::quantize(a, DType::e4m3, amp::Fp8Scaling::mxfp8);
  const amp::Fp8Tensor qb = amp::quantize(b, DType::e5m2, amp::Fp8Scaling::mxfp8);
  const std::vector<double> da = qa.dequantize().to_vector(), dbv = qb.dequantize().to_vector();
  double want = 0;
  for (int64_t p = 0; p < k; ++p) want += da[size_t(p)] * dbv[size_t(p)];
  const double got = amp::fp8_gemm(qa, qb).item();
  EXPECT_NEAR(got, want, std::fabs(want) * test::tolerance(DType::f32, k).rtol);
  EXPECT_NE(qa.block_scales.to_vector()[0], 127.0);  // the scale is far from 1
}

}  // namespace
}  // namespace mixp
