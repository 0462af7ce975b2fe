// The linear layer's weight and bias gradients on AVX-512 BF16 (kernels/cpu/linear_weight_grad.cpp)
// against sums in double, over shapes that reach every edge of its blocking: odd rows, several
// blocks of row pairs, widths that are not whole tiles or vectors, and both ways of splitting
// the work between threads.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/gemm.h"
#include "mixp/cpu.h"
#include "mixp/float_types.h"
#include "mixp/random.h"
#include "support/tolerance.h"

namespace mixp {
namespace {

double widen(uint16_t bits) { return double(float(bfloat16::from_bits(bits))); }

struct Shape3 {
  int64_t rows, in, out;
};

std::vector<Shape3> shapes() {
  // rows from 1 to 4200: one pair, an odd row, one block of 512 pairs and several with a short
  // last one; in and out around the 16-lane vectors, the 6-row tiles and the 64-column strips.
  // From {520, 150, 230} on they are large enough to run on several threads (2^24
  // multiply-adds): out >= in splits the rows of dw, out < in its columns, and in = 64 leaves a
  // thread without columns.
  return {{1, 1, 1},      {2, 16, 6},      {3, 17, 5},      {37, 64, 13},   {256, 80, 96},
          {1024, 33, 20}, {1025, 7, 130},  {2500, 70, 40},  {2051, 130, 7}, {300, 48, 384},
          {64, 784, 65},  {520, 150, 230}, {600, 200, 150}, {4200, 64, 63}};
}

struct Gradients {
  std::vector<uint16_t> dw;
  std::vector<float> db;
};

Gradients run(const Shape3& s, const std::vector<uint16_t>& dy, const std::vector<uint16_t>& x,
              int threads, bool with_bias) {
  Gradients r{std::vector<uint16_t>(size_t(s.out * s.in)),
              std::vector<float>(size_t(s.out), -1.0f)};
  std::vector<uint8_t> space(size_t(
      kernels::linear_weight_grad_workspace_bytes(s.rows, s.in, s.out, DType::bf16, threads)));
  kernels::linear_weight_grad_fast(s.rows, s.in, s.out, dy.data(), x.data(), r.dw.data(),
                                   DType::bf16, with_bias ? r.db.data() : nullptr, space.data(),
                                   threads);
  return r;
}

// The same gradients into an fp32 dw: the bf16 sums widened back.
std::vector<float> run_wide(const Shape3& s, const std::vector<uint16_t>& dy,
                            const std::vector<uint16_t>& x, int threads, std::vector<float>* db) {
  std::vector<float> dw(size_t(s.out * s.in), -3.0f);
  std::vector<uint8_t> space(size_t(
      kernels::linear_weight_grad_workspace_bytes(s.rows, s.in, s.out, DType::f32, threads)));
  kernels::linear_weight_grad_fast(s.rows, s.in, s.out, dy.data(), x.data(), dw.data(),
                                   DType::f32, db ? db->data() : nullptr, space.data(), threads);
  return dw;
}

// Small integers (|x| <= 8): every product and partial sum is exact in fp32, in any order.
std::vector<uint16_t> operand(size_t n, Philox& rng, bool integers) {
  std::vector<uint16_t> v(n);
  for (uint16_t& e : v) {
    const double x = integers ? double(int(rng.next_u32() % 17) - 8) : rng.normal();
    e = bfloat16(float(x)).bits;
  }
  return v;
}

struct Expected {
  std::vector<double> dw, db;
};

Expected expected(const Shape3& s, const std::vector<uint16_t>& dy,
                  const std::vector<uint16_t>& x) {
  Expected e{std::vector<double>(size_t(s.out * s.in)), std::vector<double>(size_t(s.out))};
  for (int64_t t = 0; t < s.rows; ++t) {
    for (int64_t o = 0; o < s.out; ++o) {
      const double g = widen(dy[size_t(t * s.out + o)]);
      e.db[size_t(o)] += g;
      for (int64_t i = 0; i < s.in; ++i)
        e.dw[size_t(o * s.in + i)] += g * widen(x[size_t(t * s.in + i)]);
    }
  }
  return e;
}

std::string describe(const Shape3& s) {
  return "rows " + std::to_string(s.rows) + ", in " + std::to_string(s.in) + ", out " +
         std::to_string(s.out);
}

void require_bf16_units() {
  if (!kernels::gemm_fast_has_bf16()) GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
}

TEST(LinearWeightGrad, IntegerGradientsAreTheExactSumsRoundedOnce) {
  require_bf16_units();
  Philox rng(PhiloxState{11, 0, 0});
  for (const Shape3& s : shapes()) {
    const std::vector<uint16_t> dy = operand(size_t(s.rows * s.out), rng, true);
    const std::vector<uint16_t> x = operand(size_t(s.rows * s.in), rng, true);
    const Expected want = expected(s, dy, x);
    const Gradients got = run(s, dy, x, 2, true);
    for (size_t e = 0; e < want.dw.size(); ++e) {
      ASSERT_EQ(got.dw[e], bfloat16(float(want.dw[e])).bits) << describe(s) << ", dw element " << e;
    }
    for (size_t o = 0; o < want.db.size(); ++o) {
      ASSERT_EQ(double(got.db[o]), want.db[o]) << describe(s) << ", db element " << o;
    }
  }
}

TEST(LinearWeightGrad, RealGradientsAgreeWithinFp32AccumulationAndOneBf16Rounding) {
  require_bf16_units();
  Philox rng(PhiloxState{12, 0, 0});
  for (const Shape3& s : shapes()) {
    const std::vector<uint16_t> dy = operand(size_t(s.rows * s.out), rng, false);
    const std::vector<uint16_t> x = operand(size_t(s.rows * s.in), rng, false);
    const Expected want = expected(s, dy, x);
    const Gradients got = run(s, dy, x, 2, true);
    // Normal operands: sums of products of either sign, so the bound is on the sum of
    // magnitudes, which bounds fp32's accumulated error.
    std::vector<double> magnitude(want.dw.size()), db_magnitude(want.db.size());
    for (int64_t t = 0; t < s.rows; ++t) {
      for (int64_t o = 0; o < s.out; ++o) {
        const double g = std::fabs(widen(dy[size_t(t * s.out + o)]));
        db_magnitude[size_t(o)] += g;
        for (int64_t i = 0; i < s.in; ++i) {
          magnitude[size_t(o * s.in + i)] += g * std::fabs(widen(x[size_t(t * s.in + i)]));
        }
      }
    }
    const test::Tolerance tol = test::tolerance(DType::bf16, s.rows);
    for (size_t e = 0; e < want.dw.size(); ++e) {
      const double bound = tol.atol + tol.rtol * magnitude[e];
      ASSERT_LE(std::fabs(widen(got.dw[e]) - want.dw[e]), bound) << describe(s) << ", dw " << e;
    }
    const test::Tolerance sum_tol = test::tolerance(DType::f32, s.rows);
    for (size_t o = 0; o < want.db.size(); ++o) {
      const double bound = sum_tol.atol + sum_tol.rtol * db_magnitude[o];
      ASSERT_LE(std::fabs(double(got.db[o]) - want.db[o]), bound) << describe(s) << ", db " << o;
    }
  }
}

TEST(LinearWeightGrad, BitsDoNotDependOnTheThreadCountOrOnTheBias) {
  require_bf16_units();
  Philox rng(PhiloxState{13, 0, 0});
  for (const Shape3& s : shapes()) {
    const std::vector<uint16_t> dy = operand(size_t(s.rows * s.out), rng, false);
    const std::vector<uint16_t> x = operand(size_t(s.rows * s.in), rng, false);
    const Gradients one = run(s, dy, x, 1, true);
    for (int threads : {2, 3}) {
      const Gradients many = run(s, dy, x, threads, true);
      ASSERT_EQ(many.dw, one.dw) << describe(s) << ", " << threads << " threads";
      ASSERT_EQ(many.db, one.db) << describe(s) << ", " << threads << " threads";
    }
    const Gradients no_bias = run(s, dy, x, 2, false);
    ASSERT_EQ(no_bias.dw, one.dw) << describe(s) << ", without the bias";
    for (float v : no_bias.db) ASSERT_EQ(v, -1.0f) << describe(s) << ": db written without a bias";
  }
}

// An fp32 dw holds the bf16 dw's values, widened, bit for bit, whatever the thread count: from
// the tiles' own store (one block of rows, in a whole number of vectors: {64, 784, 65},
// {300, 48, 384}) and from the rounding pass after the blocks (the others).
TEST(LinearWeightGrad, Fp32GradientsAreTheBf16OnesWidened) {
  require_bf16_units();
  Philox rng(PhiloxState{14, 0, 0});
  std::vector<Shape3> all = shapes();
  all.push_back({64, 1024, 1024});  // the mlp's second layer
  for (const Shape3& s : all) {
    const std::vector<uint16_t> dy = operand(size_t(s.rows * s.out), rng, false);
    const std::vector<uint16_t> x = operand(size_t(s.rows * s.in), rng, false);
    const Gradients narrow = run(s, dy, x, 1, true);
    for (int threads : {1, 2, 3}) {
      std::vector<float> db(size_t(s.out), -1.0f);
      const std::vector<float> wide = run_wide(s, dy, x, threads, &db);
      for (size_t e = 0; e < wide.size(); ++e) {
        ASSERT_EQ(wide[e], float(bfloat16::from_bits(narrow.dw[e])))
            << describe(s) << ", element " << e << ", " << threads << " threads";
      }
      ASSERT_EQ(db, narrow.db) << describe(s) << ", " << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace mixp
