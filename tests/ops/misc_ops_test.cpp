// embedding, dropout, cat / split / narrow and scaled_dot_product_attention: errors, exact
// properties and comparisons that the generic op cases (op_cases.cpp) do not cover.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <optional>
#include <string>

#include "mixp/autograd.h"
#include "mixp/cpu.h"
#include "mixp/error.h"
#include "mixp/float_types.h"
#include "mixp/memory.h"
#include "mixp/ops.h"
#include "mixp/runtime.h"
#include "support/tolerance.h"

namespace mixp {
namespace {

std::string error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.message();
  }
  return "no error";
}

// ---- embedding ----

TEST(Embedding, OutOfRangeIndexNamesPositionAndValue) {
  const Tensor w = zeros({5, 3});
  const std::string high = error_message([&] {
    ops::embedding(w, from_values({0, 7, 2}, {3}, DType::i64));
  });
  EXPECT_NE(high.find("index 7"), std::string::npos) << high;
  EXPECT_NE(high.find("position 1"), std::string::npos) << high;
  EXPECT_NE(high.find("5 rows"), std::string::npos) << high;
  const std::string negative = error_message([&] {
    ops::embedding(w, from_values({0, 1, 4, -1}, {2, 2}, DType::i64));
  });
  EXPECT_NE(negative.find("index -1"), std::string::npos) << negative;
  EXPECT_NE(negative.find("position 3"), std::string::npos) << negative;
  EXPECT_THROW(ops::embedding(w, from_values({0, 1}, {2}, DType::i32)), Error);
  EXPECT_THROW(ops::embedding(zeros({5}), from_values({0, 1}, {2}, DType::i64)), Error);
  EXPECT_THROW(ops::embedding(w, Tensor()), Error);
}

TEST(Embedding, GathersRowsAndSumsGradientsOfRepeatedIndices) {
  Tensor w = from_values({0, 1, 10, 11, 20, 21}, {3, 2}).set_requires_grad(true);
  const Tensor idx = from_values({2, 0, 2, 2}, {2, 2}, DType::i64);
  const Tensor y = ops::embedding(w, idx);
  ASSERT_EQ(y.shape(), (Shape{2, 2, 2}));
  ASSERT_EQ(y.dtype(), DType::f32);
  EXPECT_EQ(y.to_vector(), (std::vector<double>{20, 21, 0, 1, 20, 21, 20, 21}));
  y.backward(from_values({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}));
  EXPECT_EQ(w.grad().to_vector(), (std::vector<double>{3, 4, 0, 0, 13, 16}));
}

TEST(Embedding, Bf16GradientIsAccumulatedInFp32AndRoundedOnce) {
  // 1 + 3 * 2^-9 rounds to 1 + 2^-7 in bf16; adding 2^-9 to 1 three times in bf16 stays 1.
  for (bool reference : {false, true}) {
    std::optional<ReferenceMode> mode;
    if (reference) mode.emplace();
    Tensor w = zeros({2, 1}, DType::bf16).set_requires_grad(true);
    const Tensor y = ops::embedding(w, from_values({1, 1, 1, 1}, {4}, DType::i64));
    y.backward(from_values({1, 0x1p-9, 0x1p-9, 0x1p-9}, {4, 1}, DType::bf16));
    ASSERT_EQ(w.grad().dtype(), DType::bf16);
    EXPECT_EQ(w.grad().to_vector(), (std::vector<double>{0, 1 + 0x1p-7})) << reference;
  }
}

// ---- dropout ----

TEST(Dropout, KeepsEachElementIffItsPhiloxUniformIsAtLeastP) {
  const int64_t n = 100000;
  const double p = 0.3;
  const PhiloxState start{2024, 3, 10};
  Philox gen(start);
  Tensor x = ones({n}).set_requires_grad(true);
  const Tensor y = ops::dropout(x, p, gen);
  EXPECT_EQ(gen.state().offset, start.offset + uint64_t(n));
  ASSERT_EQ(y.shape(), x.shape());
  ASSERT_EQ(y.dtype(), DType::f32);
  const std::vector<double> v = y.to_vector();
  const double kept_value = double(float(1.0 / (1.0 - p)));
  int64_t kept = 0, mismatches = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool expect_kept = double(philox_word(start, uint64_t(i)) >> 8) * 0x1p-24 >= p;
    if (expect_kept != (v[size_t(i)] != 0.0)) ++mismatches;
    if (v[size_t(i)] != 0.0) {
      ++kept;
      if (v[size_t(i)] != kept_value) ++mismatches;
    }
  }
  EXPECT_EQ(mismatches, 0);
  // Binomial(n, 1 - p): within 5 standard deviations of its mean.
  const double mean = double(n) * (1.0 - p), sigma = std::sqrt(double(n) * p * (1.0 - p));
  EXPECT_LE(std::fabs(double(kept) - mean), 5.0 * sigma) << kept << " kept of " << n;
  // The gradient uses the same mask and scale: for x = 1 and g = 1 it equals y.
  y.backward(ones({n}));
  EXPECT_EQ(x.grad().to_vector(), v);
}

TEST(Dropout, ReproducibleAndIndependentOfThreadsAndOfSplitting) {
  const int64_t n = 70001, cut = 3333;  // cut and the start offset are not multiples of 4
  Philox data(PhiloxState{1, 0, 0});
  const Tensor x = randn({n}, data, 1.0, DType::bf16);
  const PhiloxState start{77, 5, 6};
  for (bool reference : {false, true}) {
    std::optional<ReferenceMode> mode;
    if (reference) mode.emplace();
    Philox a(start), b(start);
    const std::vector<double> whole = ops::dropout(x, 0.4, a).to_vector();
    EXPECT_EQ(ops::dropout(x, 0.4, b).to_vector(), whole);

    Philox pieces(start);
    std::vector<double> joined = ops::dropout(x.slice(0, cut), 0.4, pieces).to_vector();
    const std::vector<double> rest = ops::dropout(x.slice(cut, n), 0.4, pieces).to_vector();
    joined.insert(joined.end(), rest.begin(), rest.end());
    EXPECT_EQ(joined, whole);
    EXPECT_EQ(pieces.state(), a.state());

    const int threads = num_threads();
    set_num_threads(1);
    Philox single(start);
    const std::vector<double> one_thread = ops::dropout(x, 0.4, single).to_vector();
    set_num_threads(threads);
    EXPECT_EQ(one_thread, whole);
  }
  // Another offset draws another mask.
  Philox later(PhiloxState{77, 5, 7});
  Philox a(start);
  EXPECT_NE(ops::dropout(x, 0.4, later).to_vector(), ops::dropout(x, 0.4, a).to_vector());
}

TEST(Dropout, IdentityWhenNotTrainingOrPZeroAndChecksP) {
  const Tensor x = ones({10});
  Philox gen(PhiloxState{9, 0, 4});
  EXPECT_TRUE(ops::dropout(x, 0.5, gen, /*training=*/false).is_same(x));
  EXPECT_TRUE(ops::dropout(x, 0.0, gen).is_same(x));
  EXPECT_EQ(gen.state().offset, 4u);
  EXPECT_THROW(ops::dropout(x, 1.0, gen), Error);
  EXPECT_THROW(ops::dropout(x, -0.1, gen), Error);
  EXPECT_THROW(ops::dropout(x, NAN, gen), Error);
  EXPECT_THROW(ops::dropout(from_values({1}, {1}, DType::i64), 0.5, gen), Error);
}

// ---- cat, split, narrow ----

TEST(CatSplit, SplitThenCatRoundTripsOnEveryDim) {
  Philox rng(PhiloxState{3, 0, 0});
  const Tensor x = randn({5, 7, 3}, rng);
  for (int dim = 0; dim < 3; ++dim) {
    for (int64_t size : {1, 2, 3, 7}) {
      const std::vector<Tensor> chunks = ops::split(x, size, dim);
      const int64_t n = x.shape()[dim];
      ASSERT_EQ(int64_t(chunks.size()), (n + size - 1) / size) << dim << " " << size;
      for (size_t c = 0; c < chunks.size(); ++c) {
        Shape want = x.shape();
        want[dim] = std::min(size, n - int64_t(c) * size);
        EXPECT_EQ(chunks[c].shape(), want);
        EXPECT_EQ(chunks[c].to_vector(),
                  ops::narrow(x, dim, int64_t(c) * size, want[dim]).to_vector());
      }
      const Tensor back = ops::cat(chunks, dim - 3);
      ASSERT_EQ(back.shape(), x.shape());
      EXPECT_EQ(back.to_vector(), x.to_vector()) << dim << " " << size;
    }
  }
  // A dimension of size 0 splits into one empty chunk.
  const std::vector<Tensor> empty_chunks = ops::split(zeros({2, 0}), 4, 1);
  ASSERT_EQ(empty_chunks.size(), 1u);
  EXPECT_EQ(empty_chunks[0].shape(), (Shape{2, 0}));
  // Integer tensors are copied too.
  const Tensor tokens = from_values({1, 2, 3, 4, 5}, {5}, DType::i64);
  const std::vector<Tensor> parts = ops::split(tokens, 2, 0);
  EXPECT_EQ(ops::cat({parts[2], parts[0], parts[1]}, 0).to_vector(),
            (std::vector<double>{5, 1, 2, 3, 4}));
}

TEST(CatSplit, ErrorsNameTheProblem) {
  const Tensor a = zeros({2, 3}), b = zeros({2, 4}), h = zeros({2, 3}, DType::bf16);
  EXPECT_EQ(ops::cat({a, b}, 1).shape(), (Shape{2, 7}));
  const std::string dtype = error_message([&] { ops::cat({a, h}, 0); });
  EXPECT_NE(dtype.find("bf16"), std::string::npos) << dtype;
  EXPECT_NE(dtype.find("f32"), std::string::npos) << dtype;
  const std::string shape = error_message([&] { ops::cat({a, b}, 0); });
  EXPECT_NE(shape.find("[2, 4]"), std::string::npos) << shape;
  EXPECT_THROW(ops::cat({}, 0), Error);
  EXPECT_THROW(ops::cat({a, zeros({2, 3, 1})}, 0), Error);
  EXPECT_THROW(ops::cat({a}, 2), Error);
  EXPECT_THROW(ops::split(a, 0, 0), Error);
  EXPECT_THROW(ops::split(a, 1, 2), Error);
  EXPECT_THROW(ops::narrow(a, 1, 2, 2), Error);
  EXPECT_THROW(ops::narrow(a, 1, -1, 1), Error);
  EXPECT_THROW(ops::narrow(a, 0, 0, -1), Error);
  EXPECT_EQ(ops::narrow(a, 1, 3, 0).shape(), (Shape{2, 0}));
}

TEST(CatSplit, GradientsOfSplitOutputsLandInPlace) {
  Tensor x = from_values({0, 1, 2, 3, 4}, {5}).set_requires_grad(true);
  const std::vector<Tensor> c = ops::split(x, 2, 0);
  // Chunk 1 is unused: its part of the gradient is zero.
  ops::add(ops::sum(ops::mul_scalar(c[0], 2.0)), ops::sum(ops::mul_scalar(c[2], 3.0))).backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{2, 2, 0, 0, 3}));
}

// ---- split_heads ----

// The fused op against the composition it replaces, bit for bit, forward and backward, with
// k getting no gradient (its part of dqkv must be zeros).
TEST(SplitHeads, EqualsSplitReshapePermute) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    Philox rng(PhiloxState{4, 0, 0});
    const int64_t b = 2, t = 5, heads = 3, dh = 4, c = heads * dh;
    const Tensor x = randn({b, t, 3 * c}, rng, 1.0, dtype);
    const Tensor gq = randn({b, heads, t, dh}, rng, 1.0, dtype);
    const Tensor gv = randn({b, heads, t, dh}, rng, 1.0, dtype);
    Tensor fused_in = x.detach().set_requires_grad(true);
    Tensor composed_in = x.detach().set_requires_grad(true);
    const std::vector<Tensor> fused = ops::split_heads(fused_in, heads);
    std::vector<Tensor> composed;
    for (const Tensor& part : ops::split(composed_in, c, 2)) {
      composed.push_back(ops::permute(part.reshape({b, t, heads, dh}), {0, 2, 1, 3}));
    }
    ASSERT_EQ(fused.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(fused[i].shape(), Shape({b, heads, t, dh}));
      EXPECT_EQ(fused[i].dtype(), dtype);
      EXPECT_EQ(fused[i].to_vector(), composed[i].to_vector()) << "part " << i;
    }
    ops::add(ops::sum(ops::mul(fused[0], gq)), ops::sum(ops::mul(fused[2], gv))).backward();
    ops::add(ops::sum(ops::mul(composed[0], gq)), ops::sum(ops::mul(composed[2], gv))).backward();
    EXPECT_EQ(fused_in.grad().to_vector(), composed_in.grad().to_vector()) << name_of(dtype);
    const std::vector<double> dk = ops::narrow(fused_in.grad(), 2, c, c).to_vector();
    for (double v : dk) ASSERT_EQ(v, 0.0);
  }
}

TEST(SplitHeads, ShapeErrorsNameTheSizes) {
  EXPECT_NE(error_message([] {
              ops::split_heads(zeros({2, 4, 10}), 2);
            }).find("[2, 4, 10]"),
            std::string::npos);
  EXPECT_NE(error_message([] {
              ops::split_heads(zeros({2, 4, 12}), 3);
            }).find("3 heads do not divide the width C = 4"),
            std::string::npos);
  EXPECT_NE(error_message([] {
              ops::split_heads(zeros({4, 12}), 1);
            }).find("[B, T, 3C]"),
            std::string::npos);
}

// ---- scaled_dot_product_attention ----

// Sets positions t of dimension 2 of a [B, H, T, Dh] f32 tensor to `value`.
void overwrite_position(Tensor& x, int64_t t, float value) {
  float* p = x.data<float>();
  const int64_t rows = x.shape()[0] * x.shape()[1], steps = x.shape()[2], dh = x.shape()[3];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < dh; ++c) p[(r * steps + t) * dh + c] = value;
  }
}

TEST(Attention, CausalOutputsIgnoreFuturePositions) {
  Philox rng(PhiloxState{12, 0, 0});
  const Shape s{2, 2, 6, 4};
  const Tensor q = randn(s, rng), k = randn(s, rng), v = randn(s, rng);
  Tensor k2 = k.clone(), v2 = v.clone();
  overwrite_position(k2, 4, 3.0f);
  overwrite_position(v2, 4, -5.0f);
  for (bool reference : {false, true}) {
    std::optional<ReferenceMode> mode;
    if (reference) mode.emplace();
    for (bool causal : {true, false}) {
      const std::vector<double> a = ops::scaled_dot_product_attention(q, k, v, causal).to_vector(),
                                b = ops::scaled_dot_product_attention(q, k2, v2, causal)
                                        .to_vector();
      int64_t earlier_changed = 0, later_changed = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        const int64_t t = int64_t(i / 4) % 6;
        if (a[i] != b[i]) ++(t < 4 ? earlier_changed : later_changed);
      }
      EXPECT_GT(later_changed, 0) << reference << causal;
      if (causal) {
        EXPECT_EQ(earlier_changed, 0) << reference;
      } else {
        EXPECT_GT(earlier_changed, 0) << reference;
      }
    }
  }
}

// The same attention composed of existing ops, with -inf added above the diagonal.
Tensor composed_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
  const int64_t t = q.shape()[2];
  std::vector<double> mask(static_cast<size_t>(t * t), 0.0);
  for (int64_t i = 0; i < t; ++i) {
    for (int64_t j = i + 1; j < t; ++j) mask[size_t(i * t + j)] = causal ? -INFINITY : 0.0;
  }
  const Tensor scores = ops::mul_scalar(ops::matmul(q, ops::transpose(k, 2, 3)),
                                        1.0 / std::sqrt(double(q.shape()[3])));
  const Tensor p = ops::softmax(ops::add(scores, from_values(mask, {t, t}, DType::f64)), -1);
  return ops::matmul(p, v);
}

TEST(Attention, MatchesCompositionOfMatmulSoftmaxMulScalarInF64) {
  const Shape s{2, 3, 5, 4};
  for (bool reference : {false, true}) {
    std::optional<ReferenceMode> mode;
    if (reference) mode.emplace();
    for (bool causal : {true, false}) {
      Philox rng(PhiloxState{31, 0, 0});
      std::vector<Tensor> fused_in, composed_in;
      for (int i = 0; i < 3; ++i) {
        const Tensor t = randn(s, rng, 1.0, DType::f64);
        fused_in.push_back(t.clone().set_requires_grad(true));
        composed_in.push_back(t.clone().set_requires_grad(true));
      }
      const Tensor g = randn(s, rng, 1.0, DType::f64);
      const Tensor fused =
          ops::scaled_dot_product_attention(fused_in[0], fused_in[1], fused_in[2], causal);
      const Tensor composed =
          composed_attention(composed_in[0], composed_in[1], composed_in[2], causal);
      ASSERT_EQ(fused.shape(), s);
      ASSERT_EQ(fused.dtype(), DType::f64);
      const test::Tolerance tol = test::tolerance(DType::f64, 20);
      EXPECT_EQ(test::compare(fused, composed, tol), "") << reference << causal;
      fused.backward(g);
      composed.backward(g);
      for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(test::compare(fused_in[size_t(i)].grad(), composed_in[size_t(i)].grad(), tol), "")
            << "input " << i << " reference " << reference << " causal " << causal;
      }
    }
  }
}

TEST(Attention, KeepsOnlyTheOutputAndOneLogSumExpPerRow) {
  Philox rng(PhiloxState{8, 0, 0});
  const Shape s{1, 2, 64, 8};
  Tensor q = randn(s, rng, 1.0, DType::bf16).set_requires_grad(true);
  const Tensor k = randn(s, rng, 1.0, DType::bf16), v = randn(s, rng, 1.0, DType::bf16);
  const int64_t before = memory::stats().current_total;
  Tensor y = ops::scaled_dot_product_attention(q, k, v);
  // The bf16 output and 2 * 64 fp32 log-sum-exps; not the 2 * 64 * 64 probabilities.
  EXPECT_EQ(memory::stats().current_total - before, 2 * 64 * 8 * 2 + 2 * 64 * 4);
  y.backward(ones(s, DType::bf16));
  EXPECT_EQ(q.grad().dtype(), DType::bf16);
}

TEST(Attention, LowPrecisionResultAndShapeErrors) {
  Philox rng(PhiloxState{5, 0, 0});
  const Shape s{1, 2, 3, 8};
  const Tensor q = randn(s, rng, 1.0, DType::bf16), k = randn(s, rng, 1.0, DType::bf16);
  const Tensor v = randn(s, rng, 1.0, DType::bf16);
  const Tensor y = ops::scaled_dot_product_attention(q, k, v);
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_EQ(y.shape(), s);
  // The first query sees only the first key: its output is the first value, rounded once.
  const std::vector<double> out = y.to_vector(), values = v.to_vector();
  for (size_t c = 0; c < 8; ++c) EXPECT_EQ(out[c], values[c]);
  EXPECT_THROW(ops::scaled_dot_product_attention(q, k, v.to(DType::f32)), Error);
  EXPECT_THROW(ops::scaled_dot_product_attention(q.reshape({2, 3, 8}), k, v), Error);
  EXPECT_THROW(ops::scaled_dot_product_attention(q, k.reshape({1, 2, 8, 3}), v), Error);
  EXPECT_THROW(ops::scaled_dot_product_attention(zeros({1, 1, 0, 4}), zeros({1, 1, 0, 4}),
                                                 zeros({1, 1, 0, 4})),
               Error);
}

// With bf16 inputs the products see P rounded once to bf16 (as PyTorch's autocast bf16
// matmuls do). Two keys whose values cancel make that visible through the bf16 output:
// query 1 sees keys 0 and 1 with probabilities p0 ~ 0.5025 and p1 ~ 0.4975, and v = [64, -64]
// gives 64 (p0 - p1) ~ 0.32, which rounding each p to bf16 moves to 0.375, 2.5 times the bf16
// tolerance. Likewise dV0 = dO0 + p0 dO1 = 32 - 64 p0. Fast and reference paths alike.
// Head size 1 takes the oneDNN path, 16 the tiled one (on AVX-512 BF16); each key's scaled
// score is the same for both.
TEST(Attention, Bf16ProductsSeeRoundedProbabilities) {
  for (int64_t dh : {1, 16}) {
    SCOPED_TRACE("head size " + std::to_string(dh));
    const Shape s{1, 1, 2, dh};
    auto rows = [&](double first, double second) {
      std::vector<double> x(size_t(2 * dh), first);
      std::fill(x.begin() + dh, x.end(), second);
      return from_values(x, s, DType::bf16);
    };
    const double root = std::sqrt(double(dh));
    const Tensor q = rows(0.0, 1.0), k = rows(0.01 / root, 0.0);
    const Tensor v = rows(64.0, -64.0), d_out = rows(32.0, -64.0);
    const double s0 = double(dh) * k.to_vector()[0] / root;  // q1 k0 / sqrt(Dh)
    const double p0 = std::exp(s0) / (std::exp(s0) + 1), p1 = 1 / (std::exp(s0) + 1);
    auto bf16 = [](double x) { return double(float(bfloat16(float(x)))); };
    const double out_rounded = bf16(64 * bf16(p0) - 64 * bf16(p1));
    const double out_exact = bf16(64 * (p0 - p1));
    const double dv0_rounded = bf16(32 - 64 * bf16(p0)), dv0_exact = bf16(32 - 64 * p0);
    const test::Tolerance tol = test::tolerance(DType::bf16, 2);
    auto near = [&](double got, double want) {
      return std::fabs(got - want) <= tol.atol + tol.rtol * std::fabs(want);
    };
    ASSERT_FALSE(near(out_exact, out_rounded));  // the case tells the two apart
    ASSERT_FALSE(near(dv0_exact, dv0_rounded));
    for (bool reference : {false, true}) {
      std::optional<ReferenceMode> mode;
      if (reference) mode.emplace();
      Tensor vg = v.detach().set_requires_grad(true);
      const Tensor y = ops::scaled_dot_product_attention(q, k, vg);
      y.backward(d_out);
      const double out1 = y.to_vector()[size_t(dh)], dv0 = vg.grad().to_vector()[0];
      EXPECT_TRUE(near(out1, out_rounded))
          << (reference ? "reference" : "fast") << ": " << out1 << " vs " << out_rounded
          << " (unrounded P: " << out_exact << ")";
      EXPECT_TRUE(near(dv0, dv0_rounded))
          << (reference ? "reference" : "fast") << ": " << dv0 << " vs " << dv0_rounded
          << " (unrounded P: " << dv0_exact << ")";
    }
  }
}

// ---- multi_head_attention ----

// qkv [2, 140, 192]: 2 heads of 32 (the tiled path on AVX-512 BF16), two blocks of query rows.
TEST(MultiHeadAttention, GivesTheBitsOfTheComposedOps) {
  Philox rng(PhiloxState{41, 0, 0});
  const Shape s{2, 140, 192};
  for (bool causal : {true, false}) {
    const Tensor x = randn(s, rng, 1.0, DType::bf16);
    const Tensor g = randn({2, 140, 64}, rng, 1.0, DType::bf16);
    Tensor a = x.clone().set_requires_grad(true), b = x.clone().set_requires_grad(true);
    const Tensor fused = ops::multi_head_attention(a, 2, causal);
    const std::vector<Tensor> heads = ops::split_heads(b, 2);
    const Tensor composed =
        ops::permute(ops::scaled_dot_product_attention(heads[0], heads[1], heads[2], causal),
                     {0, 2, 1, 3})
            .reshape({2, 140, 64});
    ASSERT_EQ(fused.dtype(), DType::bf16);
    EXPECT_EQ(fused.to_vector(), composed.to_vector()) << "causal " << causal;
    fused.backward(g);
    composed.backward(g);
    EXPECT_EQ(a.grad().to_vector(), b.grad().to_vector()) << "causal " << causal;
  }
}

// Where the tiled bf16 attention does not apply (other dtypes, a head size that is not a
// multiple of 16, a CPU limited below AVX-512 BF16), the heads are copied around the attention:
// still the composition's bits, forward and backward.
TEST(MultiHeadAttention, GivesTheComposedBitsWhereTheTiledPathDoesNotApply) {
  struct Case {
    DType dtype;
    int64_t width;  // 3C, with 2 heads
    std::optional<Isa> limit;
  };
  const Case cases[] = {{DType::f32, 96, std::nullopt},
                        {DType::f16, 96, std::nullopt},
                        {DType::f64, 42, std::nullopt},
                        {DType::bf16, 42, std::nullopt},
                        {DType::bf16, 96, Isa::avx2}};
  Philox rng(PhiloxState{43, 0, 0});
  for (const Case& c : cases) {
    std::optional<IsaLimit> limit;
    if (c.limit) limit.emplace(*c.limit);
    const Shape s{2, 37, c.width};
    const Tensor x = randn(s, rng, 1.0, c.dtype);
    const Tensor g = randn({2, 37, c.width / 3}, rng, 1.0, c.dtype);
    Tensor a = x.clone().set_requires_grad(true), b = x.clone().set_requires_grad(true);
    const Tensor fused = ops::multi_head_attention(a, 2, true);
    const std::vector<Tensor> heads = ops::split_heads(b, 2);
    const Tensor composed =
        ops::permute(ops::scaled_dot_product_attention(heads[0], heads[1], heads[2], true),
                     {0, 2, 1, 3})
            .reshape({2, 37, c.width / 3});
    const std::string what = std::string(name_of(c.dtype)) + " 3C " + std::to_string(c.width);
    ASSERT_EQ(fused.dtype(), c.dtype) << what;
    ASSERT_EQ(fused.shape(), composed.shape()) << what;
    EXPECT_EQ(fused.to_vector(), composed.to_vector()) << what;
    fused.backward(g);
    composed.backward(g);
    EXPECT_EQ(a.grad().to_vector(), b.grad().to_vector()) << what;
  }
}

TEST(MultiHeadAttention, KeepsNoCopyOfTheHeads) {
  if (best_isa() < Isa::avx512_bf16) GTEST_SKIP() << "the tiled path needs AVX-512 BF16";
  if (reference_mode()) GTEST_SKIP() << "the reference path copies the heads";
  Philox rng(PhiloxState{42, 0, 0});
  const Tensor x = randn({1, 64, 96}, rng, 1.0, DType::bf16).set_requires_grad(true);
  const int64_t before = memory::stats().current_total;
  const Tensor y = ops::multi_head_attention(x, 2);
  // The bf16 result [1, 64, 32] and one fp32 log-sum-exp per row of each head: no q, k and v.
  EXPECT_EQ(memory::stats().current_total - before, 64 * 32 * 2 + 2 * 64 * 4);
  y.backward(ones(y.shape(), DType::bf16));
  EXPECT_EQ(x.grad().dtype(), DType::bf16);
  EXPECT_EQ(x.grad().shape(), x.shape());
}

TEST(MultiHeadAttention, NamesBadShapes) {
  auto message = [](const Tensor& x, int64_t heads) {
    try {
      ops::multi_head_attention(x, heads);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(zeros({2, 3, 10}), 1).find("[B, T, 3C]"), std::string::npos);
  EXPECT_NE(message(zeros({2, 0, 12}), 1).find("at least 1"), std::string::npos);
  EXPECT_NE(message(zeros({6, 12}), 1).find("[6, 12]"), std::string::npos);
  EXPECT_NE(message(zeros({1, 2, 12}), 3).find("3 heads do not divide the width C = 4"),
            std::string::npos);
  EXPECT_NE(message(zeros({1, 2, 12}), 0).find("0 heads"), std::string::npos);
}

}  // namespace
}  // namespace mixp
