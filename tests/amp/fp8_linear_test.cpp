// FP8 Linear and attention under amp::Fp8Autocast: forward and gradients against a reference
// computed from the quantized values, the weight cache, site numbering, the amax histories.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mixp/amp/autocast.h"
#include "mixp/amp/fp8.h"
#include "mixp/amp/presets.h"
#include "mixp/autograd.h"
#include "mixp/error.h"
#include "mixp/nn/models.h"
#include "mixp/ops.h"
#include "mixp/optim/adamw.h"
#include "support/tolerance.h"

namespace mixp {
namespace {

using amp::Fp8Recipe;
using amp::Fp8Role;
using amp::Fp8Scaling;

Tensor param(const Shape& shape, uint64_t seed, double stddev = 0.5) {
  Philox rng({seed});
  return randn(shape, rng, stddev, DType::f32, MemoryTag::parameter).set_requires_grad(true);
}

Tensor data(const Shape& shape, uint64_t seed, double stddev = 1.0) {
  Philox rng({seed});
  return randn(shape, rng, stddev);
}

// A B^T in double from f32 tensors [m, k] and [n, k].
Tensor matmul_nt(const Tensor& a, const Tensor& b) {
  const int64_t m = a.size(0), n = b.size(0), k = a.size(1);
  const std::vector<double> av = a.to_vector(), bv = b.to_vector();
  std::vector<double> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += av[size_t(i * k + p)] * bv[size_t(j * k + p)];
      c[size_t(i * n + j)] = acc;
    }
  return from_values(c, {m, n}, DType::f32);
}

float amax_of(const Tensor& t) {
  double m = 0;
  for (double v : t.to_vector()) m = std::max(m, std::fabs(v));
  return float(m);
}

Tensor transposed(const Tensor& t) {
  NoGradGuard no_grad;
  return ops::permute(t, {1, 0}).to(DType::f32);
}

// dequant(quantize(t)) as the recipe quantizes a tensor of `role` with `scale`.
Tensor fake_quant(const Tensor& t, const Fp8Recipe& r, Fp8Role role, float scale, bool weight) {
  const Fp8Scaling s =
      !weight && r.scaling == Fp8Scaling::block_128x128 ? Fp8Scaling::block_1x128 : r.scaling;
  return amp::quantize(t.detach(), amp::fp8_dtype(r.format, role), s, scale).dequantize();
}

class Fp8LinearTest : public ::testing::TestWithParam<Fp8Scaling> {};

TEST_P(Fp8LinearTest, ForwardAndGradientsMatchTheQuantizedReference) {
  Fp8Recipe recipe;
  recipe.scaling = GetParam();
  recipe.format = GetParam() == Fp8Scaling::mxfp8 ? amp::Fp8Format::e4m3 : amp::Fp8Format::hybrid;
  amp::Fp8State state(recipe);
  const int64_t rows = 37, in = 160, out = 48;  // not multiples of the block sizes
  Tensor w = param({out, in}, 1, 0.1), b = param({out}, 2, 0.1);
  Tensor x = data({rows, in}, 3).set_requires_grad(true);
  const Tensor g = data({rows, out}, 4, 1e-3);
  // Two steps: the second uses the scales the first step's amaxes gave (delayed scaling).
  for (int step = 0; step < 2; ++step) {
    std::vector<amp::Fp8Meta> before;
    if (state.sites() > 0) before = state.metas(0);
    Tensor y;
    {
      amp::Fp8Autocast scope(state);
      y = ops::linear(x, w, b);
    }
    ASSERT_EQ(y.dtype(), DType::f32);
    ASSERT_EQ(y.shape(), (Shape{rows, out}));
    ASSERT_EQ(state.sites(), 1u);
    const float sx = before.empty() ? 1.0f : before[0].scale;
    const float sw = before.empty() ? 1.0f : before[1].scale;
    const float sg = before.empty() ? 1.0f : before[2].scale;
    const Tensor qx = fake_quant(x, recipe, Fp8Role::input, sx, false);
    const Tensor qw = fake_quant(w, recipe, Fp8Role::weight, sw, true);
    Tensor want = matmul_nt(qx, qw);
    want = ops::add(want, b.detach());
    EXPECT_EQ(test::compare(y, want, test::tolerance(DType::f32, in)), "") << "step " << step;

    w.set_grad(Tensor());
    x.set_grad(Tensor());
    b.set_grad(Tensor());
    y.backward(g);
    const Tensor qg = fake_quant(g, recipe, Fp8Role::gradient, sg, false);
    const Tensor qwt = fake_quant(transposed(w), recipe, Fp8Role::weight, sw, true);
    EXPECT_EQ(test::compare(x.grad(), matmul_nt(qg, qwt), test::tolerance(DType::f32, out)), "");
    const Tensor qgt = fake_quant(transposed(g), recipe, Fp8Role::gradient, sg, false);
    const Tensor qxt = fake_quant(transposed(x), recipe, Fp8Role::input, sx, false);
    EXPECT_EQ(test::compare(w.grad(), matmul_nt(qgt, qxt), test::tolerance(DType::f32, rows)), "");
    EXPECT_EQ(test::compare(b.grad(), ops::sum(g, {0}), test::tolerance(DType::f32, rows)), "");

    // The metas saw this step's amaxes.
    const std::vector<amp::Fp8Meta>& m = state.metas(0);
    EXPECT_EQ(m[0].amax, amax_of(x));
    EXPECT_EQ(m[1].amax, amax_of(w));
    EXPECT_EQ(m[2].amax, amax_of(g));
    state.update();
    EXPECT_EQ(state.metas(0)[0].history.size(), size_t(step + 1));
  }
}

INSTANTIATE_TEST_SUITE_P(Recipes, Fp8LinearTest,
                         ::testing::Values(Fp8Scaling::delayed, Fp8Scaling::current,
                                           Fp8Scaling::mxfp8, Fp8Scaling::block_1x128,
                                           Fp8Scaling::block_128x128, Fp8Scaling::none),
                         [](const auto& info) { return std::string(amp::name_of(info.param)); });

// max |got - want| <= rtol max |want|: a normwise bound, as FP8 rounding errors are relative to
// the operands' scale, not to each output (sums cancel).
void expect_normwise(const Tensor& got, const Tensor& want, double rtol, const char* what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::vector<double> g = got.to_vector(), w = want.to_vector();
  double err = 0, scale = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    err = std::max(err, std::fabs(g[i] - w[i]));
    scale = std::max(scale, std::fabs(w[i]));
  }
  EXPECT_GT(scale, 0.0) << what;
  EXPECT_LE(err, rtol * scale) << what;
}

// FP8 attention against fp32 attention: six products, each of two operands rounded once to
// their fp8 format, so the error is a few of the formats' epsilons relative to the largest
// value (tolerance() of the coarser format, the gradient's E5M2 in backward).
TEST(Fp8Attention, CloseToFp32AttentionAndRecordsItsSixTensors) {
  for (amp::Fp8Scaling scaling :
       {Fp8Scaling::current, Fp8Scaling::mxfp8, Fp8Scaling::block_1x128}) {
    SCOPED_TRACE(amp::name_of(scaling));
    Fp8Recipe recipe;
    recipe.scaling = scaling;
    amp::Fp8State state(recipe);
    const Shape shape{2, 3, 17, 32};
    Tensor q = data(shape, 10).set_requires_grad(true), k = data(shape, 11).set_requires_grad(true),
           v = data(shape, 12).set_requires_grad(true);
    const Tensor g = data(shape, 13, 1e-2);
    Tensor y;
    {
      amp::Fp8Autocast scope(state);
      y = ops::scaled_dot_product_attention(q, k, v, true);
    }
    y.backward(g);
    const Tensor dq = q.grad(), dk = k.grad(), dv = v.grad();
    ASSERT_EQ(state.sites(), 1u);
    ASSERT_EQ(state.metas(0).size(), 6u);
    for (const amp::Fp8Meta& m : state.metas(0)) EXPECT_GT(m.amax, 0.0f);
    EXPECT_EQ(state.metas(0)[3].amax, 1.0f);  // P: the first query sees only itself
    for (Tensor* t : {&q, &k, &v}) t->set_grad(Tensor());
    const Tensor want = ops::scaled_dot_product_attention(q, k, v, true);
    want.backward(g);
    expect_normwise(y, want, test::tolerance(DType::e4m3).rtol, "output");
    const double grad_tol = test::tolerance(DType::e5m2).rtol;
    expect_normwise(dq, q.grad(), grad_tol, "dq");
    expect_normwise(dk, k.grad(), grad_tol, "dk");
    expect_normwise(dv, v.grad(), grad_tol, "dv");
  }
}

TEST(Fp8State, SitesAreCountedPerForwardAndMustNotChange) {
  amp::Fp8State state;
  Tensor w1 = param({8, 16}, 1), w2 = param({4, 8}, 2);
  const Tensor x = data({3, 16}, 3);
  for (int step = 0; step < 2; ++step) {
    amp::Fp8Autocast scope(state);
    ops::linear(ops::linear(x, w1), w2);
  }
  EXPECT_EQ(state.sites(), 2u);
  {
    amp::Fp8Autocast scope(state);
    const Shape s{1, 1, 4, 8};
    EXPECT_THROW(ops::scaled_dot_product_attention(data(s, 4), data(s, 5), data(s, 6), true),
                 Error);
  }
  // A disabled scope, and backward, compute in plain fp32.
  {
    amp::Fp8Autocast scope(state, /*enabled=*/false);
    EXPECT_EQ(amp::fp8_active(), nullptr);
    EXPECT_EQ(test::compare(ops::linear(x, w1), matmul_nt(x, w1.detach()),
                            test::tolerance(DType::f32, 16)),
              "");
  }
}

TEST(Fp8State, TheWeightIsQuantizedOncePerStep) {
  amp::Fp8State state({.scaling = Fp8Scaling::current});
  Tensor w = param({8, 16}, 1);
  const Tensor x = data({3, 16}, 3);
  amp::Fp8Tensor first, again;
  {
    amp::Fp8Autocast scope(state);
    ops::linear(x, w);
    std::vector<amp::Fp8Meta>& m = state.metas(0);
    first = state.cached_weight(w, m[1], true);
    again = state.cached_weight(w, m[1], true);
  }
  EXPECT_EQ(first.data.raw_data(), again.data.raw_data());  // the same quantization
  {
    NoGradGuard no_grad;
    w.copy_(ops::mul_scalar(w, 2.0));  // an optimizer step: a new version, quantized again
  }
  amp::Fp8Autocast scope(state);
  const amp::Fp8Tensor changed = state.cached_weight(w, state.metas(0)[1], true);
  EXPECT_NE(changed.data.raw_data(), first.data.raw_data());
  state.update();
  const amp::Fp8Tensor after = state.cached_weight(w, state.metas(0)[1], true);
  EXPECT_NE(after.data.raw_data(), changed.data.raw_data());
}

TEST(Fp8State, StateRoundTripsBitExactly) {
  amp::Fp8State a({.scaling = Fp8Scaling::delayed, .amax_history_len = 4});
  Tensor w = param({8, 16}, 1);
  for (int step = 0; step < 6; ++step) {
    Tensor y;
    {
      amp::Fp8Autocast scope(a);
      y = ops::linear(data({3, 16}, uint64_t(step)), w);
    }
    y.backward(data({3, 8}, 100 + uint64_t(step)));
    a.update();
  }
  std::map<std::string, Tensor> saved;
  for (auto& [name, t] : a.state()) saved.emplace(name, t);
  amp::Fp8State b({.scaling = Fp8Scaling::delayed, .amax_history_len = 4});
  b.load_state(saved);
  ASSERT_EQ(b.sites(), a.sites());
  for (size_t k = 0; k < 3; ++k) {
    const amp::Fp8Meta &ma = a.metas(0)[k], &mb = b.metas(0)[k];
    EXPECT_EQ(ma.history, mb.history);
    EXPECT_EQ(ma.history.size(), 4u);  // rolled: the newest 4 of 6
    EXPECT_EQ(ma.scale, mb.scale);
    EXPECT_EQ(ma.role, mb.role);
  }
  // A history longer than the recipe's, and a stray entry, are refused.
  amp::Fp8State shorter({.scaling = Fp8Scaling::delayed, .amax_history_len = 2});
  EXPECT_THROW(shorter.load_state(saved), Error);
  saved.emplace("fp8/7/0/meta", full({3}, 1.0));
  EXPECT_THROW(b.load_state(saved), Error);
}

// A tiny GPT (linear and attention in FP8) learns a repeating text under every fp8 preset.
TEST(Fp8Training, EveryFp8PresetLearns) {
  const int64_t vocab = 8, t = 16, batch = 4;
  std::vector<double> tokens(static_cast<size_t>(batch * (t + 1)));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = double((i * 3 + i / 5) % vocab);
  for (const amp::Preset& preset : amp::all_presets()) {
    if (!preset.fp8 || preset.fp8->fp4) continue;  // FP4: tests/amp/fp4_recipe_test.cpp
    SCOPED_TRACE(preset.name);
    std::unique_ptr<nn::Model> model = nn::make_model(
        {.name = "gpt", .vocab = vocab, .layers = 1, .heads = 2, .width = 32, .context = t}, 0);
    optim::AdamW opt(model->parameters(), {.lr = 1e-2});
    std::unique_ptr<amp::Fp8State> fp8 = preset.make_fp8_state();
    ASSERT_NE(fp8, nullptr);
    std::vector<double> x(static_cast<size_t>(batch * t)), y(x.size());
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < t; ++i) {
        x[size_t(b * t + i)] = tokens[size_t(b * (t + 1) + i)];
        y[size_t(b * t + i)] = tokens[size_t(b * (t + 1) + i + 1)];
      }
    const Tensor xt = from_values(x, {batch, t}, DType::i64),
                 yt = from_values(y, {batch * t}, DType::i64);
    double first = 0, last = 0;
    for (int step = 0; step < 40; ++step) {
      Tensor loss;
      {
        auto scope = preset.autocast();
        amp::Fp8Autocast fp8_scope(*fp8);
        loss = ops::cross_entropy(model->forward(xt).reshape({batch * t, vocab}), yt);
      }
      loss.backward();
      opt.step();
      opt.zero_grad();
      fp8->update();
      (step == 0 ? first : last) = loss.item();
    }
    EXPECT_EQ(fp8->sites(), 6u);  // c_attn, attention, attn.c_proj, c_fc, mlp.c_proj, lm_head
    EXPECT_LT(last, 0.5 * first) << "first " << first << " last " << last;
  }
}

}  // namespace
}  // namespace mixp
