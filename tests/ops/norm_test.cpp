// layer_norm and batch_norm beyond the generic op tests: the running-stat update against an
// independent double-precision computation, fp32 running stats under bf16 inputs, evaluation
// with the running stats, mixed dtypes of input and affine parameters, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <optional>
#include <string>

#include "mixp/autograd.h"
#include "mixp/error.h"
#include "mixp/ops.h"
#include "mixp/runtime.h"
#include "support/tolerance.h"

namespace mixp {
namespace {

// Per-channel statistics of x [N, C, ...] in double, from its (already rounded) values.
struct ChannelStats {
  std::vector<double> mean, biased_var, unbiased_var;
};

ChannelStats channel_stats(const Tensor& x) {
  const std::vector<double> v = x.to_vector();
  const int64_t n = x.size(0), c = x.size(1), s = x.numel() / (n * c);
  ChannelStats st;
  for (int64_t ch = 0; ch < c; ++ch) {
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t k = 0; k < s; ++k) total += v[size_t((i * c + ch) * s + k)];
    }
    const double m = total / double(n * s);
    double sq = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t k = 0; k < s; ++k) {
        const double d = v[size_t((i * c + ch) * s + k)] - m;
        sq += d * d;
      }
    }
    st.mean.push_back(m);
    st.biased_var.push_back(sq / double(n * s));
    st.unbiased_var.push_back(sq / double(n * s - 1));
  }
  return st;
}

Tensor f32_tensor(const std::vector<double>& values) {
  return from_values(values, {int64_t(values.size())}, DType::f32);
}

// (x - mean[c]) / sqrt(var[c] + eps) * w[c] + b[c] in double, rounded once to `dtype`.
Tensor normalized(const Tensor& x, const std::vector<double>& mean, const std::vector<double>& var,
                  const std::vector<double>& w, const std::vector<double>& b, double eps,
                  DType dtype) {
  const std::vector<double> v = x.to_vector();
  const int64_t n = x.size(0), c = x.size(1), s = x.numel() / (n * c);
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const size_t ch = size_t((int64_t(i) / s) % c);
    out[i] = (v[i] - mean[ch]) / std::sqrt(var[ch] + eps) * w[ch] + b[ch];
  }
  return from_values(out, x.shape(), dtype);
}

void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no mixp::Error thrown; expected one mentioning " << parts[0];
  } catch (const Error& e) {
    const std::string message = e.message();
    EXPECT_FALSE(e.is_internal()) << message;
    for (const std::string& p : parts) {
      EXPECT_NE(message.find(p), std::string::npos) << "'" << p << "' missing from: " << message;
    }
  }
}

class BatchNormModes : public ::testing::TestWithParam<bool> {};  // true: reference kernels

TEST_P(BatchNormModes, TrainingUpdatesRunningStatsLikePyTorch) {
  std::optional<ReferenceMode> reference;
  if (GetParam()) reference.emplace();
  Philox rng(PhiloxState{3, 0, 0});
  const Tensor x = randn({6, 4, 3, 2}, rng, 2.0, DType::f32);
  const Tensor w = randn({4}, rng), b = randn({4}, rng);
  const std::vector<double> mean0 = {0.5, -1.0, 0.0, 2.0}, var0 = {1.0, 0.25, 3.0, 0.5};
  Tensor running_mean = f32_tensor(mean0), running_var = f32_tensor(var0);
  const double momentum = 0.3, eps = 1e-3;
  const Tensor y = ops::batch_norm(x, w, b, running_mean, running_var, true, momentum, eps);

  const ChannelStats st = channel_stats(x);
  std::vector<double> want_mean, want_var;
  for (size_t c = 0; c < 4; ++c) {
    want_mean.push_back((1 - momentum) * mean0[c] + momentum * st.mean[c]);
    want_var.push_back((1 - momentum) * var0[c] + momentum * st.unbiased_var[c]);
  }
  const test::Tolerance tol = test::tolerance(DType::f32, 36);
  ASSERT_EQ(running_mean.dtype(), DType::f32);
  ASSERT_EQ(running_var.dtype(), DType::f32);
  EXPECT_EQ(test::compare(running_mean, f32_tensor(want_mean), tol), "");
  EXPECT_EQ(test::compare(running_var, f32_tensor(want_var), tol), "");
  // The output normalizes with the biased batch variance.
  ASSERT_EQ(y.dtype(), DType::f32);
  ASSERT_EQ(y.shape(), x.shape());
  EXPECT_EQ(
      test::compare(
          y, normalized(x, st.mean, st.biased_var, w.to_vector(), b.to_vector(), eps, DType::f32),
          tol),
      "");
}

TEST_P(BatchNormModes, RunningStatsStayF32ForBf16Input) {
  std::optional<ReferenceMode> reference;
  if (GetParam()) reference.emplace();
  Philox rng(PhiloxState{4, 0, 0});
  const Tensor x = randn({5, 3, 4, 4}, rng, 1.5, DType::bf16).set_requires_grad(true);
  Tensor running_mean = zeros({3}), running_var = ones({3});
  const Tensor y = ops::batch_norm(x, Tensor(), Tensor(), running_mean, running_var, true);
  ASSERT_EQ(y.dtype(), DType::bf16);
  ASSERT_EQ(running_mean.dtype(), DType::f32);
  ASSERT_EQ(running_var.dtype(), DType::f32);
  EXPECT_EQ(running_mean.nbytes(), 3 * sizeof(float));
  // The update is not part of the graph: the running stats stay leaves without gradients.
  EXPECT_FALSE(running_mean.requires_grad());
  EXPECT_FALSE(running_var.requires_grad());
  EXPECT_EQ(running_mean.grad_fn(), nullptr);

  const ChannelStats st = channel_stats(x);  // from the bf16 values, in double
  std::vector<double> want_mean, want_var;
  for (size_t c = 0; c < 3; ++c) {
    want_mean.push_back(0.1 * st.mean[c]);
    want_var.push_back(0.9 + 0.1 * st.unbiased_var[c]);
  }
  const test::Tolerance tol = test::tolerance(DType::f32, 80);
  EXPECT_EQ(test::compare(running_mean, f32_tensor(want_mean), tol), "");
  EXPECT_EQ(test::compare(running_var, f32_tensor(want_var), tol), "");

  ops::sum(y.to(DType::f32)).backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().dtype(), DType::bf16);
  EXPECT_FALSE(running_mean.grad().defined());
}

TEST_P(BatchNormModes, EvaluationUsesRunningStatsAndLeavesThemAlone) {
  std::optional<ReferenceMode> reference;
  if (GetParam()) reference.emplace();
  Philox rng(PhiloxState{5, 0, 0});
  const Tensor x = randn({4, 3, 2, 3}, rng, 1.0, DType::f32);
  const Tensor w = randn({3}, rng), b = randn({3}, rng);
  const std::vector<double> mean0 = {0.75, -0.5, 0.125}, var0 = {2.0, 0.5, 1.25};
  Tensor running_mean = f32_tensor(mean0), running_var = f32_tensor(var0);
  const Tensor y = ops::batch_norm(x, w, b, running_mean, running_var, false);
  EXPECT_EQ(running_mean.to_vector(), mean0);
  EXPECT_EQ(running_var.to_vector(), var0);
  EXPECT_EQ(
      test::compare(y, normalized(x, mean0, var0, w.to_vector(), b.to_vector(), 1e-5, DType::f32),
                    test::tolerance(DType::f32)),
      "");
  // Not the batch statistics: those give a different result.
  const ChannelStats st = channel_stats(x);
  EXPECT_NE(
      test::compare(
          y, normalized(x, st.mean, st.biased_var, w.to_vector(), b.to_vector(), 1e-5, DType::f32),
          test::tolerance(DType::f32)),
      "");
}

INSTANTIATE_TEST_SUITE_P(FastAndReference, BatchNormModes, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "reference" : "fast"; });

TEST(BatchNorm, EvaluationGradientIsTheAffineOne) {
  const Tensor x = from_values({1.0, 2.0, -1.0, 0.5}, {2, 2}).set_requires_grad(true);
  const Tensor w = from_values({2.0, -3.0}, {2}).set_requires_grad(true);
  const Tensor b = from_values({0.5, 1.0}, {2}).set_requires_grad(true);
  Tensor running_mean = f32_tensor({0.5, -0.5}), running_var = f32_tensor({3.0, 0.0});
  const Tensor y = ops::batch_norm(x, w, b, running_mean, running_var, false, 0.1, 1.0);
  ops::sum(y).backward();
  // dx = w / sqrt(var + eps), dweight = sum of xhat, dbias = number of rows.
  const test::Tolerance tol = test::tolerance(DType::f32, 2);
  EXPECT_EQ(test::compare(x.grad(), from_values({1.0, -3.0, 1.0, -3.0}, {2, 2}), tol), "");
  EXPECT_EQ(test::compare(w.grad(), f32_tensor({(0.5 - 1.5) / 2.0, (2.5 + 1.0) / 1.0}), tol), "");
  EXPECT_EQ(test::compare(b.grad(), f32_tensor({2.0, 2.0}), tol), "");
}

TEST(LayerNorm, MatchesDoubleWithF32AffineOnBf16Input) {
  for (bool ref : {false, true}) {
    std::optional<ReferenceMode> reference;
    if (ref) reference.emplace();
    Philox rng(PhiloxState{6, 0, 0});
    const Tensor x = randn({3, 5, 24}, rng, 1.0, DType::bf16).set_requires_grad(true);
    const Tensor w = randn({24}, rng, 1.0, DType::f32).set_requires_grad(true);
    const Tensor b = randn({24}, rng, 1.0, DType::f32).set_requires_grad(true);
    const Tensor y = ops::layer_norm(x, w, b, 1e-5);
    ASSERT_EQ(y.dtype(), DType::bf16);
    ASSERT_EQ(y.shape(), x.shape());
    const std::vector<double> xv = x.to_vector(), wv = w.to_vector(), bv = b.to_vector();
    std::vector<double> want(xv.size());
    for (size_t r = 0; r < 15; ++r) {
      double m = 0, sq = 0;
      for (size_t j = 0; j < 24; ++j) m += xv[r * 24 + j];
      m /= 24;
      for (size_t j = 0; j < 24; ++j) sq += (xv[r * 24 + j] - m) * (xv[r * 24 + j] - m);
      const double rs = 1 / std::sqrt(sq / 24 + 1e-5);
      for (size_t j = 0; j < 24; ++j) want[r * 24 + j] = (xv[r * 24 + j] - m) * rs * wv[j] + bv[j];
    }
    EXPECT_EQ(test::compare(y, from_values(want, x.shape(), DType::bf16),
                            test::tolerance(DType::bf16, 24)),
              "")
        << (ref ? "reference" : "fast");
    ops::sum(y.to(DType::f32)).backward();
    ASSERT_EQ(x.grad().dtype(), DType::bf16);
    ASSERT_EQ(w.grad().dtype(), DType::f32);
    ASSERT_EQ(b.grad().dtype(), DType::f32);
    // With g = 1 everywhere, dbias is the number of rows.
    EXPECT_EQ(test::compare(b.grad(), full({24}, 15.0), test::tolerance(DType::f32, 15)), "");
  }
}

// An f32 input with out_dtype bf16 or f16: the fp32 result rounded once, and the gradients of the
// narrow result read as they are: the same bits as layer_norm(...).to(dtype), whose cast widens
// the gradient exactly, fast and reference.
TEST(LayerNorm, NarrowOutDtypeIsTheFp32ResultRoundedOnce) {
  Philox rng(PhiloxState{31, 0, 0});
  for (DType narrow : {DType::bf16, DType::f16}) {
    for (bool reference : {false, true}) {
      SCOPED_TRACE(std::string(name_of(narrow)) + (reference ? " reference" : " fast"));
      std::optional<ReferenceMode> mode;
      if (reference) mode.emplace();
      Tensor x = randn({3, 5, 70}, rng).set_requires_grad(true);
      Tensor w = randn({70}, rng).set_requires_grad(true);
      Tensor b = randn({70}, rng).set_requires_grad(true);
      const Tensor g = randn({3, 5, 70}, rng, 1.0, narrow);
      const Tensor direct = ops::layer_norm(x, w, b, 1e-5, narrow);
      EXPECT_EQ(direct.dtype(), narrow);
      direct.backward(g);
      const std::vector<double> dx = x.grad().to_vector(), dw = w.grad().to_vector(),
                                db = b.grad().to_vector();
      for (Tensor* t : {&x, &w, &b}) t->set_grad(Tensor());
      const Tensor cast = ops::layer_norm(x, w, b, 1e-5).to(narrow);
      cast.backward(g);
      EXPECT_EQ(direct.to_vector(), cast.to_vector());
      EXPECT_EQ(dx, x.grad().to_vector());
      EXPECT_EQ(dw, w.grad().to_vector());
      EXPECT_EQ(db, b.grad().to_vector());
    }
  }
  const Tensor x16 = randn({2, 4}, rng, 1.0, DType::bf16);
  EXPECT_THROW(ops::layer_norm(x16, Tensor(), Tensor(), 1e-5, DType::f32), Error);
  EXPECT_THROW(
      ops::layer_norm(randn({2, 4}, rng, 1.0, DType::f64), Tensor(), Tensor(), 1e-5, DType::bf16),
      Error);
  EXPECT_EQ(ops::layer_norm(x16, Tensor(), Tensor(), 1e-5, DType::bf16).dtype(), DType::bf16);
}

TEST(LayerNorm, BadShapesNameTheOpAndShapes) {
  const Tensor x = zeros({4, 7});
  expect_error([&] { ops::layer_norm(x, zeros({6}), Tensor()); },
               {"layer_norm", "weight", "[4, 7]", "[6]"});
  expect_error(
      [&] {
        ops::layer_norm(x, Tensor(), zeros({7, 1}));
      },
      {"layer_norm", "bias", "[4, 7]", "[7, 1]"});
  expect_error(
      [&] {
        ops::layer_norm(empty({4, 0}), Tensor(), Tensor());
      },
      {"layer_norm", "[4, 0]"});
  expect_error(
      [&] {
        ops::layer_norm(zeros({4, 7}, DType::i64), Tensor(), Tensor());
      },
      {"layer_norm", "i64"});
}

TEST(BatchNorm, BadShapesNameTheOpAndShapes) {
  const Tensor x = zeros({4, 3, 2, 2});
  Tensor rm = zeros({3}), rv = ones({3}), none;
  expect_error([&] { ops::batch_norm(zeros({5}), Tensor(), Tensor(), rm, rv, true); },
               {"batch_norm", "[5]"});
  expect_error([&] { ops::batch_norm(x, zeros({4}), Tensor(), rm, rv, true); },
               {"batch_norm", "weight", "[4, 3, 2, 2]", "[4]"});
  expect_error(
      [&] {
        ops::batch_norm(x, Tensor(), zeros({3, 1}), rm, rv, true);
      },
      {"batch_norm", "bias", "[4, 3, 2, 2]", "[3, 1]"});
  Tensor short_mean = zeros({2});
  expect_error([&] { ops::batch_norm(x, Tensor(), Tensor(), short_mean, rv, true); },
               {"batch_norm", "running_mean", "[4, 3, 2, 2]", "[2]"});
  Tensor bf16_var = ones({3}, DType::bf16);
  expect_error([&] { ops::batch_norm(x, Tensor(), Tensor(), rm, bf16_var, true); },
               {"batch_norm", "running_var", "f32", "bf16"});
  expect_error([&] { ops::batch_norm(x, Tensor(), Tensor(), none, none, false); },
               {"batch_norm", "evaluation", "running_mean", "[4, 3, 2, 2]"});
  expect_error(
      [&] {
        ops::batch_norm(zeros({1, 3}), Tensor(), Tensor(), rm, rv, true);
      },
      {"batch_norm", "more than one value per channel", "[1, 3]"});
  // A failed call leaves the running stats as they were.
  EXPECT_EQ(rm.to_vector(), std::vector<double>(3, 0.0));
  EXPECT_EQ(rv.to_vector(), std::vector<double>(3, 1.0));
}

}  // namespace
}  // namespace mixp
