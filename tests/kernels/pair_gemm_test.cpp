// The bf16 pair products and packings (kernels/pair_gemm.h): the AVX-512 BF16 versions against
// the scalar ones, and both against sums in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/pair_gemm.h"
#include "kernels/vmath_isa.h"
#include "mixp/cpu.h"
#include "mixp/float_types.h"
#include "mixp/random.h"
#include "support/tolerance.h"

namespace mixp {
namespace {

uint16_t bf16_bits(double x) { return bfloat16(float(x)).bits; }
double widen(uint16_t bits) { return double(float(bfloat16::from_bits(bits))); }

void require_bf16_units() {
  if (best_isa() < Isa::avx512_bf16) GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
}

// Small integers (|x| <= 8) multiply and add exactly in fp32, so any order gives the same bits;
// values in [0.5, 2] sum without cancellation, so fp32's error stays relative to the sum.
std::vector<uint16_t> random_bf16(size_t n, Philox& rng, bool integers) {
  std::vector<uint16_t> x(n);
  for (uint16_t& v : x) {
    v = integers ? bf16_bits(double(int(rng.next_u32() % 17) - 8))
                 : bf16_bits(0.5 + 1.5 * rng.uniform());
  }
  return x;
}

struct Problem {
  int64_t m, n, pairs;
  bool transposed_a, accumulate;
  int64_t row_limit, pair_limit, first_term = -1;
};

// Runs one product on fresh operands with the given kernel; C starts as `start` everywhere, so
// that the cells a causal limit leaves alone can be seen.
struct Operands {
  std::vector<uint16_t> a, b;
  int64_t a_row, a_pair, ldb, ldc;
};

Operands make_operands(const Problem& p, Philox& rng, bool integers) {
  Operands o;
  o.ldb = 2 * p.n + 32;  // padded, to catch reads of the wrong row
  o.ldc = p.n + 16;
  if (p.transposed_a) {  // word (m, pair) at pair * (m + 3) + m
    o.a_row = 1;
    o.a_pair = p.m + 3;
  } else {
    o.a_row = p.pairs + 1;
    o.a_pair = 1;
  }
  const int64_t words = (p.m - 1) * o.a_row + (p.pairs - 1) * o.a_pair + 1;
  o.a = random_bf16(size_t(2 * words), rng, integers);
  o.b = random_bf16(size_t(p.pairs * o.ldb), rng, integers);
  return o;
}

// The product's operands and sizes; the caller sets where C goes.
kernels::PairGemm product_of(const Problem& p, const Operands& o) {
  kernels::PairGemm g;
  g.a = reinterpret_cast<const uint32_t*>(o.a.data());
  g.a_row = o.a_row;
  g.a_pair = o.a_pair;
  g.b = o.b.data();
  g.ldb = o.ldb;
  g.ldc = o.ldc;
  g.m = p.m;
  g.n = p.n;
  g.pairs = p.pairs;
  return g;
}

// ref::pair_gemm or avx512_bf16::pair_gemm.
using PairGemmFn = void (*)(const kernels::PairGemm& g);

std::vector<float> run(PairGemmFn kernel, const Problem& p, const Operands& o, float start) {
  std::vector<float> c(size_t(p.m * o.ldc), start);
  kernels::PairGemm g = product_of(p, o);
  g.c = c.data();
  g.accumulate = p.accumulate;
  g.row_limit = p.row_limit;
  g.pair_limit = p.pair_limit;
  g.first_term = p.first_term;
  kernel(g);
  return c;
}

// What the tile of 6 rows holding row i computes: the columns and pairs below its limits.
int64_t tile_end(const Problem& p, int64_t i) {
  const int64_t first = i / 6 * 6;
  return first + std::min<int64_t>(6, p.m - first);
}
int64_t columns_of(const Problem& p, int64_t i) {
  if (p.row_limit < 0) return p.n;
  return std::min(p.n, (p.row_limit + tile_end(p, i) + 15) / 16 * 16);
}
int64_t first_pair_of(const Problem& p, int64_t i) {
  const int64_t first_row = i / 6 * 6;
  return p.first_term >= 0 && first_row > p.first_term ? (first_row - p.first_term) / 2 : 0;
}
int64_t pairs_of(const Problem& p, int64_t i) {
  if (p.pair_limit < 0) return p.pairs;
  return std::min(p.pairs, (p.pair_limit + tile_end(p, i) + 1) / 2);
}

// C in double: the start value where the limits leave a cell alone.
std::vector<double> expected(const Problem& p, const Operands& o, float start) {
  std::vector<double> c(size_t(p.m * o.ldc), double(start));
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < columns_of(p, i); ++j) {
      double sum = p.accumulate ? double(start) : 0.0;
      for (int64_t q = first_pair_of(p, i); q < pairs_of(p, i); ++q) {
        const size_t w = size_t(i * o.a_row + q * o.a_pair);
        for (int e = 0; e < 2; ++e) {
          sum += widen(o.a[2 * w + size_t(e)]) * widen(o.b[size_t(q * o.ldb + 2 * j + e)]);
        }
      }
      c[size_t(i * o.ldc + j)] = sum;
    }
  }
  return c;
}

std::vector<Problem> problems() {
  std::vector<Problem> out;
  for (int64_t m : {1, 5, 6, 7, 13, 64}) {
    for (int64_t n : {16, 48, 64, 80, 256}) {
      for (int64_t pairs : {1, 17, 32}) {
        out.push_back({m, n, pairs, false, false, -1, -1});
        out.push_back({m, n, pairs, true, true, -1, -1});
      }
      out.push_back({m, n, 32, false, false, 3, -1});    // causal columns
      out.push_back({m, n, 40, false, true, -1, 10});    // causal pairs
      out.push_back({m, n, 40, true, false, 0, 0});      // both, from the first row
      out.push_back({m, n, 40, true, true, -1, -1, 5});  // the first terms skipped
    }
  }
  return out;
}

std::string describe(const Problem& p) {
  return "m " + std::to_string(p.m) + ", n " + std::to_string(p.n) + ", pairs " +
         std::to_string(p.pairs) + (p.transposed_a ? ", A transposed" : "") +
         (p.accumulate ? ", accumulating" : "") + ", limits " + std::to_string(p.row_limit) + " " +
         std::to_string(p.pair_limit) + " " + std::to_string(p.first_term);
}

TEST(PairGemm, IntegerProductsAreExactOnBothPaths) {
  require_bf16_units();
  Philox rng(PhiloxState{3, 0, 0});
  for (const Problem& p : problems()) {
    const Operands o = make_operands(p, rng, true);
    const std::vector<double> want = expected(p, o, 5.0f);
    const std::vector<float> fast = run(kernels::avx512_bf16::pair_gemm, p, o, 5.0f);
    const std::vector<float> scalar = run(kernels::ref::pair_gemm, p, o, 5.0f);
    for (size_t e = 0; e < want.size(); ++e) {
      ASSERT_EQ(double(fast[e]), want[e]) << describe(p) << ", element " << e;
      ASSERT_EQ(double(scalar[e]), want[e]) << describe(p) << ", element " << e;
    }
  }
}

// The bf16 result: each sum plus its column's bias rounded once, by both versions, within the
// causal limits (the attention's P V and dS K), the cells beyond them left alone. Integer
// operands make every sum exact, so both give the bits of the double sum rounded.
TEST(PairGemm, Bf16ResultsAreTheSumsAndBiasRoundedOnce) {
  require_bf16_units();
  Philox rng(PhiloxState{5, 0, 0});
  for (const Problem& p : problems()) {
    if (p.accumulate) continue;
    const Operands o = make_operands(p, rng, true);
    const std::vector<double> want = expected(p, o, 0.0f);
    std::vector<float> bias(size_t(p.n));
    for (float& v : bias) v = float(int(rng.next_u32() % 9) - 4);
    for (PairGemmFn kernel : {kernels::avx512_bf16::pair_gemm, kernels::ref::pair_gemm}) {
      std::vector<uint16_t> c(size_t(p.m * o.ldc), 0x7fc1);
      kernels::PairGemm g = product_of(p, o);
      g.c_bf16 = c.data();
      g.bias = bias.data();
      g.row_limit = p.row_limit;
      g.pair_limit = p.pair_limit;
      g.first_term = p.first_term;
      kernel(g);
      for (int64_t i = 0; i < p.m; ++i) {
        for (int64_t j = 0; j < o.ldc; ++j) {
          const size_t e = size_t(i * o.ldc + j);
          const uint16_t expect = j < columns_of(p, i)
                                      ? bfloat16(float(want[e] + double(bias[size_t(j)]))).bits
                                      : uint16_t(0x7fc1);
          ASSERT_EQ(c[e], expect) << describe(p) << ", row " << i << ", column " << j;
        }
      }
    }
  }
}

TEST(PairGemm, RealProductsAgreeWithinFp32Accumulation) {
  require_bf16_units();
  Philox rng(PhiloxState{4, 0, 0});
  for (const Problem& p : problems()) {
    const Operands o = make_operands(p, rng, false);
    const std::vector<double> want = expected(p, o, 0.75f);
    const std::vector<float> fast = run(kernels::avx512_bf16::pair_gemm, p, o, 0.75f);
    const std::vector<float> scalar = run(kernels::ref::pair_gemm, p, o, 0.75f);
    // Each sum has 2 pairs + 1 terms (the start value when accumulating).
    const test::Tolerance tol = test::tolerance(DType::f32, 2 * p.pairs + 1);
    for (size_t e = 0; e < want.size(); ++e) {
      const double bound = tol.atol + tol.rtol * std::fabs(want[e]);
      ASSERT_LE(std::fabs(double(fast[e]) - want[e]), bound) << describe(p) << ", element " << e;
      ASSERT_LE(std::fabs(double(scalar[e]) - want[e]), bound) << describe(p) << ", element " << e;
    }
  }
}

TEST(PairGemm, PackingsMatchTheScalarOnesAndTheirDefinitions) {
  require_bf16_units();
  Philox rng(PhiloxState{6, 0, 0});
  for (int64_t rows : {1, 2, 5, 16, 17, 37, 64}) {
    for (int64_t cols : {2, 16, 30, 32, 34, 64, 96}) {
      const int64_t ld = cols + 6;
      const std::vector<uint16_t> src = random_bf16(size_t(rows * ld), rng, false);
      // By pairs of rows: [ceil(rows / 2)][cols][2], padded rows of 2 cols + 8.
      const int64_t row_ld = 2 * cols + 8;
      std::vector<uint16_t> fast(size_t((rows + 1) / 2 * row_ld), 7), scalar = fast;
      kernels::avx512_bf16::pack_row_pairs(src.data(), ld, rows, cols, fast.data(), row_ld);
      kernels::ref::pack_row_pairs(src.data(), ld, rows, cols, scalar.data(), row_ld);
      ASSERT_EQ(fast, scalar) << "pack_row_pairs, rows " << rows << ", cols " << cols;
      // The same packing, adding each column to running sums row by row.
      std::vector<float> fast_sums(static_cast<size_t>(cols));
      for (float& v : fast_sums) v = float(rng.normal());
      std::vector<float> scalar_sums = fast_sums;
      const std::vector<float> start = fast_sums;
      std::vector<uint16_t> summed(fast.size(), 7), summed_scalar = summed;
      kernels::avx512_bf16::pack_row_pairs_summing(src.data(), ld, rows, cols, summed.data(),
                                                   row_ld, fast_sums.data());
      kernels::ref::pack_row_pairs_summing(src.data(), ld, rows, cols, summed_scalar.data(), row_ld,
                                           scalar_sums.data());
      ASSERT_EQ(summed, fast) << "pack_row_pairs_summing, rows " << rows << ", cols " << cols;
      ASSERT_EQ(summed_scalar, fast);
      for (int64_t c = 0; c < cols; ++c) {
        float serial = start[size_t(c)];  // fp32, one row at a time
        for (int64_t r = 0; r < rows; ++r) serial += float(widen(src[size_t(r * ld + c)]));
        ASSERT_EQ(fast_sums[size_t(c)], scalar_sums[size_t(c)])
            << "rows " << rows << ", column " << c;
        ASSERT_EQ(scalar_sums[size_t(c)], serial) << "rows " << rows << ", column " << c;
      }
      for (int64_t r = 0; r < rows + rows % 2; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          const uint16_t want = r < rows ? src[size_t(r * ld + c)] : uint16_t(0);
          ASSERT_EQ(scalar[size_t((r / 2) * row_ld + 2 * c + r % 2)], want);
        }
      }
      // By pairs of columns: [cols / 2][rows][2], padded rows of 2 rows + 4.
      const int64_t col_ld = 2 * rows + 4;
      std::vector<uint16_t> fast_t(size_t(cols / 2 * col_ld), 7), scalar_t = fast_t;
      kernels::avx512_bf16::pack_column_pairs(src.data(), ld, rows, cols, fast_t.data(), col_ld);
      kernels::ref::pack_column_pairs(src.data(), ld, rows, cols, scalar_t.data(), col_ld);
      ASSERT_EQ(fast_t, scalar_t) << "pack_column_pairs, rows " << rows << ", cols " << cols;
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          ASSERT_EQ(scalar_t[size_t((c / 2) * col_ld + 2 * r + c % 2)], src[size_t(r * ld + c)]);
        }
      }
    }
  }
}

// fp32 values of every kind for the rounding kernels: normals, values whose quotient or product
// lands among fp32 and bf16 subnormals, zeros of both signs, infinities and NaN.
std::vector<float> rounding_inputs() {
  std::vector<float> x;
  Philox rng(PhiloxState{8, 0, 0});
  for (int i = 0; i < 3000; ++i) x.push_back(float(4.0 * rng.normal()));
  for (double v = 1e-45; v < 1e-36; v *= 1.37) {
    x.push_back(float(v));
    x.push_back(-float(v));
  }
  for (float v : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 3.0e38f, -3.0e38f, 1.17549435e-38f}) {
    x.push_back(v);
  }
  return x;
}

// Both fp32 packings round each value once to bf16 as bfloat16(float) does: the packing of the
// rounded values, for values of every kind (subnormals, signed zeros, infinities, NaN).
TEST(PairGemm, Fp32PackingsAreThePackingsOfTheRoundedValues) {
  require_bf16_units();
  const std::vector<float> pool = rounding_inputs();
  size_t next = 0;
  for (int64_t rows : {1, 2, 5, 16, 17, 37, 64}) {
    for (int64_t cols : {2, 16, 30, 32, 34, 64, 96}) {
      const int64_t ld = cols + 6;
      std::vector<float> src(size_t(rows * ld));
      for (float& v : src) v = pool[next++ % pool.size()];
      std::vector<uint16_t> rounded(src.size());
      for (size_t e = 0; e < src.size(); ++e) rounded[e] = bfloat16(src[e]).bits;
      const int64_t row_ld = 2 * cols + 8;
      std::vector<uint16_t> fast(size_t((rows + 1) / 2 * row_ld), 7), scalar = fast, want = fast;
      kernels::avx512_bf16::pack_row_pairs_f32(src.data(), ld, rows, cols, fast.data(), row_ld);
      kernels::ref::pack_row_pairs_f32(src.data(), ld, rows, cols, scalar.data(), row_ld);
      kernels::ref::pack_row_pairs(rounded.data(), ld, rows, cols, want.data(), row_ld);
      ASSERT_EQ(scalar, want) << "pack_row_pairs_f32, rows " << rows << ", cols " << cols;
      ASSERT_EQ(fast, want) << "pack_row_pairs_f32, rows " << rows << ", cols " << cols;
      const int64_t col_ld = 2 * rows + 4;
      std::vector<uint16_t> fast_t(size_t(cols / 2 * col_ld), 7), scalar_t = fast_t,
                                                                  want_t = fast_t;
      kernels::avx512_bf16::pack_column_pairs_f32(src.data(), ld, rows, cols, fast_t.data(),
                                                  col_ld);
      kernels::ref::pack_column_pairs_f32(src.data(), ld, rows, cols, scalar_t.data(), col_ld);
      kernels::ref::pack_column_pairs(rounded.data(), ld, rows, cols, want_t.data(), col_ld);
      ASSERT_EQ(scalar_t, want_t) << "pack_column_pairs_f32, rows " << rows << ", cols " << cols;
      ASSERT_EQ(fast_t, want_t) << "pack_column_pairs_f32, rows " << rows << ", cols " << cols;
    }
  }
}

// The scalar row functions that define the attention's bf16 rows (the AVX-512 row groups are
// held to them below): each value is the formula in fp32, rounded once to bf16, for values of
// every kind.
TEST(PairGemm, RowsRoundedToBf16AreTheFormulasRoundedOnce) {
  const std::vector<float> x = rounding_inputs();
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[(i * 7919) % x.size()];
  const size_t n = x.size();
  for (float d : {3.0f, 0.7f, 1e30f}) {
    std::vector<uint16_t> scalar(n);
    kernels::ref::divide_to_bf16(x.data(), int64_t(n), d, scalar.data());
    for (size_t i = 0; i < n; ++i) {
      const float quotient = x[i] / d;
      ASSERT_EQ(scalar[i], bfloat16(quotient).bits) << x[i] << " / " << d;
    }
  }
  for (float dot : {0.0f, 0.25f}) {
    std::vector<uint16_t> scalar(n);
    kernels::ref::score_grad_to_bf16(x.data(), y.data(), int64_t(n), dot, 0.125f, scalar.data());
    for (size_t i = 0; i < n; ++i) {
      const float weighted = x[i] * (y[i] - dot), grad = weighted * 0.125f;
      ASSERT_EQ(scalar[i], bfloat16(grad).bits) << x[i] << ", " << y[i];
    }
  }
}

// The attention's row groups, one case: `rows` rows of scores (ld apart) with first_n + r n_step
// visible values each, scaled by 1/8. Scores up to about 50 in magnitude make exponentials that
// underflow to subnormals and zero, and quotients that round to bf16 subnormals.
struct RowGroupCase {
  int64_t rows, first_n, n_step;
  int64_t longest() const { return first_n + (rows - 1) * n_step; }
  int64_t extent() const { return longest() + 5; }
  int64_t ld() const { return extent() + 11; }
  int64_t n(int64_t r) const { return first_n + r * n_step; }
  std::string name() const {
    return "rows " + std::to_string(rows) + ", first_n " + std::to_string(first_n) +
           ", n_step " + std::to_string(n_step);
  }
};

std::vector<RowGroupCase> row_group_cases() {
  std::vector<RowGroupCase> cases;
  for (int64_t rows : {1, 2, 3, 4, 5, 7, 9, 13}) {
    for (int64_t first_n : {1, 15, 16, 17, 31, 33, 64, 100}) {
      for (int64_t n_step : {0, 1}) cases.push_back({rows, first_n, n_step});
    }
  }
  return cases;
}

std::vector<float> random_scores(size_t n, Philox& rng) {
  std::vector<float> x(n);
  for (float& v : x) v = float(12.0 * rng.normal());
  return x;
}

bool same_floats(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// softmax_rows_to_bf16 is each row's max, exponentials and sum, and quotients, as the row
// functions compute them one row at a time (the vectorized max and exponentials, and the
// scalar quotients, which define the rounding): the groups, the scalar version and the rows one
// at a time give the same bits in the bf16 probabilities (with their zero tails), the
// exponentials left in the scores and the log-sum-exps.
TEST(PairGemm, SoftmaxRowGroupsAreTheRowsOneAtATime) {
  require_bf16_units();
  Philox rng(PhiloxState{21, 0, 0});
  const float scale = 0.125f;
  for (const RowGroupCase& c : row_group_cases()) {
    const std::vector<float> scores = random_scores(size_t(c.rows * c.ld()), rng);
    std::vector<float> s_fast = scores, s_ref = scores, s_row = scores;
    std::vector<uint16_t> out_fast(scores.size(), 7), out_ref = out_fast, out_row = out_fast;
    std::vector<float> lse_fast(size_t(c.rows)), lse_ref = lse_fast, lse_row = lse_fast;
    kernels::avx512_bf16::softmax_rows_to_bf16(s_fast.data(), c.ld(), c.rows, c.first_n, c.n_step,
                                               scale, out_fast.data(), c.ld(), c.extent(),
                                               lse_fast.data());
    kernels::ref::softmax_rows_to_bf16(s_ref.data(), c.ld(), c.rows, c.first_n, c.n_step, scale,
                                       out_ref.data(), c.ld(), c.extent(), lse_ref.data());
    for (int64_t r = 0; r < c.rows; ++r) {
      float* row = s_row.data() + r * c.ld();
      uint16_t* out = out_row.data() + r * c.ld();
      const float shift = kernels::avx512::max_f32(row, c.n(r)) * scale;
      const float total = kernels::avx512::scale_shift_exp_sum_f32(row, row, c.n(r), scale, shift);
      kernels::ref::divide_to_bf16(row, c.n(r), total, out);
      std::fill(out + c.n(r), out + c.extent(), uint16_t(0));
      lse_row[size_t(r)] = shift + std::log(total);
    }
    const std::string where = c.name();
    ASSERT_EQ(out_row, out_ref) << where;
    ASSERT_EQ(out_fast, out_ref) << where;
    ASSERT_TRUE(same_floats(s_fast, s_row) && same_floats(s_ref, s_row)) << where;
    ASSERT_TRUE(same_floats(lse_fast, lse_row) && same_floats(lse_ref, lse_row)) << where;
  }
}

// probabilities_rows and score_grad_rows_to_bf16 likewise: the exponentials from the saved
// log-sum-exps (zeros after each row's values, up to the extent), and dS rounded to bf16 from P,
// dP and each row's dot product.
TEST(PairGemm, BackwardRowGroupsAreTheRowsOneAtATime) {
  require_bf16_units();
  Philox rng(PhiloxState{22, 0, 0});
  const float scale = 0.125f;
  for (const RowGroupCase& c : row_group_cases()) {
    const std::vector<float> scores = random_scores(size_t(c.rows * c.ld()), rng);
    std::vector<float> lse(size_t(c.rows));
    for (float& v : lse) v = float(3.0 * rng.normal());
    std::vector<float> p_fast = scores, p_ref = scores, p_row = scores;
    kernels::avx512_bf16::probabilities_rows(p_fast.data(), c.ld(), c.rows, c.first_n, c.n_step,
                                             scale, lse.data(), c.extent());
    kernels::ref::probabilities_rows(p_ref.data(), c.ld(), c.rows, c.first_n, c.n_step, scale,
                                     lse.data(), c.extent());
    for (int64_t r = 0; r < c.rows; ++r) {
      float* row = p_row.data() + r * c.ld();
      kernels::avx512::scale_shift_exp_f32(row, row, c.n(r), scale, lse[size_t(r)]);
      std::fill(row + c.n(r), row + c.extent(), 0.0f);
    }
    const std::string where = c.name();
    ASSERT_TRUE(same_floats(p_fast, p_row) && same_floats(p_ref, p_row)) << where;

    const std::vector<float> dp = random_scores(scores.size(), rng);
    std::vector<uint16_t> ds_fast(scores.size(), 7), ds_ref = ds_fast, ds_row = ds_fast;
    kernels::avx512_bf16::score_grad_rows_to_bf16(p_row.data(), dp.data(), c.ld(), c.rows,
                                                  c.first_n, c.n_step, scale, ds_fast.data(),
                                                  c.ld(), c.extent());
    kernels::ref::score_grad_rows_to_bf16(p_row.data(), dp.data(), c.ld(), c.rows, c.first_n,
                                          c.n_step, scale, ds_ref.data(), c.ld(), c.extent());
    for (int64_t r = 0; r < c.rows; ++r) {
      const float* p = p_row.data() + r * c.ld();
      const float* g = dp.data() + r * c.ld();
      uint16_t* out = ds_row.data() + r * c.ld();
      const float dot = kernels::avx512::dot_f32(p, g, c.n(r));
      kernels::ref::score_grad_to_bf16(p, g, c.n(r), dot, scale, out);
      std::fill(out + c.n(r), out + c.extent(), uint16_t(0));
    }
    ASSERT_EQ(ds_row, ds_ref) << where;
    ASSERT_EQ(ds_fast, ds_ref) << where;
  }
}

// dS's rounding on values of every finite kind: P and dP drawn from the rounding inputs
// (subnormals, signed zeros, values near the top of fp32's range left out so that the dot
// products stay finite), in groups of every size.
TEST(PairGemm, ScoreGradRowGroupsRoundValuesOfEveryKind) {
  require_bf16_units();
  std::vector<float> pool;
  for (float v : rounding_inputs()) {
    if (std::isfinite(v) && std::fabs(v) < 1e30f) pool.push_back(v);
  }
  const RowGroupCase c{.rows = 7, .first_n = 37, .n_step = 1};
  const size_t size = size_t(c.rows * c.ld());
  std::vector<float> p(size), dp(size);
  for (size_t e = 0; e < size; ++e) {
    p[e] = pool[(e * 13) % pool.size()];
    dp[e] = pool[(e * 7919 + 5) % pool.size()];
  }
  std::vector<uint16_t> fast(size, 7), scalar = fast;
  kernels::avx512_bf16::score_grad_rows_to_bf16(p.data(), dp.data(), c.ld(), c.rows, c.first_n,
                                                c.n_step, 0.125f, fast.data(), c.ld(), c.extent());
  kernels::ref::score_grad_rows_to_bf16(p.data(), dp.data(), c.ld(), c.rows, c.first_n, c.n_step,
                                        0.125f, scalar.data(), c.ld(), c.extent());
  ASSERT_EQ(fast, scalar);
}

}  // namespace
}  // namespace mixp
