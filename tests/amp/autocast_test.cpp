#include "mixp/amp/autocast.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "mixp/autograd.h"
#include "mixp/error.h"
#include "mixp/memory.h"
#include "mixp/op_kind.h"
#include "mixp/ops.h"
#include "mixp/runtime.h"
#include "ops/op_cases.h"

namespace mixp {
namespace {

using amp::Autocast;

Tensor param(const Shape& shape, uint64_t seed) {
  Philox rng({seed});
  return randn(shape, rng, 0.5, DType::f32, MemoryTag::parameter).set_requires_grad(true);
}

Tensor data(const Shape& shape, uint64_t seed, DType dtype = DType::f32) {
  Philox rng({seed});
  return randn(shape, rng, 1.0, dtype);
}

// |a - b| <= atol + rtol |b| elementwise.
void expect_close(const Tensor& a, const Tensor& b, double rtol, double atol = 1e-6) {
  ASSERT_EQ(a.shape(), b.shape());
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_LE(std::fabs(x[i] - y[i]), atol + rtol * std::fabs(y[i])) << "element " << i;
  }
}

TEST(Autocast, EveryOpHasAPolicyRow) {
  const auto ops = all_ops();
  ASSERT_EQ(ops.size(), size_t(kOpKindCount));
  for (int i = 0; i < kOpKindCount; ++i) {
    const OpInfo& row = ops[size_t(i)];
    SCOPED_TRACE(row.name);
    EXPECT_EQ(int(row.kind), i);
    EXPECT_EQ(&op_info(row.kind), &row);
    ASSERT_NE(row.name, nullptr);
    EXPECT_FALSE(std::string(row.name).empty());
    EXPECT_NE(std::string(name_of(row.policy)), "unknown");
    // fp32_output means something only for fp32_compute; a ban names what to use instead.
    if (row.fp32_output) {
      EXPECT_EQ(row.policy, CastPolicy::fp32_compute);
    }
    if (row.policy == CastPolicy::banned) {
      EXPECT_NE(row.alternative, nullptr);
    }
  }
}

TEST(Autocast, TheRowsFollowPyTorchsLists) {
  for (OpKind k : {OpKind::matmul, OpKind::linear, OpKind::bmm, OpKind::conv2d,
                   OpKind::scaled_dot_product_attention}) {
    EXPECT_EQ(op_info(k).policy, CastPolicy::lower_precision) << name_of(k);
  }
  for (OpKind k : {OpKind::softmax, OpKind::log_softmax, OpKind::cross_entropy, OpKind::layer_norm,
                   OpKind::batch_norm, OpKind::exp, OpKind::log, OpKind::pow_scalar, OpKind::sum,
                   OpKind::mean, OpKind::mse_loss, OpKind::rsqrt}) {
    EXPECT_EQ(op_info(k).policy, CastPolicy::fp32_compute) << name_of(k);
  }
  for (OpKind k : {OpKind::add, OpKind::sub, OpKind::mul, OpKind::div, OpKind::cat}) {
    EXPECT_EQ(op_info(k).policy, CastPolicy::promote) << name_of(k);
  }
}

// Every op's public function applies its policy, and every op runs forward and backward under
// autocast with f32 leaves, whose gradients come back in f32.
TEST(Autocast, EveryOpAppliesItsPolicy) {
  std::vector<uint64_t> before;
  for (const OpInfo& op : all_ops()) before.push_back(amp::policy_calls(op.kind));
  uint64_t seed = 0;
  for (const test::OpCase& c : test::all_op_cases()) {
    SCOPED_TRACE(c.name);
    std::vector<Tensor> inputs = test::make_inputs(c, DType::f32, ++seed);
    Tensor y;
    {
      Autocast autocast(DType::bf16);
      y = c.fn(inputs);
      if (y.requires_grad()) ops::sum(y).backward();
    }
    for (const Tensor& t : inputs) {
      if (t.requires_grad() && t.grad().defined()) {
        EXPECT_EQ(t.grad().dtype(), DType::f32);
      }
    }
  }
  for (const OpInfo& op : all_ops()) {
    EXPECT_GT(amp::policy_calls(op.kind), before[size_t(op.kind)]) << op.name;
  }
}

TEST(Autocast, MatmulAndLinearRunInBf16WithFp32GradientsAtTheLeaves) {
  Tensor x = data({3, 4}, 1).set_requires_grad(true);
  Tensor w = param({5, 4}, 2), b = param({5}, 3);
  Tensor y, z, loss;
  {
    Autocast autocast(DType::bf16);
    y = ops::linear(x, w, b);
    z = ops::matmul(x, ops::transpose(w, 0, 1));
    loss = ops::add(ops::sum(y), ops::sum(z));
  }
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_EQ(z.dtype(), DType::bf16);
  EXPECT_EQ(loss.dtype(), DType::f32);  // sum: fp32_compute with an fp32 result
  loss.backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), DType::f32);
  EXPECT_EQ(x.grad().dtype(), DType::f32);
  EXPECT_EQ(b.grad().dtype(), DType::f32);
  // d/dW of sum(x W^T) twice: every row of dW is 2 * the column sums of x (in bf16 here).
  Tensor expected = ops::mul_scalar(ops::sum(x.detach().to(DType::bf16).to(DType::f32), {0}), 2);
  for (int64_t r = 0; r < 5; ++r)
    expect_close(w.grad().slice(r, r + 1).reshape({4}), expected, 1e-2);
  expect_close(b.grad(), full({5}, 3.0), 0);  // three rows of ones
  // The values are those of bf16 inputs with fp32 accumulation.
  Tensor reference = ops::linear(x.detach().to(DType::bf16), w.detach().to(DType::bf16),
                                 b.detach().to(DType::bf16));
  EXPECT_EQ(y.to_vector(), reference.to_vector());
}

TEST(Autocast, LowerPrecisionOpsTakeTheAutocastDtype) {
  Autocast autocast(DType::f16);
  EXPECT_EQ(ops::bmm(data({2, 3, 4}, 1), data({2, 4, 5}, 2)).dtype(), DType::f16);
  EXPECT_EQ(ops::conv2d(data({1, 2, 5, 5}, 3), param({3, 2, 3, 3}, 4), param({3}, 5)).dtype(),
            DType::f16);
  Tensor q = data({1, 2, 4, 8}, 6);
  EXPECT_EQ(ops::scaled_dot_product_attention(q, q, q).dtype(), DType::f16);
  // An explicit output dtype is kept.
  EXPECT_EQ(ops::matmul(data({2, 3}, 7), data({3, 2}, 8), DType::f32).dtype(), DType::f32);
  // f64 is asked for explicitly and not narrowed (as in PyTorch).
  EXPECT_EQ(ops::matmul(data({2, 3}, 7, DType::f64), data({3, 2}, 8, DType::f64)).dtype(),
            DType::f64);
}

TEST(Autocast, NormalizationsReturnTheInputDtypeAndLossesFp32) {
  Tensor x = data({4, 6}, 1, DType::bf16);
  Tensor img = data({2, 3, 4, 4}, 2, DType::bf16);
  Tensor rm = zeros({3}), rv = ones({3});
  const Tensor plain_softmax = ops::softmax(x);
  Autocast autocast(DType::bf16);
  const Tensor s = ops::softmax(x);
  EXPECT_EQ(s.dtype(), DType::bf16);
  EXPECT_EQ(s.to_vector(), plain_softmax.to_vector());  // fp32 inside either way, rounded once
  EXPECT_EQ(ops::softmax(data({4, 6}, 1)).dtype(), DType::f32);  // the input's dtype
  EXPECT_EQ(ops::layer_norm(x, param({6}, 3), param({6}, 4)).dtype(), DType::bf16);
  EXPECT_EQ(ops::batch_norm(img, param({3}, 5), param({3}, 6), rm, rv, true).dtype(), DType::bf16);
  EXPECT_EQ(rm.dtype(), DType::f32);  // running stats are updated in place, never cast
  EXPECT_NE(rm.to_vector(), std::vector<double>(3, 0.0));
  EXPECT_EQ(ops::avg_pool2d(img, 2, 2).dtype(), DType::bf16);
  EXPECT_EQ(ops::adaptive_avg_pool2d(img, 1, 1).dtype(), DType::bf16);
  EXPECT_EQ(ops::log_softmax(x).dtype(), DType::f32);
  EXPECT_EQ(ops::exp(x).dtype(), DType::f32);
  EXPECT_EQ(ops::sum(x).dtype(), DType::f32);
  EXPECT_EQ(ops::mse_loss(x, data({4, 6}, 7)).dtype(), DType::f32);
  const Tensor targets = from_values({0, 5, 2, 1}, {4}, DType::i64);
  EXPECT_EQ(ops::cross_entropy(x, targets).dtype(), DType::f32);
  // keep: runs in what it is given.
  EXPECT_EQ(ops::relu(x).dtype(), DType::bf16);
  EXPECT_EQ(ops::relu(data({3}, 8)).dtype(), DType::f32);
}

TEST(Autocast, GradientsComeBackInTheLeafDtypeThroughFp32Compute) {
  Tensor x = data({3, 5}, 1, DType::bf16).set_requires_grad(true);
  Tensor loss;
  {
    Autocast autocast(DType::bf16);
    loss = ops::sum(ops::mul(ops::softmax(x), data({3, 5}, 2, DType::bf16)));
    loss.backward();  // backward inside the scope runs without autocast
  }
  EXPECT_EQ(x.grad().dtype(), DType::bf16);
}

TEST(Autocast, PromoteGoesToTheWidestFloatingDtype) {
  const Tensor b16 = data({2, 3}, 1, DType::bf16), h16 = data({2, 3}, 2, DType::f16);
  const Tensor f32 = data({2, 3}, 3), f64 = data({2, 3}, 4, DType::f64);
  EXPECT_THROW(ops::add(b16, f32), Error);  // no promotion without autocast
  Autocast autocast(DType::bf16);
  EXPECT_EQ(ops::add(b16, f32).dtype(), DType::f32);
  EXPECT_EQ(ops::sub(f32, b16).dtype(), DType::f32);
  EXPECT_EQ(ops::mul(b16, h16).dtype(), DType::f32);  // neither holds the other
  EXPECT_EQ(ops::div(f64, f32).dtype(), DType::f64);
  EXPECT_EQ(ops::mul(b16, b16).dtype(), DType::bf16);
  EXPECT_EQ(ops::mul(h16, data({3}, 5, DType::f16)).dtype(), DType::f16);
  EXPECT_EQ(ops::cat({b16, f32, b16}, 0).dtype(), DType::f32);
  EXPECT_EQ(ops::cat({b16, h16}, 1).dtype(), DType::f32);
}

// add and sub (fp32_inside promote rows) read an fp32 and a bf16 or f16 input of one shape as
// they are: the same bits as autocast's widened copy would give, in value and gradient, without
// allocating the copy.
TEST(Autocast, AddAndSubReadTheNarrowInputWithoutAWidenedCopy) {
  const Shape shape{3, 70, 33};  // several blocks of the elementwise kernels, and a tail
  for (DType narrow : {DType::bf16, DType::f16}) {
    for (bool reference : {false, true}) {
      SCOPED_TRACE(std::string(name_of(narrow)) + (reference ? " reference" : " fast"));
      std::optional<ReferenceMode> mode;
      if (reference) mode.emplace();
      const Tensor g = data(shape, 9);
      for (int op = 0; op < 3; ++op) {  // add(wide, narrow), add(narrow, wide), sub(wide, narrow)
        Tensor wide = data(shape, 1).set_requires_grad(true);
        Tensor thin = data(shape, 2, narrow).set_requires_grad(true);
        auto apply = [&](const Tensor& w, const Tensor& t) {
          return op == 0 ? ops::add(w, t) : op == 1 ? ops::add(t, w) : ops::sub(w, t);
        };
        Tensor got;
        memory::Stats before, after;
        {
          Autocast autocast(DType::bf16);
          before = memory::stats();
          memory::reset_peaks();
          got = apply(wide, thin);
          after = memory::stats();
        }
        EXPECT_EQ(got.dtype(), DType::f32);
        if (!reference_mode()) {  // the reference kernels widen whole inputs, as they always do
          EXPECT_EQ(after.peak_total - before.current_total, got.numel() * 4) << "op " << op;
        }
        got.backward(g);
        const Tensor want_wide_grad = wide.grad(), want_thin_grad = thin.grad();
        wide.set_grad(Tensor());
        thin.set_grad(Tensor());
        const Tensor want = apply(wide, thin.to(DType::f32));  // widened by hand, no autocast
        want.backward(g);
        EXPECT_EQ(got.to_vector(), want.to_vector()) << "op " << op;
        EXPECT_EQ(want_thin_grad.dtype(), narrow);
        EXPECT_EQ(want_wide_grad.to_vector(), wide.grad().to_vector()) << "op " << op;
        EXPECT_EQ(want_thin_grad.to_vector(), thin.grad().to_vector()) << "op " << op;
      }
    }
  }
  // A broadcast, or two narrow inputs, still promote through a widened copy.
  Autocast autocast(DType::bf16);
  EXPECT_EQ(ops::add(data({2, 3}, 1), data({3}, 2, DType::bf16)).dtype(), DType::f32);
  EXPECT_EQ(ops::sub(data({3}, 2, DType::f16), data({2, 3}, 1, DType::bf16)).dtype(), DType::f32);
}

TEST(Autocast, ScopesNestAndAnInnerScopeCanDisable) {
  EXPECT_FALSE(amp::autocast_enabled());
  const Tensor a = data({2, 3}, 1), b = data({3, 2}, 2);
  EXPECT_EQ(ops::matmul(a, b).dtype(), DType::f32);
  {
    Autocast outer(DType::bf16);
    EXPECT_TRUE(amp::autocast_enabled());
    EXPECT_EQ(amp::autocast_dtype(), DType::bf16);
    EXPECT_EQ(ops::matmul(a, b).dtype(), DType::bf16);
    {
      Autocast inner(DType::f16);
      EXPECT_EQ(ops::matmul(a, b).dtype(), DType::f16);
      {
        Autocast off(DType::f16, false);
        EXPECT_FALSE(amp::autocast_enabled());
        EXPECT_EQ(ops::matmul(a, b).dtype(), DType::f32);
      }
      EXPECT_EQ(ops::matmul(a, b).dtype(), DType::f16);
    }
    EXPECT_EQ(ops::matmul(a, b).dtype(), DType::bf16);
  }
  EXPECT_FALSE(amp::autocast_enabled());
  EXPECT_EQ(ops::matmul(a, b).dtype(), DType::f32);
  EXPECT_THROW({ Autocast bad(DType::f32); }, Error);
  EXPECT_THROW({ Autocast bad(DType::e4m3, false); }, Error);
  EXPECT_FALSE(amp::autocast_enabled());
}

TEST(Autocast, IsSuspendedInsideAnOpsBody) {
  Autocast autocast(DType::bf16);
  const Tensor a = data({2, 3}, 1);
  {
    const auto cast = amp::autocast_inputs(OpKind::matmul, {&a});
    EXPECT_EQ(cast[0].dtype(), DType::bf16);
    EXPECT_FALSE(amp::autocast_enabled());  // ops called from an op run as written
  }
  EXPECT_TRUE(amp::autocast_enabled());
}

TEST(Autocast, IntegerInputsAreNeverCast) {
  Autocast autocast(DType::bf16);
  const Tensor idx = from_values({0, 2, 1}, {3}, DType::i64);
  const Tensor f = data({3}, 1);
  for (OpKind k : {OpKind::matmul, OpKind::cross_entropy, OpKind::add, OpKind::embedding}) {
    const auto cast = amp::autocast_inputs(k, {&f, &idx});
    EXPECT_TRUE(cast[1].is_same(idx)) << name_of(k);
  }
  Tensor table = param({4, 3}, 2);
  EXPECT_EQ(ops::embedding(table, idx).dtype(), DType::f32);  // keep
  const Tensor logits = data({3, 4}, 3);
  EXPECT_EQ(ops::cross_entropy(logits, idx).dtype(), DType::f32);
  EXPECT_EQ(idx.dtype(), DType::i64);
}

// The policy function over rows given by value, every policy, banned included (no op is banned
// in the table; a ban is a row's value).
TEST(Autocast, PolicyFunctionOverEveryPolicy) {
  struct Case {
    CastPolicy policy;
    bool fp32_output;
    std::vector<DType> in;
    std::vector<DType> expected;
    std::optional<DType> output;
  };
  using enum DType;
  const std::vector<Case> cases = {
      {CastPolicy::lower_precision,
       false,
       {f32, bf16, f16, f64, i64},
       {bf16, bf16, bf16, f64, i64},
       {}},
      {CastPolicy::fp32_compute, true, {bf16, f16, f32, i64}, {f32, f32, f32, i64}, {}},
      {CastPolicy::fp32_compute, false, {bf16, f32}, {f32, f32}, bf16},
      {CastPolicy::fp32_compute, false, {f16}, {f32}, f16},
      {CastPolicy::fp32_compute, false, {f32, bf16}, {f32, f32}, {}},
      {CastPolicy::fp32_compute, false, {f64}, {f64}, {}},
      {CastPolicy::promote, false, {bf16, f32, i64}, {f32, f32, i64}, {}},
      {CastPolicy::promote, false, {bf16, f16}, {f32, f32}, {}},
      {CastPolicy::promote, false, {f16, f16}, {f16, f16}, {}},
      {CastPolicy::promote, false, {f32, f64, bf16}, {f64, f64, f64}, {}},
      {CastPolicy::keep, false, {bf16, f32, f64}, {bf16, f32, f64}, {}},
  };
  Autocast autocast(DType::bf16);
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(name_of(c.policy)) + (c.fp32_output ? " fp32_output" : ""));
    const OpInfo row{OpKind::add, "add", c.policy, c.fp32_output};
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < c.in.size(); ++i) {
      inputs.push_back(c.in[i] == i64 ? arange(3, i64) : data({3}, i, c.in[i]));
    }
    std::vector<const Tensor*> pointers;
    for (const Tensor& t : inputs) pointers.push_back(&t);
    pointers.push_back(nullptr);  // an absent input (a bias) stays absent
    const auto cast = amp::autocast_inputs(row, pointers);
    ASSERT_EQ(cast.tensors().size(), c.in.size() + 1);
    for (size_t i = 0; i < c.in.size(); ++i) EXPECT_EQ(cast[i].dtype(), c.expected[i]) << i;
    EXPECT_FALSE(cast.tensors().back().defined());
    EXPECT_EQ(cast.output_dtype(), c.output);
    if (c.output) {
      EXPECT_EQ(cast.output(cast[0]).dtype(), *c.output);
    }
  }
  const OpInfo banned{OpKind::matmul, "matmul", CastPolicy::banned, false, "safe_matmul"};
  const Tensor a = data({2}, 1);
  const std::vector<const Tensor*> one = {&a};
  try {
    (void)amp::autocast_inputs(banned, one);
    ADD_FAILURE() << "a banned op ran under autocast";
  } catch (const Error& e) {
    const std::string m = e.message();
    EXPECT_NE(m.find("matmul"), std::string::npos) << m;
    EXPECT_NE(m.find("safe_matmul"), std::string::npos) << m;
  }
  EXPECT_TRUE(amp::autocast_enabled());  // nothing left suspended by the throw
  Autocast off(DType::bf16, false);
  EXPECT_NO_THROW((void)amp::autocast_inputs(banned, one));  // only under autocast
}

TEST(Autocast, WeightCacheCastsAParameterOnceAndAgainAfterAnInPlaceChange) {
  Tensor w = param({4, 3}, 1);
  const Tensor x = data({2, 3}, 2);
  auto cast_of = [](const Tensor& t) {
    const auto cast = amp::autocast_inputs(OpKind::linear, {&t});
    return cast[0];
  };
  const amp::WeightCacheStats before = amp::weight_cache_stats();
  {
    Autocast autocast(DType::bf16);
    const Tensor c1 = cast_of(w), c2 = cast_of(w);
    EXPECT_EQ(c1.dtype(), DType::bf16);
    EXPECT_TRUE(c1.is_same(c2));
    EXPECT_FALSE(cast_of(x).is_same(cast_of(x)));  // not a parameter: not cached
    amp::WeightCacheStats s = amp::weight_cache_stats();
    EXPECT_EQ(s.casts - before.casts, 1u);
    EXPECT_EQ(s.hits - before.hits, 1u);
    EXPECT_EQ(s.entries, 1u);
    {
      Autocast inner(DType::bf16);  // an inner enabled scope shares the cache
      EXPECT_TRUE(cast_of(w).is_same(c1));
    }
    EXPECT_EQ(amp::weight_cache_stats().entries, 1u);
    {
      NoGradGuard no_grad;  // an in-place change, as an optimizer step makes
      w.copy_(ops::mul_scalar(w, 2.0));
    }
    const Tensor c3 = cast_of(w);
    EXPECT_FALSE(c3.is_same(c1));
    expect_close(c3.to(DType::f32), w.detach().to(DType::bf16).to(DType::f32), 0);
    EXPECT_EQ(amp::weight_cache_stats().casts - before.casts, 2u);
    EXPECT_TRUE(cast_of(w).is_same(c3));
  }
  EXPECT_EQ(amp::weight_cache_stats().entries, 0u);  // emptied at the outermost scope's exit
  {
    Autocast again(DType::bf16);
    cast_of(w);
    EXPECT_EQ(amp::weight_cache_stats().casts - before.casts, 3u);
  }
}

TEST(Autocast, GradientsFlowThroughTheSharedCastOfAParameter) {
  // matmul: under bf16 autocast linear rounds an fp32 weight in its products instead of casting.
  Tensor w = param({3, 4}, 1);
  Tensor w_ref = w.detach().clone().set_requires_grad(true);
  const Tensor x1 = data({2, 3}, 2), x2 = data({5, 3}, 3);
  {
    Autocast autocast(DType::bf16);
    // Two uses of one cast in one graph.
    ops::add(ops::sum(ops::matmul(x1, w)), ops::sum(ops::matmul(x2, w))).backward();
    EXPECT_EQ(amp::weight_cache_stats().entries, 1u);
    // After backward freed the cast's node, the next forward in the scope casts again and
    // its gradient reaches the leaf too.
    ops::sum(ops::matmul(x1, w)).backward();
  }
  ops::add(ops::add(ops::sum(ops::matmul(x1, w_ref)), ops::sum(ops::matmul(x2, w_ref))),
           ops::sum(ops::matmul(x1, w_ref)))
      .backward();
  EXPECT_EQ(w.grad().dtype(), DType::f32);
  expect_close(w.grad(), w_ref.grad(), 2e-2, 2e-2);
}

TEST(Autocast, IsPerThread) {
  const Tensor a = data({2, 3}, 1), b = data({3, 2}, 2);
  Autocast autocast(DType::bf16);
  bool other_enabled = true;
  DType other_dtype = DType::bf16;
  std::thread other([&] {
    other_enabled = amp::autocast_enabled();
    other_dtype = ops::matmul(a, b).dtype();
    Autocast own(DType::f16);  // changes nothing on the main thread
  });
  other.join();
  EXPECT_FALSE(other_enabled);
  EXPECT_EQ(other_dtype, DType::f32);
  EXPECT_EQ(amp::autocast_dtype(), DType::bf16);
  EXPECT_EQ(ops::matmul(a, b).dtype(), DType::bf16);
}

TEST(Autocast, NormalizationsAndCrossEntropyReadLowPrecisionInputsWithoutAWideCopy) {
  // Their kernels compute in fp32 as they read: a widened copy of the bf16 activation would be
  // saved for backward and cost more memory than running without autocast.
  Philox rng(PhiloxState{3, 0, 0});
  const Tensor x = randn({64, 256}, rng, 1.0, DType::bf16).set_requires_grad(true);
  const Tensor w = ones({256}).set_requires_grad(true), b = zeros({256}).set_requires_grad(true);
  const Tensor labels = zeros({64}, DType::i64);
  amp::Autocast scope(DType::bf16);
  const int64_t f32_before = memory::stats().current(DType::f32);
  const Tensor y = ops::layer_norm(x, w, b);
  const Tensor p = ops::softmax(y);
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_EQ(p.dtype(), DType::bf16);
  // What stays in fp32 is layer_norm's per-row mean and rstd (64 + 64 floats), no [64, 256] copy.
  EXPECT_LT(memory::stats().current(DType::f32) - f32_before, int64_t(64 * 256 * 4));
  const Tensor loss = ops::cross_entropy(p, labels);
  EXPECT_EQ(loss.dtype(), DType::f32);
  loss.backward();
  EXPECT_EQ(x.grad().dtype(), DType::bf16);
}

}  // namespace
}  // namespace mixp
