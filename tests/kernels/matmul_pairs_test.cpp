// bf16 products with a bf16 result from mixp's pair tiles (kernels/cpu/matmul_pairs.cpp)
// against sums in double: both layouts of B, bias or none, row counts around the 6-row tiles
// and the 96-row blocks, and column counts with a short last panel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/gemm.h"
#include "mixp/float_types.h"
#include "mixp/random.h"
#include "support/tolerance.h"

namespace mixp {
namespace {

double widen(uint16_t bits) { return double(float(bfloat16::from_bits(bits))); }

struct Problem {
  int64_t m, n, k;
  bool trans_b, bias;
};

std::vector<Problem> problems() {
  std::vector<Problem> out;
  for (int64_t m : {1, 7, 64, 97, 200}) {
    for (int64_t n : {16, 80, 192}) {
      for (int64_t k : {2, 30, 384}) {
        out.push_back({m, n, k, true, true});
        out.push_back({m, n, k, false, false});
      }
    }
  }
  out.push_back({600, 64, 130, true, true});  // large enough for both threads' shares
  // Up to 64 rows with B stored [n][k], any n: B's rows are the tiles' rows.
  for (int64_t m : {1, 7, 64}) {
    for (int64_t n : {1, 10, 37}) {
      for (int64_t k : {2, 30, 384}) out.push_back({m, n, k, true, n != 10});
    }
  }
  return out;
}

std::string describe(const Problem& p) {
  return "m " + std::to_string(p.m) + ", n " + std::to_string(p.n) + ", k " + std::to_string(p.k) +
         (p.trans_b ? ", B transposed" : "") + (p.bias ? ", bias" : "");
}

struct Operands {
  std::vector<uint16_t> a, b;  // A [m][k]; B [n][k] when transposed, else [k][n]
  std::vector<float> bias;
};

// Small integers: every product and partial sum is exact in fp32, in any order.
Operands make(const Problem& p, Philox& rng, bool integers) {
  auto value = [&] {
    return bfloat16(float(integers ? double(int(rng.next_u32() % 17) - 8) : rng.normal())).bits;
  };
  Operands o;
  for (int64_t e = 0; e < p.m * p.k; ++e) o.a.push_back(value());
  for (int64_t e = 0; e < p.k * p.n; ++e) o.b.push_back(value());
  for (int64_t e = 0; e < p.n; ++e) {
    o.bias.push_back(integers ? float(int(rng.next_u32() % 9) - 4) : float(rng.normal()));
  }
  return o;
}

double b_at(const Problem& p, const Operands& o, int64_t k, int64_t n) {
  return widen(o.b[size_t(p.trans_b ? n * p.k + k : k * p.n + n)]);
}

std::vector<uint16_t> run(const Problem& p, const Operands& o, int threads) {
  kernels::GemmShape s;
  s.m = p.m;
  s.n = p.n;
  s.k = p.k;
  s.trans_b = p.trans_b;
  EXPECT_TRUE(kernels::matmul_pairs_supported(s)) << describe(p);
  std::vector<uint16_t> c(size_t(p.m * p.n), 0x7fc1);
  std::vector<uint8_t> space(size_t(kernels::matmul_pairs_workspace_bytes(s, threads)));
  kernels::matmul_pairs_bf16(s, o.a.data(), o.b.data(), DType::bf16, c.data(),
                             p.bias ? o.bias.data() : nullptr, space.data(), threads);
  return c;
}

// The same product with B given as fp32 values, which the packing rounds to bf16.
std::vector<uint16_t> run_f32_b(const Problem& p, const Operands& o, const std::vector<float>& b,
                                int threads) {
  kernels::GemmShape s;
  s.m = p.m;
  s.n = p.n;
  s.k = p.k;
  s.trans_b = p.trans_b;
  std::vector<uint16_t> c(size_t(p.m * p.n), 0x7fc1);
  std::vector<uint8_t> space(size_t(kernels::matmul_pairs_workspace_bytes(s, threads)));
  kernels::matmul_pairs_bf16(s, o.a.data(), b.data(), DType::f32, c.data(),
                             p.bias ? o.bias.data() : nullptr, space.data(), threads);
  return c;
}

void require_bf16_units() {
  if (!kernels::gemm_fast_has_bf16()) GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
}

TEST(MatmulPairs, IntegerProductsAreTheExactSumsRoundedOnce) {
  require_bf16_units();
  Philox rng(PhiloxState{21, 0, 0});
  for (const Problem& p : problems()) {
    const Operands o = make(p, rng, true);
    const std::vector<uint16_t> c = run(p, o, 2);
    for (int64_t i = 0; i < p.m; ++i) {
      for (int64_t j = 0; j < p.n; ++j) {
        double sum = p.bias ? double(o.bias[size_t(j)]) : 0.0;
        for (int64_t k = 0; k < p.k; ++k) sum += widen(o.a[size_t(i * p.k + k)]) * b_at(p, o, k, j);
        ASSERT_EQ(c[size_t(i * p.n + j)], bfloat16(float(sum)).bits)
            << describe(p) << ", row " << i << ", column " << j;
      }
    }
  }
}

TEST(MatmulPairs, RealProductsAgreeWithinFp32AccumulationAndOneBf16Rounding) {
  require_bf16_units();
  Philox rng(PhiloxState{22, 0, 0});
  for (const Problem& p : problems()) {
    const Operands o = make(p, rng, false);
    const std::vector<uint16_t> c = run(p, o, 2);
    // Terms of either sign: the bound is on the sum of their magnitudes.
    const test::Tolerance tol = test::tolerance(DType::bf16, p.k + 1);
    for (int64_t i = 0; i < p.m; ++i) {
      for (int64_t j = 0; j < p.n; ++j) {
        double sum = p.bias ? double(o.bias[size_t(j)]) : 0.0, magnitude = std::fabs(sum);
        for (int64_t k = 0; k < p.k; ++k) {
          const double term = widen(o.a[size_t(i * p.k + k)]) * b_at(p, o, k, j);
          sum += term;
          magnitude += std::fabs(term);
        }
        ASSERT_LE(std::fabs(widen(c[size_t(i * p.n + j)]) - sum), tol.atol + tol.rtol * magnitude)
            << describe(p) << ", row " << i << ", column " << j;
      }
    }
  }
}

TEST(MatmulPairs, BitsDoNotDependOnTheThreadCount) {
  require_bf16_units();
  Philox rng(PhiloxState{23, 0, 0});
  for (const Problem& p : problems()) {
    const Operands o = make(p, rng, false);
    const std::vector<uint16_t> one = run(p, o, 1);
    for (int threads : {2, 3}) ASSERT_EQ(run(p, o, threads), one) << describe(p) << ", " << threads;
  }
}

// An fp32 B is read as its bf16 rounding: the bits of the product of the rounded B, whatever
// the thread count. B's fp32 values lie between bf16 values (and some are ties, and some
// subnormal), so a packing that truncated or skipped the rounding would differ.
TEST(MatmulPairs, Fp32BIsTheProductOfItsBf16Rounding) {
  require_bf16_units();
  Philox rng(PhiloxState{24, 0, 0});
  for (const Problem& p : problems()) {
    Operands o = make(p, rng, false);
    std::vector<float> b(o.b.size());
    for (size_t e = 0; e < b.size(); ++e) {
      const uint32_t low = e % 7 == 0 ? 0x8000u : rng.next_u32() & 0xffffu;  // ties too
      const uint32_t bits = e % 11 == 0 ? (rng.next_u32() & 0x007fffffu)    // subnormals
                                        : (uint32_t(o.b[e]) << 16) | low;
      std::memcpy(&b[e], &bits, sizeof bits);
      o.b[e] = bfloat16(b[e]).bits;
    }
    const std::vector<uint16_t> want = run(p, o, 1);
    for (int threads : {1, 2, 3}) {
      ASSERT_EQ(run_f32_b(p, o, b, threads), want) << describe(p) << ", " << threads;
    }
  }
}

// Up to 64 rows with B transposed the weight's rows are the broadcast operand (C^T = B^T A^T):
// the same sums, so the same bits as the first rows of a longer product, which packs B.
TEST(MatmulPairs, SmallProductsHaveTheBitsOfTheRowsOfALongerOne) {
  require_bf16_units();
  Philox rng(PhiloxState{25, 0, 0});
  for (int64_t rows : {1, 6, 17, 64}) {
    for (int64_t n : {16, 96, 1024}) {
      for (bool bias : {false, true}) {
        const Problem longer{200, n, 130, true, bias};
        Operands o = make(longer, rng, false);
        std::vector<float> b(o.b.size());
        for (size_t e = 0; e < b.size(); ++e) b[e] = float(widen(o.b[e])) * 1.0078125f;
        const std::vector<uint16_t> whole = run(longer, o, 2), whole_f32 = run_f32_b(longer, o, b, 2);
        const Problem small{rows, n, 130, true, bias};
        Operands head = o;
        head.a.resize(size_t(rows * longer.k));
        for (int threads : {1, 2, 3}) {
          const std::vector<uint16_t> part = run(small, head, threads);
          const std::vector<uint16_t> part_f32 = run_f32_b(small, head, b, threads);
          ASSERT_TRUE(std::equal(part.begin(), part.end(), whole.begin()))
              << describe(small) << ", " << threads << " threads";
          ASSERT_TRUE(std::equal(part_f32.begin(), part_f32.end(), whole_f32.begin()))
              << describe(small) << ", fp32 B, " << threads << " threads";
        }
      }
    }
  }
}

TEST(MatmulPairs, TakesOnlyTheShapesItComputes) {
  require_bf16_units();
  kernels::GemmShape s;
  s.m = 8;
  s.n = 32;
  s.k = 16;
  EXPECT_TRUE(kernels::matmul_pairs_supported(s));
  kernels::GemmShape odd_k = s, long_k = s, narrow = s, transposed_a = s, batched = s;
  odd_k.k = 15;
  long_k.k = 4098;
  narrow.n = 24;
  transposed_a.trans_a = true;
  batched.batch = 2;
  kernels::GemmShape many_rows = narrow;  // B [n][k] with more rows than one panel of A
  many_rows.trans_b = true;
  many_rows.m = 65;
  for (const kernels::GemmShape& t : {odd_k, long_k, narrow, transposed_a, batched, many_rows}) {
    EXPECT_FALSE(kernels::matmul_pairs_supported(t)) << t.m << " " << t.n << " " << t.k;
  }
  kernels::GemmShape classifier = narrow;  // B [n][k], up to 64 rows: any n
  classifier.trans_b = true;
  classifier.n = 10;
  classifier.m = 64;
  EXPECT_TRUE(kernels::matmul_pairs_supported(classifier));
}

}  // namespace
}  // namespace mixp
