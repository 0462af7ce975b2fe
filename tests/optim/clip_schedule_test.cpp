// clip_grad_norm and the learning-rate schedules.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "mixp/error.h"
#include "mixp/optim/clip_grad.h"
#include "mixp/optim/lr_schedule.h"
#include "optim/optim_test_util.h"
#include "support/tolerance.h"

namespace mixp {
namespace {

bool within(double got, double want, test::Tolerance tol) {
  return std::fabs(got - want) <= tol.atol + tol.rtol * std::fabs(want);
}

// ---- clip_grad_norm ----

TEST(ClipGradNorm, ReturnsTheTotalNormAndScalesAboveMaxNorm) {
  Tensor a = test::parameter({0, 0}, DType::f32);
  Tensor b = test::parameter({0}, DType::f32);
  Tensor none = test::parameter({5}, DType::f32);  // no gradient: skipped
  test::set_grad(a, {3.0, 4.0}, DType::f32);
  test::set_grad(b, {-12.0}, DType::f32);
  const double norm = optim::clip_grad_norm({a, b, none}, 6.5);
  EXPECT_EQ(norm, 13.0);
  const double factor = 6.5 / (13.0 + 1e-6);
  const test::Tolerance tol = test::tolerance(DType::f32);
  const std::vector<double> ga = a.grad().to_vector(), gb = b.grad().to_vector();
  EXPECT_TRUE(within(ga[0], 3.0 * factor, tol)) << ga[0];
  EXPECT_TRUE(within(ga[1], 4.0 * factor, tol)) << ga[1];
  EXPECT_TRUE(within(gb[0], -12.0 * factor, tol)) << gb[0];
  EXPECT_FALSE(none.grad().defined());
  // The clipped gradients have norm max_norm (up to the 1e-6).
  EXPECT_TRUE(within(optim::clip_grad_norm({a, b}, 1e9), 6.5, test::tolerance(DType::f32, 3)));
}

// Gradients cut into pieces at multiples of kGradNormChunk (as ZeRO shards them) give, put
// together in order, clip_grad_norm's norm and scaled gradients, bit for bit.
TEST(ClipGradNorm, PiecesAtChunkBoundariesGiveTheSameNormAndScaling) {
  const int64_t n = 2 * optim::kGradNormChunk + 777;
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[size_t(i)] = std::sin(double(i) * 0.37) * 0.01;
  Tensor whole = from_values(values, {n}).set_requires_grad(true);
  Tensor small = from_values({0.5, -2.0, 3.0}, {3}).set_requires_grad(true);
  whole.set_grad(from_values(values, {n}));
  small.set_grad(from_values({0.5, -2.0, 3.0}, {3}));
  Tensor whole_copy = whole.grad().clone(), small_copy = small.grad().clone();
  const double norm = optim::clip_grad_norm({whole, small}, 1.0);
  // The same gradients in pieces: [0, chunk), [chunk, n) and the small one.
  const int64_t cut = optim::kGradNormChunk;
  std::vector<Tensor> pieces{whole_copy.slice(0, cut), whole_copy.slice(cut, n), small_copy};
  std::vector<double> squares_of_whole;
  for (size_t k = 0; k < 2; ++k)
    for (double c : optim::chunk_squares(pieces[k], false)) squares_of_whole.push_back(c);
  const double pieced = optim::norm_from_chunk_squares(
      {squares_of_whole, optim::chunk_squares(pieces[2], false)}, false);
  EXPECT_EQ(pieced, norm);
  optim::scale_to_norm(pieces, pieced, 1.0);
  EXPECT_EQ(whole_copy.to_vector(), whole.grad().to_vector());
  EXPECT_EQ(small_copy.to_vector(), small.grad().to_vector());
}

TEST(ClipGradNorm, LeavesGradientsAloneBelowMaxNorm) {
  Tensor a = test::parameter({0, 0}, DType::f32);
  test::set_grad(a, {0.3, 0.4}, DType::f32);
  const std::vector<double> before = a.grad().to_vector();
  const double norm = optim::clip_grad_norm({a}, 1.0);
  EXPECT_TRUE(within(norm, 0.5, test::tolerance(DType::f32, 2)));
  EXPECT_EQ(a.grad().to_vector(), before);
}

TEST(ClipGradNorm, NonFiniteNormIsReturnedAndGradientsAreUnchanged) {
  for (double bad : {double(INFINITY), double(NAN)}) {
    Tensor a = test::parameter({0, 0}, DType::f32);
    Tensor b = test::parameter({0}, DType::bf16);
    test::set_grad(a, {3.0, bad}, DType::f32);
    test::set_grad(b, {100.0}, DType::bf16);
    const std::vector<double> ga = a.grad().to_vector(), gb = b.grad().to_vector();
    const double norm = optim::clip_grad_norm({a, b}, 1.0);
    if (std::isnan(bad)) {
      EXPECT_TRUE(std::isnan(norm));
    } else {
      EXPECT_EQ(norm, INFINITY);
    }
    EXPECT_EQ(b.grad().to_vector(), gb);
    EXPECT_EQ(a.grad().to_vector()[0], ga[0]);
  }
}

TEST(ClipGradNorm, SquaresThatOverflowFp32GiveAnInfiniteNorm) {
  Tensor a = test::parameter({0}, DType::f32);
  test::set_grad(a, {1e20}, DType::f32);  // 1e40 > fp32 max
  EXPECT_EQ(optim::clip_grad_norm({a}, 1.0), INFINITY);
  EXPECT_EQ(a.grad().item(), double(1e20f));
}

TEST(ClipGradNorm, AccumulatesInFp32ForLowPrecisionAndF64ForF64) {
  // 10000 bf16 gradients of 0.01 (bf16 0.01000213623046875): an fp32 sum of squares, not a
  // bf16 one, which would stall at 256 * ulp.
  const size_t n = 10000;
  Tensor p = test::parameter(std::vector<double>(n, 0.0), DType::bf16);
  const std::vector<double> stored = test::set_grad(p, std::vector<double>(n, 0.01), DType::bf16);
  const double want = std::sqrt(double(n)) * stored[0];
  EXPECT_TRUE(within(optim::clip_grad_norm({p}, 1e9), want, test::tolerance(DType::f32, 100)));
  // f64: 1 + 1e-12 is lost in fp32 but not in f64.
  Tensor q = test::parameter({0, 0}, DType::f64);
  test::set_grad(q, {1.0, 1e-6}, DType::f64);
  const double norm = optim::clip_grad_norm({q}, 1e9);
  EXPECT_TRUE(within(norm, std::sqrt(1.0 + 1e-12), test::tolerance(DType::f64, 2)));
  EXPECT_NE(norm, 1.0);
  // Scaling an f64 gradient happens in f64.
  optim::clip_grad_norm({q}, 0.5);
  EXPECT_TRUE(
      within(q.grad().to_vector()[1], 1e-6 * 0.5 / (norm + 1e-6), test::tolerance(DType::f64, 2)));
}

TEST(ClipGradNorm, BadMaxNormIsAnError) {
  Tensor a = test::parameter({0}, DType::f32);
  try {
    optim::clip_grad_norm({a}, -1.5);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("-1.5"), std::string::npos) << e.message();
  }
  EXPECT_THROW(optim::clip_grad_norm({a}, NAN), Error);
}

// ---- schedules ----

TEST(LrSchedule, ConstantIsConstant) {
  const optim::ConstantLr s(0.25);
  EXPECT_EQ(s.lr(0), 0.25);
  EXPECT_EQ(s.lr(1000000), 0.25);
  EXPECT_THROW(optim::ConstantLr(-1.0), Error);
}

TEST(LrSchedule, WarmupThenCosineAtKeySteps) {
  const optim::WarmupCosineLr s(
      {.peak_lr = 1.0, .min_lr = 0.1, .warmup_steps = 10, .total_steps = 110});
  const test::Tolerance tol = test::tolerance(DType::f64);
  EXPECT_TRUE(within(s.lr(0), 0.1, tol));  // 1 / 10 of the peak
  EXPECT_TRUE(within(s.lr(4), 0.5, tol));
  EXPECT_EQ(s.lr(9), 1.0);                   // the peak, at the end of the warmup
  EXPECT_EQ(s.lr(10), 1.0);                  // the cosine starts at the peak
  EXPECT_TRUE(within(s.lr(60), 0.55, tol));  // halfway: the mean of peak and min
  EXPECT_TRUE(within(s.lr(35), 0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi / 4)), tol));
  EXPECT_EQ(s.lr(110), 0.1);
  EXPECT_EQ(s.lr(5000), 0.1);
  for (int64_t t = 10; t < 110; ++t) EXPECT_LE(s.lr(t + 1), s.lr(t)) << t;
}

TEST(LrSchedule, NoWarmupStartsAtThePeak) {
  const optim::WarmupCosineLr s({.peak_lr = 2.0, .warmup_steps = 0, .total_steps = 4});
  EXPECT_EQ(s.lr(0), 2.0);
  EXPECT_TRUE(within(s.lr(2), 1.0, test::tolerance(DType::f64)));
  EXPECT_EQ(s.lr(4), 0.0);
}

TEST(LrSchedule, BadOptionsAreErrorsWithTheValue) {
  auto message = [](const optim::WarmupCosineOptions& o) {
    try {
      optim::WarmupCosineLr s(o);
    } catch (const Error& e) {
      return e.message();
    }
    return std::string("no error");
  };
  EXPECT_NE(message({.peak_lr = -0.5}).find("-0.5"), std::string::npos);
  EXPECT_NE(message({.peak_lr = 1.0, .min_lr = 2.5}).find("2.5"), std::string::npos);
  EXPECT_NE(message({.warmup_steps = -3}).find("-3"), std::string::npos);
  EXPECT_NE(message({.warmup_steps = 20, .total_steps = 7}).find("7"), std::string::npos);
  EXPECT_THROW(optim::WarmupCosineLr({}).lr(-1), Error);
}

}  // namespace
}  // namespace mixp
