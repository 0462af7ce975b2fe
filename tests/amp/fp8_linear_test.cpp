// FP8 Linear and attention under amp::Fp8Autocast: forward and gradients against a reference
// computed from the quantized values, the weight cache, site numbering, the amax histories.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "mixp/amp/autocast.h"
#include "mixp/amp/fp8.h"
#include "mixp/autograd.h"
#include "mixp/error.h"
#include "mixp/ops.h"
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
  const Fp8Scaling s = !weight && r.scaling == Fp8Scaling::block_128x128 ? Fp8Scaling::block_1x128
                                                                          : r.scaling;
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

}  // namespace
}  // namespace mixp
