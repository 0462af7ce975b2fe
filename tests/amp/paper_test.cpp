// The findings of Micikevicius et al., "Mixed Precision Training" (ICLR 2018), reproduced on
// small deterministic problems: loss scaling rescues gradients that fp16 flushes to zero, fp32
// master weights keep updates that fp16 weights lose, stochastic rounding keeps bf16 weights
// moving, and an overflowing step is skipped without touching any state.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "mixp/amp/autocast.h"
#include "mixp/amp/grad_scaler.h"
#include "mixp/amp/presets.h"
#include "mixp/autograd.h"
#include "mixp/data/dataset.h"
#include "mixp/error.h"
#include "mixp/nn/models.h"
#include "mixp/ops.h"
#include "mixp/optim/adam.h"
#include "mixp/optim/sgd.h"
#include "mixp/train/trainer.h"

namespace mixp {
namespace {

std::vector<uint8_t> bytes_of(const Tensor& t) {
  std::vector<uint8_t> b(t.nbytes());
  if (!b.empty()) std::memcpy(b.data(), t.raw_data(), b.size());
  return b;
}

double zero_fraction(const std::vector<Tensor>& params) {
  int64_t zeros_count = 0, total = 0;
  for (const Tensor& p : params) {
    const std::vector<double> g = p.grad().to_vector();
    for (double v : g) zeros_count += v == 0.0;
    total += int64_t(g.size());
  }
  return double(zeros_count) / double(total);
}
double zero_fraction(const Tensor& p) { return zero_fraction(std::vector<Tensor>{p}); }

// ---- loss scaling ----
// The library's deep-mlp (mixp/nn/models.h) on its synthetic regression, the same model and
// data `mixp inspect --model deep-mlp` measures (tests/train/inspect_test.cpp): a 3-layer tanh
// MLP whose output layer starts tiny (weights about 1e-5) and whose targets are tiny (about
// 1e-4), so that the gradient of the mean squared error, 2 (y - t) / (N * 8), is about 1e-8
// at the output and far less below it, under fp16's smallest subnormal (2^-24 = 6e-8).
struct TinyGradientProblem {
  static constexpr uint64_t kSeed = 2018;
  data::Regression data = data::make_tiny_gradient_regression(kSeed);
  nn::ModelConfig config{.name = "deep-mlp", .layers = 2, .width = 64};

  std::unique_ptr<nn::Model> fresh_model() const { return nn::make_model(config, kSeed); }
  Tensor loss(nn::Model& model) const {
    return train::task_loss(model.forward(data.train_x), data.train_y, nn::Task::regression);
  }
};
struct RunResult {
  double initial_loss = 0, final_loss = 0;
  double zero_gradients = 0;         // all parameters, first step
  double zero_output_gradients = 0;  // the output layer, which does the learning
  int skipped = 0;
  double final_scale = 1;
  std::vector<amp::ScaleChangeRecord> scale_log;
};

RunResult train(const TinyGradientProblem& problem, const amp::Preset& preset,
                const amp::GradScalerOptions& scaling, int steps) {
  const std::unique_ptr<nn::Model> model = problem.fresh_model();
  const std::vector<Tensor> w = model->parameters();  // fc1, fc2, fc3 (the output layer)
  // The curvature of the loss in the output weights is about 2 / 8 * E[h2^2], so SGD with a
  // step of a few units fits them in tens of steps; the hidden weights barely move.
  optim::Sgd opt(w, {.lr = 4.0, .momentum = 0.5});
  amp::GradScaler scaler(scaling);
  RunResult r;
  for (int s = 0; s < steps; ++s) {
    Tensor loss;
    {
      amp::Autocast scope = preset.autocast();
      loss = problem.loss(*model);
    }
    if (s == 0) r.initial_loss = loss.item();
    scaler.scale(loss).backward();
    if (s == 0) {
      scaler.unscale(opt);
      r.zero_gradients = zero_fraction(w);
      r.zero_output_gradients = zero_fraction(w[2]);
    }
    r.skipped += !scaler.step(opt);
    scaler.update();
    opt.zero_grad();
  }
  NoGradGuard no_grad;
  r.final_loss = problem.loss(*model).item();
  r.final_scale = scaler.get_scale();
  r.scale_log = scaler.scale_log();
  return r;
}

constexpr int kTinySteps = 40;

// The fp32 reference of the loss-scaling tests, trained once.
const RunResult& fp32_reference(const TinyGradientProblem& problem) {
  static const RunResult r = train(problem, amp::preset("fp32"), {.enabled = false}, kTinySteps);
  return r;
}

TEST(Paper, WithoutLossScalingFp16GradientsVanishAndScalingRescuesThem) {
  const TinyGradientProblem problem;
  const int steps = kTinySteps;
  const RunResult& fp32 = fp32_reference(problem);
  const RunResult unscaled = train(problem, amp::preset("amp-fp16"), {.enabled = false}, steps);
  const RunResult scaled = train(problem, amp::preset("amp-fp16"), {}, steps);

  EXPECT_EQ(fp32.zero_gradients, 0.0);
  EXPECT_GT(unscaled.zero_gradients, 0.99) << "fp16 should flush the gradients to zero";
  // Scaled by 2^16, the output layer's gradients are representable. (Those of the hidden
  // layers, 1e-5 times smaller again behind the tiny output weights, still underflow: this
  // problem learns through its output layer.)
  EXPECT_EQ(scaled.zero_output_gradients, 0.0);
  EXPECT_EQ(unscaled.zero_output_gradients, 1.0);

  const double learned = fp32.initial_loss - fp32.final_loss;
  ASSERT_GT(learned, 0.5 * fp32.initial_loss)
      << "the fp32 run must learn for the test to mean anything";
  // With scaling, fp16 follows fp32 to within a tenth of what fp32 learned; without, it learns
  // less than half of it.
  EXPECT_NEAR(scaled.final_loss, fp32.final_loss, 0.1 * learned);
  EXPECT_LT(unscaled.initial_loss - unscaled.final_loss, 0.5 * learned);
}

// An unlucky start, scale 1: with PyTorch's fixed interval the scale would first grow after
// 2000 clean steps, and until then fp16 flushes every gradient. Underflow-aware growth sees
// the flushed gradients and doubles the scale every step until enough of them are
// representable, then learns as the scaled run above does.
TEST(Paper, UnderflowAwareGrowthRescuesTheFlushedModelFasterThanTheFixedInterval) {
  const TinyGradientProblem problem;
  const int steps = kTinySteps;
  const RunResult& fp32 = fp32_reference(problem);
  const RunResult fixed = train(problem, amp::preset("amp-fp16"), {.init_scale = 1.0}, steps);
  const RunResult aware = train(problem, amp::preset("amp-fp16"),
                                {.init_scale = 1.0, .underflow_fraction = 0.5}, steps);
  const double learned = fp32.initial_loss - fp32.final_loss;
  ASSERT_GT(learned, 0.5 * fp32.initial_loss);
  EXPECT_EQ(fixed.final_scale, 1.0);
  EXPECT_LT(fixed.initial_loss - fixed.final_loss, 0.1 * learned) << "flushed: nothing learned";
  EXPECT_GT(aware.initial_loss - aware.final_loss, 0.8 * learned);
  ASSERT_FALSE(aware.scale_log.empty());
  int underflow_growths = 0;
  for (const amp::ScaleChangeRecord& c : aware.scale_log) {
    underflow_growths += c.reason == amp::ScaleChange::underflow_growth;
    EXPECT_TRUE(c.reason == amp::ScaleChange::underflow_growth ||
                c.reason == amp::ScaleChange::backoff)
        << amp::name_of(c.reason) << " at step " << c.step;
  }
  // 2^16 is where the output layer's gradients become representable (the test above).
  EXPECT_GE(underflow_growths, 16);
  EXPECT_GE(aware.final_scale, 65536.0);
}

// ---- master weights and stochastic rounding ----
// Least squares y = x w with weights near 1.5: the updates lr * g stay below half a unit in the
// last place of a 16-bit weight there, so rounding each updated weight to nearest loses them.
struct SmallUpdateProblem {
  Tensor x, target, w0;

  SmallUpdateProblem() {
    Philox rng(PhiloxState{11, 0, 0});
    x = randn({256, 32}, rng);
    Tensor w_true = randn({1, 32}, rng, 1e-2);
    {
      NoGradGuard no_grad;
      w_true = ops::add_scalar(w_true, 1.5);
      target = ops::linear(x, w_true);
    }
    w0 = full({1, 32}, 1.5);
  }

  Tensor loss(const Tensor& w) const {
    return ops::mse_loss(ops::linear(x, w.to(DType::f32)), target);
  }
  double loss_value(const Tensor& w) const {
    NoGradGuard no_grad;
    return loss(w).item();
  }
};

// The gradient is 2 (w - w_true) (E[x x^T] = I), at most about 0.06, so lr * g stays under
// 3e-4, below half an fp16 ulp in [1, 2) (2^-11 = 4.9e-4) and a bf16 one (2^-8); and each step
// still takes 1% of the distance, enough to learn most of it in 200 steps.
constexpr double kSmallLr = 0.005;

double train_with(const SmallUpdateProblem& problem, DType dtype, optim::Precision precision,
                  int steps) {
  Tensor w = problem.w0.to(dtype).detach().set_requires_grad(true);
  optim::Sgd opt({w}, {.lr = kSmallLr, .precision = precision, .rounding = PhiloxState{5, 0, 0}});
  for (int s = 0; s < steps; ++s) {
    problem.loss(w).backward();
    opt.step();
    opt.zero_grad();
  }
  return problem.loss_value(w);
}

TEST(Paper, Fp16WeightsUpdatedInFp16StopMovingAndTheFp32MasterKeepsLearning) {
  const SmallUpdateProblem problem;
  const int steps = 200;
  // The update of every weight is below half an fp16 ulp of 1.5 (2^-11) in the first step.
  Tensor w = problem.w0.to(DType::f16).detach().set_requires_grad(true);
  problem.loss(w).backward();
  const std::vector<double> g = w.grad().to_vector();
  for (double v : g)
    ASSERT_LT(std::fabs(kSmallLr * v), 0x1p-11) << "the setup must be in the regime";
  // Updated in fp16 (rounded to nearest each step), the weights keep every bit.
  const std::vector<uint8_t> before = bytes_of(w);
  for (int s = 0; s < steps; ++s) {
    w.set_grad(Tensor());
    problem.loss(w).backward();
    NoGradGuard no_grad;
    Tensor updated = ops::sub(w.to(DType::f32), ops::mul_scalar(w.grad().to(DType::f32), kSmallLr));
    w.copy_(updated);  // rounds to nearest even, as an fp16 optimizer would
  }
  EXPECT_EQ(bytes_of(w), before) << "fp16 weights should not have moved";

  // With the fp32 master, the fp16 model follows the fp32 one.
  const double l0 = problem.loss_value(problem.w0);
  const double fp32 = train_with(problem, DType::f32, optim::Precision::master_fp32, steps);
  const double master = train_with(problem, DType::f16, optim::Precision::master_fp32, steps);
  ASSERT_LT(fp32, 0.5 * l0) << "the fp32 run must learn";
  EXPECT_NEAR(master, fp32, 0.05 * (l0 - fp32));
}

TEST(Paper, StochasticRoundingKeepsBf16WeightsMovingWhereNearestStalls) {
  const SmallUpdateProblem problem;
  const int steps = 200;
  const double l0 = problem.loss_value(problem.w0);
  const double fp32 = train_with(problem, DType::f32, optim::Precision::master_fp32, steps);
  // bf16 weights rounded to nearest after each update: no master, nothing moves.
  Tensor w = problem.w0.to(DType::bf16).detach().set_requires_grad(true);
  const std::vector<uint8_t> before = bytes_of(w);
  for (int s = 0; s < steps; ++s) {
    problem.loss(w).backward();
    NoGradGuard no_grad;
    w.copy_(ops::sub(w.to(DType::f32), ops::mul_scalar(w.grad().to(DType::f32), kSmallLr)));
    w.set_grad(Tensor());
  }
  EXPECT_EQ(bytes_of(w), before) << "round-to-nearest bf16 weights should stall";
  // bf16-sr: the same updates, rounded stochastically, learn most of what fp32 learns.
  const double sr = train_with(problem, DType::bf16, optim::Precision::stochastic_rounding, steps);
  EXPECT_LT(sr, l0 - 0.8 * (l0 - fp32));
}

// ---- overflow ----
TEST(Paper, AnOverflowSkipsExactlyThatStepAndHalvesTheScale) {
  const TinyGradientProblem problem;
  const amp::Preset& p = amp::preset("amp-fp16");
  const std::unique_ptr<nn::Model> model = problem.fresh_model();
  const std::vector<Tensor> w = model->parameters();
  optim::Adam opt(w, {.lr = 1e-3});
  amp::GradScaler scaler = p.make_scaler();
  auto run_step = [&](bool inject) {
    Tensor loss;
    {
      amp::Autocast scope = p.autocast();
      loss = problem.loss(*model);
    }
    scaler.scale(loss).backward();
    if (inject) w[1].grad().data<float>()[7] = INFINITY;  // one element of one gradient
    const bool applied = scaler.step(opt);
    scaler.update();
    opt.zero_grad();
    return applied;
  };
  ASSERT_TRUE(run_step(false));
  ASSERT_TRUE(run_step(false));
  const float scale = scaler.get_scale();
  std::vector<std::vector<uint8_t>> params, moments;
  for (size_t i = 0; i < w.size(); ++i) {
    params.push_back(bytes_of(w[i]));
    moments.push_back(bytes_of(opt.exp_avg(i)));
    moments.push_back(bytes_of(opt.exp_avg_sq(i)));
  }
  const int64_t updates = opt.steps();

  EXPECT_FALSE(run_step(true));
  EXPECT_EQ(scaler.get_scale(), scale / 2);
  EXPECT_EQ(opt.steps(), updates);
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(bytes_of(w[i]), params[i]) << "parameter " << i;
    EXPECT_EQ(bytes_of(opt.exp_avg(i)), moments[2 * i]) << "first moment " << i;
    EXPECT_EQ(bytes_of(opt.exp_avg_sq(i)), moments[2 * i + 1]) << "second moment " << i;
  }
  ASSERT_FALSE(scaler.scale_log().empty());
  EXPECT_EQ(scaler.scale_log().back().first_non_finite->parameter, 1u);

  EXPECT_TRUE(run_step(false));  // and training goes on
  EXPECT_EQ(opt.steps(), updates + 1);
}

TEST(Presets, NamesAndWhatTheySetUp) {
  for (const amp::Preset& p : amp::all_presets()) EXPECT_EQ(&amp::preset(p.name), &p);
  EXPECT_THROW(amp::preset("fp64"), Error);
  const amp::Preset& bf16 = amp::preset("bf16");
  const std::vector<Tensor> params = {ones({4, 4}).set_requires_grad(true),
                                      ones({4}).set_requires_grad(true)};
  const std::vector<Tensor> cast = bf16.cast_parameters(params, {false, true});  // a norm
  EXPECT_EQ(cast[0].dtype(), DType::bf16);
  EXPECT_TRUE(cast[0].requires_grad() && cast[0].is_leaf());
  EXPECT_EQ(cast[0].tag(), MemoryTag::parameter);
  EXPECT_TRUE(cast[1].is_same(params[1])) << "norms stay fp32";
  EXPECT_FALSE(amp::preset("bf16").make_scaler().is_enabled());
  EXPECT_TRUE(amp::preset("fp16").make_scaler().is_enabled());
  EXPECT_TRUE(amp::preset("amp-fp16").make_scaler().is_enabled());
  {
    amp::Autocast scope = amp::preset("amp-bf16").autocast();
    EXPECT_TRUE(amp::autocast_enabled());
    EXPECT_EQ(amp::autocast_dtype(), DType::bf16);
  }
  {
    amp::Autocast scope = amp::preset("fp32").autocast();
    EXPECT_FALSE(amp::autocast_enabled());
  }
  EXPECT_EQ(amp::preset("bf16-sr").optimizer_precision, optim::Precision::stochastic_rounding);
}

}  // namespace
}  // namespace mixp
