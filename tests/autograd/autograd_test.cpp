#include <gtest/gtest.h>

#include <cmath>

#include "mixp/autograd.h"
#include "mixp/error.h"
#include "mixp/memory.h"
#include "mixp/ops.h"

namespace mixp {
namespace {

TEST(Autograd, ChainRuleAndAccumulationOverUses) {
  Tensor x = from_values({1, 2, 3}, {3}).set_requires_grad(true);
  Tensor y = ops::sum(ops::add(ops::mul(x, x), x));  // sum(x^2 + x)
  y.backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{3, 5, 7}));
  // A second graph accumulates into the same .grad.
  ops::sum(x).backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{4, 6, 8}));
  EXPECT_EQ(x.grad().tag(), MemoryTag::gradient);
}

// The hook runs once per backward, after the addition, with both uses' gradients summed; the
// order of the calls follows backward (the later layer's leaf first).
TEST(Autograd, TheAccumulatedHookSeesTheFinalGradientOncePerBackward) {
  Tensor a = from_values({1, 2}, {2}).set_requires_grad(true);
  Tensor b = from_values({3, 4}, {2}).set_requires_grad(true);
  std::vector<std::pair<char, std::vector<double>>> calls;
  autograd::set_gradient_accumulated_hook(a, [&] { calls.emplace_back('a', a.grad().to_vector()); });
  autograd::set_gradient_accumulated_hook(b, [&] { calls.emplace_back('b', b.grad().to_vector()); });
  // a is used twice: d/da sum(a*a + a) = 2a + 1.
  Tensor hidden = ops::add(ops::mul(a, a), a);
  ops::sum(ops::mul(hidden, b)).backward();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].first, 'b');
  EXPECT_EQ(calls[0].second, (std::vector<double>{2, 6}));
  EXPECT_EQ(calls[1].first, 'a');
  EXPECT_EQ(calls[1].second, (std::vector<double>{3 * 3, 5 * 4}));
  ops::sum(a).backward();  // accumulates: the hook sees the running total
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[2].second, (std::vector<double>{10, 21}));
  autograd::set_gradient_accumulated_hook(a, {});
  ops::sum(a).backward();
  EXPECT_EQ(calls.size(), 3u);
  Tensor not_leaf = ops::mul(a, a);
  EXPECT_THROW(autograd::set_gradient_accumulated_hook(not_leaf, [] {}), Error);
}

// Backward writes a leaf's first gradient of a step into the storage given (assigned, so -0.0
// stays -0.0), adds later ones there in place, and takes new memory when the storage's dtype is
// not the gradient's.
TEST(Autograd, AGradientGoesIntoTheStorageGivenForIt) {
  Tensor a = from_values({1, 2}, {2}).set_requires_grad(true);
  Tensor buffer = zeros({5});
  const Tensor storage = buffer.slice(1, 3);
  autograd::set_gradient_storage(a, storage);
  ops::sum(ops::mul(a, from_values({-0.0, 3}, {2}))).backward();
  ASSERT_EQ(a.grad().raw_data(), storage.raw_data());
  EXPECT_TRUE(std::signbit(a.grad().to_vector()[0]));
  EXPECT_EQ(buffer.to_vector(), (std::vector<double>{0, -0.0, 3, 0, 0}));
  ops::sum(a).backward();  // accumulates in place
  EXPECT_EQ(a.grad().raw_data(), storage.raw_data());
  EXPECT_EQ(buffer.to_vector(), (std::vector<double>{0, 1, 4, 0, 0}));
  a.set_grad(Tensor());
  a.set_grad_dtype(DType::f64);
  ops::sum(a).backward();
  EXPECT_NE(a.grad().raw_data(), storage.raw_data());
  EXPECT_EQ(a.grad().dtype(), DType::f64);
  EXPECT_THROW(autograd::set_gradient_storage(a, zeros({3})), Error);
  EXPECT_THROW(autograd::set_gradient_storage(ops::mul(a, a), storage), Error);
}

// A leaf's first gradient of a step is the weight-gradient kernel's own buffer when nothing
// else holds it: one gradient's bytes at the peak, not the kernel's buffer and a copy. A
// gradient that something else still holds (here a hook's capture) is copied, so that later
// accumulation into .grad cannot change what the holder sees.
TEST(Autograd, ALeafTakesAGradientNothingElseHolds) {
  const int64_t out = 3, in = 4, bytes = out * in * int64_t(sizeof(float));
  Tensor x = from_values({1, 2, 3, 4, 5, 6, 7, 8}, {2, in});
  Tensor w = zeros({out, in}).set_requires_grad(true);
  // d sum(x w^T) / dw[o][i] = sum over the rows of x[t][i], for every o.
  const std::vector<double> xs = x.to_vector();
  std::vector<double> expected(static_cast<size_t>(out * in));
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) expected[size_t(o * in + i)] = xs[size_t(i)] + xs[size_t(in + i)];
  }
  memory::reset_peaks();
  const int64_t before = memory::stats().current(MemoryTag::gradient);
  ops::sum(ops::linear(x, w)).backward();
  EXPECT_EQ(w.grad().to_vector(), expected);
  EXPECT_EQ(w.grad().tag(), MemoryTag::gradient);
  EXPECT_EQ(memory::stats().peak(MemoryTag::gradient) - before, bytes);

  Tensor captured;
  w.set_grad(Tensor());
  const Tensor hooked = autograd::with_gradient_hook(w, [&](const Tensor& g) { captured = g; });
  ops::sum(ops::linear(x, hooked)).backward();
  ASSERT_TRUE(captured.defined());
  EXPECT_NE(w.grad().raw_data(), captured.raw_data());
  ops::sum(ops::linear(x, w)).backward();  // accumulates into .grad in place
  EXPECT_EQ(captured.to_vector(), expected);
  EXPECT_EQ(w.grad().to_vector(), ops::mul_scalar(captured, 2.0).to_vector());
}

TEST(Autograd, NoGradDetachAndLeaves) {
  Tensor x = ones({2}).set_requires_grad(true);
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(ops::exp(x).requires_grad());
  }
  EXPECT_TRUE(ops::exp(x).requires_grad());
  EXPECT_FALSE(ops::exp(x).detach().requires_grad());
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(ops::exp(x).is_leaf());
  EXPECT_THROW(ops::exp(x).set_requires_grad(true), Error);
  EXPECT_THROW(ops::sum(zeros({2})).backward(), Error);  // nothing requires grad
  EXPECT_THROW(ops::exp(x).backward(), Error);           // not a scalar, no gradient given
}

TEST(Autograd, TheGraphIsFreedAfterBackward) {
  Tensor x = ones({4}).set_requires_grad(true);
  Tensor h = ops::exp(x);
  Tensor y = ops::sum(h);
  y.backward();
  EXPECT_THROW(y.backward(), Error);  // freed
}

TEST(Autograd, InPlaceChangeOfASavedTensorIsCaught) {
  Tensor x = ones({3}).set_requires_grad(true);
  Tensor h = ops::mul_scalar(x, 2.0);
  Tensor y = ops::sum(ops::mul(h, h));  // saves h
  h.fill_(5.0);
  EXPECT_THROW(y.backward(), Error);
}

TEST(Autograd, LowPrecisionLeafCanAccumulateInFp32) {
  Tensor w = full({3}, 1.0, DType::bf16).set_requires_grad(true).set_grad_dtype(DType::f32);
  for (int i = 0; i < 3; ++i) {
    ops::sum(ops::mul_scalar(w, 1.0 + 0x1p-9)).backward();
  }
  EXPECT_EQ(w.grad().dtype(), DType::f32);
  // In bf16, 1 + 2^-9 rounds to 1; the fp32 buffer keeps it: 3 (1 + 2^-9) exactly.
  EXPECT_EQ(w.grad().to_vector()[0], double(3.0f * float(bfloat16(1.0f + 0x1p-9f))));
  Tensor plain = full({3}, 1.0, DType::bf16).set_requires_grad(true);
  ops::sum(plain).backward();
  EXPECT_EQ(plain.grad().dtype(), DType::bf16);
}

TEST(Autograd, SavedActivationsKeepTheirDtype) {
  const Tensor w = full({256, 256}, 0.01, DType::bf16).set_requires_grad(true);
  const Tensor x = full({64, 256}, 1.0, DType::bf16);
  const int64_t before = memory::stats().current(DType::bf16);
  Tensor h = ops::tanh(ops::matmul(x, w));  // matmul saves x and w, tanh saves its output
  const int64_t held = memory::stats().current(DType::bf16) - before;
  // What stays is tanh's output, saved by tanh for backward: bf16, 2 bytes an element. The
  // matmul's bf16 output is saved by nobody and freed; nothing was kept widened.
  EXPECT_EQ(held, 64 * 256 * 2);
  ops::sum(h).backward();
  EXPECT_EQ(w.grad().dtype(), DType::bf16);
}

TEST(Autograd, DiamondGraphsRunEachNodeOnce) {
  Tensor x = from_values({0.5, -1.0}, {2}).set_requires_grad(true);
  Tensor a = ops::exp(x);
  Tensor b = ops::mul(a, a);  // a used twice
  Tensor c = ops::add(b, a);  // and a third time
  ops::sum(c).backward();
  const std::vector<double> v = x.to_vector(), g = x.grad().to_vector();
  for (size_t i = 0; i < 2; ++i) {
    const double e = std::exp(v[i]);
    EXPECT_NEAR(g[i], 2 * e * e + e, 1e-5 * (2 * e * e + e));
  }
}

TEST(Autograd, GradientHookSeesTheGradientAndPassesItOn) {
  Tensor x = from_values({1, 2, 3}, {3}).set_requires_grad(true);
  const Tensor c = from_values({0.5, -4, 8}, {3});
  std::vector<double> seen;
  int calls = 0;
  const Tensor y = ops::mul(x, x);  // dy/dx = 2x
  const Tensor hooked = autograd::with_gradient_hook(y, [&](const Tensor& g) {
    seen = g.to_vector();
    ++calls;
  });
  EXPECT_EQ(hooked.raw_data(), y.raw_data()) << "an alias, not a copy";
  ops::sum(ops::mul(hooked, c)).backward();  // dL/dy = c
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, c.to_vector());
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{1, -16, 48}));
  // Nothing to hook: the tensor itself comes back, and the hook never runs.
  const Tensor plain = from_values({1, 2}, {2});
  EXPECT_TRUE(autograd::with_gradient_hook(plain, [&](const Tensor&) { ++calls; }).is_same(plain));
  {
    NoGradGuard no_grad;
    EXPECT_TRUE(autograd::with_gradient_hook(x, [&](const Tensor&) { ++calls; }).is_same(x));
  }
  EXPECT_EQ(calls, 1);
  EXPECT_THROW(autograd::with_gradient_hook(x, nullptr), Error);
}

TEST(Autograd, AddAndSubHandTheGradientOnWithoutCopying) {
  // The gradient of a + b is g for both inputs, and of a - b g for a: one tensor, shared (no
  // node changes a gradient in place). -g for b is a new tensor; a broadcast input gets g summed.
  Tensor a = from_values({1, 2, 3}, {3}).set_requires_grad(true);
  Tensor b = from_values({4, 5, 6}, {3}).set_requires_grad(true);
  Tensor row = from_values({7}, {1}).set_requires_grad(true);
  const void* seen[3] = {nullptr, nullptr, nullptr};
  std::vector<double> values[3];
  auto hook = [&](int i) {
    return [&, i](const Tensor& g) {
      seen[i] = g.raw_data();
      values[i] = g.to_vector();
    };
  };
  const Tensor ha = autograd::with_gradient_hook(a, hook(0));
  const Tensor hb = autograd::with_gradient_hook(b, hook(1));
  const Tensor hr = autograd::with_gradient_hook(row, hook(2));
  const Tensor c = from_values({0.5, -4, 8}, {3});
  ops::sum(ops::mul(ops::add(ops::add(ha, hb), hr), c)).backward();  // every gradient: c (or sum)
  EXPECT_EQ(seen[0], seen[1]) << "add: one gradient tensor for both inputs";
  EXPECT_EQ(values[0], c.to_vector());
  EXPECT_EQ(values[2], (std::vector<double>{4.5}));
  EXPECT_EQ(a.grad().to_vector(), c.to_vector());
  EXPECT_EQ(b.grad().to_vector(), c.to_vector());
  EXPECT_EQ(row.grad().to_vector(), (std::vector<double>{4.5}));

  a.set_grad(Tensor());
  b.set_grad(Tensor());
  const Tensor ha2 = autograd::with_gradient_hook(a, hook(0));
  const Tensor hb2 = autograd::with_gradient_hook(b, hook(1));
  ops::sum(ops::mul(ops::sub(ha2, hb2), c)).backward();
  EXPECT_NE(seen[0], seen[1]) << "sub: -g is a tensor of its own";
  EXPECT_EQ(values[0], c.to_vector());
  EXPECT_EQ(values[1], (std::vector<double>{-0.5, 4, -8}));
  EXPECT_EQ(b.grad().to_vector(), (std::vector<double>{-0.5, 4, -8}));
}

}  // namespace
}  // namespace mixp
