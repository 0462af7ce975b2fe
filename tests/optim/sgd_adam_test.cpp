// Sgd, Adam and AdamW against straightforward double-precision implementations of PyTorch's
// update rules, written here independently of the library's fused loops.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "mixp/autograd.h"
#include "mixp/error.h"
#include "mixp/io/safetensors.h"
#include "mixp/optim/adam.h"
#include "mixp/optim/adamw.h"
#include "mixp/optim/sgd.h"
#include "optim/optim_test_util.h"
#include "support/tolerance.h"

namespace mixp {
namespace {

constexpr int kSteps = 6;
constexpr size_t kN = 37;  // not a multiple of any vector width
// Each step rounds an element a handful of times in fp32; the tolerance grows with the count.
constexpr int64_t kRoundingsPerStep = 8;

Tensor vector_tensor(const std::vector<double>& v, DType dtype) {
  return from_values(v, Shape{int64_t(v.size())}, dtype);
}

void expect_close(const Tensor& got, const std::vector<double>& want, DType dtype, int step) {
  ASSERT_EQ(got.dtype(), dtype);
  const std::string diff = test::compare(got, vector_tensor(want, dtype),
                                         test::tolerance(dtype, kRoundingsPerStep * (step + 1)));
  EXPECT_EQ(diff, "") << "after step " << step + 1;
}

// ---- SGD ----

struct SgdCase {
  const char* name;
  optim::SgdOptions options;
};

void PrintTo(const SgdCase& c, std::ostream* out) { *out << c.name; }

struct ReferenceSgd {
  optim::SgdOptions o;
  std::vector<double> w, b;
  bool started = false;

  void step(const std::vector<double>& g) {
    if (b.empty()) b.assign(w.size(), 0.0);
    for (size_t i = 0; i < w.size(); ++i) {
      double d = g[i] + o.weight_decay * w[i];
      if (o.momentum != 0.0) {
        b[i] = started ? o.momentum * b[i] + (1.0 - o.dampening) * d : d;
        d = o.nesterov ? d + o.momentum * b[i] : b[i];
      }
      w[i] -= o.lr * d;
    }
    started = true;
  }
};

class SgdTest : public ::testing::TestWithParam<std::tuple<SgdCase, DType>> {};

TEST_P(SgdTest, MatchesDoubleReference) {
  const auto& [c, dtype] = GetParam();
  Tensor p = test::parameter(test::values(0, kN), dtype);
  ReferenceSgd ref{c.options, p.to_vector(), {}};
  optim::Sgd opt({p}, c.options);
  for (int s = 0; s < kSteps; ++s) {
    const std::vector<double> g = test::set_grad(p, test::values(s + 1, kN), dtype);
    opt.step();
    ref.step(g);
    expect_close(p, ref.w, dtype, s);
    if (c.options.momentum != 0.0) expect_close(opt.momentum_buffer(0), ref.b, dtype, s);
  }
  EXPECT_EQ(opt.steps(), kSteps);
}

const SgdCase kSgdCases[] = {
    {"plain", {.lr = 0.1}},
    {"weight_decay", {.lr = 0.05, .weight_decay = 0.1}},
    {"momentum_dampening", {.lr = 0.1, .momentum = 0.9, .dampening = 0.3, .weight_decay = 0.01}},
    {"nesterov", {.lr = 0.1, .momentum = 0.8, .weight_decay = 0.02, .nesterov = true}},
};

INSTANTIATE_TEST_SUITE_P(Cases, SgdTest,
                         ::testing::Combine(::testing::ValuesIn(kSgdCases),
                                            ::testing::Values(DType::f32, DType::f64)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_" +
                                  name_of(std::get<1>(info.param));
                         });

// ---- Adam and AdamW ----

struct ReferenceAdam {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled;
  std::vector<double> w, m, v;
  int t = 0;

  void step(const std::vector<double>& grad) {
    if (m.empty()) m.assign(w.size(), 0.0), v.assign(w.size(), 0.0);
    ++t;
    const double bc1 = 1.0 - std::pow(beta1, t), bc2 = 1.0 - std::pow(beta2, t);
    for (size_t i = 0; i < w.size(); ++i) {
      double g = grad[i];
      if (decoupled) {
        w[i] *= 1.0 - lr * weight_decay;
      } else {
        g += weight_decay * w[i];
      }
      m[i] = beta1 * m[i] + (1.0 - beta1) * g;
      v[i] = beta2 * v[i] + (1.0 - beta2) * g * g;
      const double m_hat = m[i] / bc1, v_hat = v[i] / bc2;
      w[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }
  }
};

class AdamTest : public ::testing::TestWithParam<DType> {};

TEST_P(AdamTest, AdamMatchesDoubleReferenceWithL2AndBiasCorrection) {
  const DType dtype = GetParam();
  const optim::AdamOptions o{.lr = 0.01, .betas = {0.8, 0.95}, .eps = 1e-6, .weight_decay = 0.1};
  Tensor p = test::parameter(test::values(0, kN), dtype);
  ReferenceAdam ref{o.lr,  o.betas[0],    o.betas[1], o.eps, o.weight_decay,
                    false, p.to_vector(), {},         {}};
  optim::Adam opt({p}, o);
  for (int s = 0; s < kSteps; ++s) {
    const std::vector<double> g = test::set_grad(p, test::values(s + 1, kN, 0.5), dtype);
    opt.step();
    ref.step(g);
    expect_close(p, ref.w, dtype, s);
    expect_close(opt.exp_avg(0), ref.m, dtype, s);
    expect_close(opt.exp_avg_sq(0), ref.v, dtype, s);
    EXPECT_EQ(opt.parameter_steps(0), s + 1);
  }
}

TEST_P(AdamTest, AdamWMatchesDoubleReferenceWithDecoupledDecay) {
  const DType dtype = GetParam();
  const optim::AdamWOptions o{.lr = 0.02, .betas = {0.9, 0.99}, .eps = 1e-8, .weight_decay = 0.5};
  Tensor p = test::parameter(test::values(3, kN), dtype);
  ReferenceAdam ref{o.lr, o.betas[0],    o.betas[1], o.eps, o.weight_decay,
                    true, p.to_vector(), {},         {}};
  optim::AdamW opt({p}, o);
  for (int s = 0; s < kSteps; ++s) {
    const std::vector<double> g = test::set_grad(p, test::values(s + 7, kN, 2.0), dtype);
    opt.step();
    ref.step(g);
    expect_close(p, ref.w, dtype, s);
  }
}

TEST(Adam, FirstStepMovesEachWeightByLrTimesSignOfGradient) {
  // With bias correction, m_hat = g and v_hat = g^2 on step 1: the step is lr * g / (|g| + eps).
  Tensor p = test::parameter({1.0, -2.0, 3.0}, DType::f32);
  test::set_grad(p, {0.25, -4.0, 1e-3}, DType::f32);
  optim::Adam opt({p}, {.lr = 0.1, .eps = 0.0});
  opt.step();
  EXPECT_EQ(test::compare(p, vector_tensor({0.9, -1.9, 2.9}, DType::f32),
                          test::tolerance(DType::f32, kRoundingsPerStep)),
            "");
}

TEST(Adam, DefaultsArePyTorchs) {
  const optim::AdamOptions a;
  EXPECT_EQ(a.lr, 1e-3);
  EXPECT_EQ(a.betas[0], 0.9);
  EXPECT_EQ(a.betas[1], 0.999);
  EXPECT_EQ(a.eps, 1e-8);
  EXPECT_EQ(a.weight_decay, 0.0);
  EXPECT_EQ(optim::AdamWOptions().weight_decay, 1e-2);
  EXPECT_EQ(optim::SgdOptions().momentum, 0.0);
  EXPECT_EQ(a.precision, optim::Precision::master_fp32);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AdamTest, ::testing::Values(DType::f32, DType::f64),
                         [](const auto& info) { return std::string(name_of(info.param)); });

TEST(Optimizers, ParametersWithoutGradientAreLeftAlone) {
  Tensor a = test::parameter({1.0, 2.0}, DType::f32);
  Tensor b = test::parameter({3.0, 4.0}, DType::f32);
  test::set_grad(a, {1.0, 1.0}, DType::f32);
  optim::Adam opt({a, b}, {.lr = 0.1});
  opt.step();
  EXPECT_EQ(b.to_vector(), (std::vector<double>{3.0, 4.0}));
  EXPECT_EQ(opt.parameter_steps(0), 1);
  EXPECT_EQ(opt.parameter_steps(1), 0);
  EXPECT_NE(a.to_vector(), (std::vector<double>{1.0, 2.0}));
}

TEST(Optimizers, SetLearningRateChangesTheNextStep) {
  Tensor p = test::parameter({1.0}, DType::f64);
  optim::Sgd opt({p}, {.lr = 0.5});
  test::set_grad(p, {1.0}, DType::f64);
  opt.set_learning_rate(0.25);
  opt.step();
  EXPECT_EQ(p.item(), 0.75);
}

// ---- bad options ----

void expect_error_mentioning(const std::function<void()>& f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "no mixp::Error; expected one mentioning " << text;
  } catch (const Error& e) {
    EXPECT_NE(e.message().find(text), std::string::npos) << e.message();
  }
}

TEST(OptimizerOptions, BadValuesGiveErrorsWithTheValue) {
  Tensor p = test::parameter({1.0}, DType::f32);
  expect_error_mentioning([&] { optim::Sgd({p}, {.lr = -0.5}); }, "-0.5");
  expect_error_mentioning([&] { optim::Sgd({p}, {.momentum = -0.25}); }, "-0.25");
  expect_error_mentioning([&] { optim::Sgd({p}, {.weight_decay = -3}); }, "-3");
  expect_error_mentioning([&] { optim::Sgd({p}, {.nesterov = true}); }, "nesterov");
  expect_error_mentioning(
      [&] { optim::Sgd({p}, {.momentum = 0.9, .dampening = 0.5, .nesterov = true}); }, "0.5");
  expect_error_mentioning([&] { optim::Adam({p}, {.lr = -2e-3}); }, "-0.002");
  expect_error_mentioning([&] { optim::Adam({p}, {.betas = {1.0, 0.999}}); }, "betas[0]");
  expect_error_mentioning([&] { optim::Adam({p}, {.betas = {-0.125, 0.999}}); }, "-0.125");
  expect_error_mentioning([&] { optim::AdamW({p}, {.betas = {0.9, 1.5}}); }, "1.5");
  expect_error_mentioning([&] { optim::AdamW({p}, {.betas = {0.9, NAN}}); }, "nan");
  expect_error_mentioning([&] { optim::Adam({p}, {.eps = -1e-8}); }, "-1e-08");
  expect_error_mentioning([&] { optim::AdamW({p}, {.weight_decay = -0.75}); }, "-0.75");
  optim::Sgd ok({p}, {.lr = 0.1});
  expect_error_mentioning([&] { ok.set_learning_rate(-7); }, "-7");
  Tensor not_a_leaf = test::parameter({1.0}, DType::f32).detach();
  expect_error_mentioning([&] { optim::Sgd({not_a_leaf}); }, "leaf");
  expect_error_mentioning([&] { optim::Adam({p, p}); }, "twice");
  Tensor integers = from_values({1.0}, Shape{1}, DType::i32);
  EXPECT_THROW(optim::Sgd({integers}), Error);
}

}  // namespace
}  // namespace mixp

namespace mixp {
namespace {

// ---- SGD checkpoints ----

// One step of `opt` with gradients that depend on the current weights (so that any difference
// in the state would show in the following steps).
void sgd_step(optim::Sgd& opt, std::vector<Tensor>& params, int step) {
  for (size_t i = 0; i < params.size(); ++i) {
    std::vector<double> g = params[i].to_vector();
    const std::vector<double> noise = test::values(step * 7 + int(i), g.size());
    for (size_t j = 0; j < g.size(); ++j) g[j] = 0.5 * g[j] + noise[j];
    test::set_grad(params[i], g, DType::f32);
  }
  opt.step();
  opt.zero_grad();
}

// Copies a saved state into a handle of the optimizer's (handles share the storage).
void restore(Tensor state, const Tensor& saved) { state.copy_(saved); }

std::vector<Tensor> sgd_params() {
  return {test::parameter(test::values(1, kN), DType::f32),
          test::parameter(test::values(2, 5), DType::bf16)};  // with an fp32 master
}

TEST(SgdCheckpoint, ResumedFromItsSavedStateIsBitwiseTheUninterruptedRun) {
  for (const bool nesterov : {false, true}) {
    SCOPED_TRACE(nesterov);
    const optim::SgdOptions o{.lr = 0.05,
                              .momentum = 0.9,
                              .dampening = nesterov ? 0.0 : 0.1,
                              .weight_decay = 0.01,
                              .nesterov = nesterov};
    std::vector<Tensor> a = sgd_params();
    optim::Sgd straight(a, o);
    for (int s = 0; s < 10; ++s) sgd_step(straight, a, s);

    // Five steps, the state written to safetensors bytes and read back, then a fresh optimizer
    // over fresh parameters restored from it, and five more steps.
    std::vector<Tensor> b = sgd_params();
    std::vector<uint8_t> saved;
    std::vector<bool> started;
    int64_t steps = 0;
    {
      optim::Sgd first(b, o);
      for (int s = 0; s < 5; ++s) sgd_step(first, b, s);
      std::vector<std::pair<std::string, Tensor>> state;
      for (size_t i = 0; i < b.size(); ++i) {
        state.emplace_back("param/" + std::to_string(i), b[i].detach());
        state.emplace_back("momentum/" + std::to_string(i), first.momentum_state(i));
        if (first.master(i).impl() != b[i].impl())
          state.emplace_back("master/" + std::to_string(i), first.master(i));
        started.push_back(first.momentum_started(i));
      }
      saved = io::encode_safetensors(state);
      steps = first.steps();
    }
    const io::SafetensorsFile file = io::decode_safetensors(saved, "sgd state");
    std::vector<Tensor> c = sgd_params();
    optim::Sgd resumed(c, o);
    {
      NoGradGuard no_grad;
      for (size_t i = 0; i < c.size(); ++i) {
        c[i].copy_(file.tensors.at("param/" + std::to_string(i)));
        restore(resumed.momentum_state(i), file.tensors.at("momentum/" + std::to_string(i)));
        if (resumed.master(i).impl() != c[i].impl())
          resumed.set_master(i, file.tensors.at("master/" + std::to_string(i)));
        EXPECT_FALSE(resumed.momentum_started(i));
        resumed.set_momentum_started(i, started[i]);
      }
    }
    resumed.set_steps(steps);
    for (int s = 5; s < 10; ++s) sgd_step(resumed, c, s);

    EXPECT_EQ(resumed.steps(), straight.steps());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(io::encode_safetensors({{"p", a[i].detach()}}),
                io::encode_safetensors({{"p", c[i].detach()}}))
          << "parameter " << i;
      EXPECT_EQ(io::encode_safetensors({{"b", straight.momentum_state(i)}}),
                io::encode_safetensors({{"b", resumed.momentum_state(i)}}))
          << "momentum " << i;
    }
    // Without the started flags the first resumed step would set b = d: another run.
    std::vector<Tensor> d = sgd_params();
    optim::Sgd forgetful(d, o);
    {
      NoGradGuard no_grad;
      for (size_t i = 0; i < d.size(); ++i) {
        d[i].copy_(file.tensors.at("param/" + std::to_string(i)));
        restore(forgetful.momentum_state(i), file.tensors.at("momentum/" + std::to_string(i)));
        if (forgetful.master(i).impl() != d[i].impl())
          forgetful.set_master(i, file.tensors.at("master/" + std::to_string(i)));
      }
    }
    for (int s = 5; s < 10; ++s) sgd_step(forgetful, d, s);
    EXPECT_NE(a[0].to_vector(), d[0].to_vector());
  }
  optim::Sgd plain(sgd_params(), {.lr = 0.1});
  EXPECT_FALSE(plain.momentum_state(0).defined());
  EXPECT_THROW(plain.set_momentum_started(0, true), Error);
  EXPECT_THROW(plain.momentum_started(2), Error);
}

}  // namespace
}  // namespace mixp
