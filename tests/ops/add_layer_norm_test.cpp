// add_layer_norm against the two ops it fuses: add then layer_norm gives the same bits in both
// results and in every gradient (both inputs', the weight's and the bias's), with the gradient
// of either result alone or of both, for fp32 operands and, under autocast, an fp32 and a bf16
// or f16 one in either order, for an fp32, bf16 or f16 normalized result, with and without the
// affine parameters, on the fast kernels and on the reference ones; the general path (other
// dtypes) is the two ops; the bits do not depend on the thread count; the registry picks the
// row kernels and, for reference, the composed fallback; a transformer's fused chain of blocks
// (TransformerBlock::forward_fused) gives the blocks' forward() bits.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kernels/add_layer_norm.h"
#include "mixp/amp/autocast.h"
#include "mixp/autograd.h"
#include "mixp/cpu.h"
#include "mixp/error.h"
#include "mixp/nn/layer_norm.h"
#include "mixp/nn/transformer.h"
#include "mixp/ops.h"
#include "mixp/random.h"
#include "mixp/runtime.h"
#include "support/same_bits.h"

namespace mixp {
namespace {

using test::same_bits;

// Which results' gradients the backward starts from.
enum class Roots { both, sum_only, normalized_only };

struct Case {
  Shape shape;
  DType a_dtype, b_dtype;
  std::optional<DType> autocast;  // the autocast dtype, or none
  std::optional<DType> out_dtype;
  bool weight, bias;
  Roots roots;
  std::string name() const {
    std::string s = shape.to_string() + " a " + name_of(a_dtype) + " b " + name_of(b_dtype);
    if (autocast) s += std::string(" autocast ") + name_of(*autocast);
    if (out_dtype) s += std::string(" out ") + name_of(*out_dtype);
    s += weight ? " weight" : "";
    s += bias ? " bias" : "";
    s += roots == Roots::both ? " both" : roots == Roots::sum_only ? " sum" : " normalized";
    return s;
  }
};

struct Results {
  Tensor sum, y, da, db, dw, dbias;
};

struct Inputs {
  std::vector<double> a, b, w, bias, g_sum, g_y;
};

Inputs draw(const Case& c, uint64_t seed) {
  Philox rng(PhiloxState{seed, 0, 0});
  const int64_t n = c.shape[c.shape.ndim() - 1];
  Inputs in;
  in.a = randn(c.shape, rng, 1.0, c.a_dtype).to_vector();
  in.b = ops::add_scalar(randn(c.shape, rng, 0.5, DType::f32), 0.25).to(c.b_dtype).to_vector();
  in.w = randn({n}, rng, 0.7, DType::f32).to_vector();
  in.bias = randn({n}, rng, 0.3, DType::f32).to_vector();
  in.g_sum = randn(c.shape, rng, 1.0, DType::f32).to_vector();
  in.g_y = randn(c.shape, rng, 1.0, DType::f32).to_vector();
  return in;
}

// One forward and backward, fused or as add then layer_norm.
Results run(const Case& c, const Inputs& in, bool fused) {
  const int64_t n = c.shape[c.shape.ndim() - 1];
  Tensor a = from_values(in.a, c.shape, c.a_dtype).set_requires_grad(true);
  Tensor b = from_values(in.b, c.shape, c.b_dtype).set_requires_grad(true);
  Tensor w = c.weight ? from_values(in.w, {n}).set_requires_grad(true) : Tensor();
  Tensor bias = c.bias ? from_values(in.bias, {n}).set_requires_grad(true) : Tensor();
  ops::SumAndNorm r;
  {
    std::optional<amp::Autocast> autocast;
    if (c.autocast) autocast.emplace(*c.autocast);
    if (fused) {
      r = ops::add_layer_norm(a, b, w, bias, 1e-5, c.out_dtype);
    } else {
      r.sum = ops::add(a, b);
      r.normalized = ops::layer_norm(r.sum, w, bias, 1e-5, c.out_dtype);
    }
  }
  const Tensor g_sum = from_values(in.g_sum, c.shape, r.sum.dtype());
  const Tensor g_y = from_values(in.g_y, c.shape, r.normalized.dtype());
  if (c.roots == Roots::both) {
    autograd::run_backward({r.sum, r.normalized}, {g_sum, g_y});
  } else if (c.roots == Roots::sum_only) {
    r.sum.backward(g_sum);
  } else {
    r.normalized.backward(g_y);
  }
  return {.sum = r.sum.detach(),
          .y = r.normalized.detach(),
          .da = a.grad(),
          .db = b.grad(),
          .dw = c.weight ? w.grad() : Tensor(),
          .dbias = c.bias ? bias.grad() : Tensor()};
}

void expect_same_results(const Results& got, const Results& want) {
  EXPECT_TRUE(same_bits(got.sum, want.sum)) << "sum";
  EXPECT_TRUE(same_bits(got.y, want.y)) << "normalized";
  EXPECT_TRUE(same_bits(got.da, want.da)) << "da";
  EXPECT_TRUE(same_bits(got.db, want.db)) << "db";
  EXPECT_TRUE(same_bits(got.dw, want.dw)) << "dweight";
  EXPECT_TRUE(same_bits(got.dbias, want.dbias)) << "dbias";
}

// The operand pairs the fused kernel takes, with the autocast each needs.
struct Operands {
  DType a, b;
  std::optional<DType> autocast;
};

std::vector<Case> fused_cases() {
  const Operands operands[] = {{DType::f32, DType::f32, std::nullopt},
                               {DType::f32, DType::f32, DType::bf16},
                               {DType::f32, DType::bf16, DType::bf16},
                               {DType::bf16, DType::f32, DType::bf16},
                               {DType::f32, DType::f16, DType::f16}};
  std::vector<Case> out;
  for (const Operands& o : operands) {
    for (const std::optional<DType> out_dtype :
         {std::optional<DType>(), std::optional<DType>(DType::bf16),
          std::optional<DType>(DType::f16)}) {
      for (const Shape& shape : {Shape{4, 7}, Shape{2, 9, 384}, Shape{700, 16}}) {
        for (const Roots roots : {Roots::both, Roots::sum_only, Roots::normalized_only}) {
          out.push_back({shape, o.a, o.b, o.autocast, out_dtype, true, true, roots});
        }
      }
      out.push_back({Shape{5, 33}, o.a, o.b, o.autocast, out_dtype, false, false, Roots::both});
      out.push_back({Shape{5, 33}, o.a, o.b, o.autocast, out_dtype, true, false, Roots::both});
    }
  }
  return out;
}

class AddLayerNormModes : public ::testing::TestWithParam<bool> {};  // true: reference kernels

TEST_P(AddLayerNormModes, IsAddThenLayerNormBitForBit) {
  uint64_t seed = 1;
  std::optional<ReferenceMode> reference;
  if (GetParam()) reference.emplace();
  for (const Case& c : fused_cases()) {
    SCOPED_TRACE(c.name());
    const Inputs in = draw(c, seed++);
    const Results fused = run(c, in, true), unfused = run(c, in, false);
    ASSERT_EQ(fused.sum.dtype(), DType::f32);
    ASSERT_EQ(fused.y.dtype(), c.out_dtype.value_or(DType::f32));
    // Not vacuous: the sum's gradient has both parts where both results have gradients.
    if (c.roots == Roots::both) {
      Case sum_only = c;
      sum_only.roots = Roots::sum_only;
      EXPECT_FALSE(same_bits(run(sum_only, in, true).da, fused.da));
    }
    expect_same_results(fused, unfused);
  }
}

INSTANTIATE_TEST_SUITE_P(FastAndReference, AddLayerNormModes, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "reference" : "fast"; });

// Operands the fused kernel does not take run as the two ops: the same results, and the same
// errors.
TEST(AddLayerNorm, OtherOperandsRunTheTwoOps) {
  uint64_t seed = 500;
  const Case cases[] = {
      {Shape{3, 10}, DType::f64, DType::f64, std::nullopt, std::nullopt, true, true, Roots::both},
      {Shape{3, 10}, DType::bf16, DType::bf16, std::nullopt, std::nullopt, true, true, Roots::both},
      {Shape{3, 10}, DType::bf16, DType::bf16, DType::bf16, std::nullopt, true, false,
       Roots::both}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name());
    const Inputs in = draw(c, seed++);
    expect_same_results(run(c, in, true), run(c, in, false));
  }
  Tensor a = ones({2, 4}), w = ones({4});
  Tensor a_grad = ones({2, 4}).set_requires_grad(true);
  EXPECT_STREQ(ops::add_layer_norm(a_grad, a, w, Tensor()).sum.grad_fn()->name, "add_layer_norm");
  // Broadcasting is add's: the two ops run.
  EXPECT_STREQ(ops::add_layer_norm(a_grad, ones({4}), w, Tensor()).sum.grad_fn()->name, "add");
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string mismatch = message([&] { ops::add_layer_norm(a, ones({3, 4}), w, Tensor()); });
  EXPECT_EQ(mismatch, message([&] { ops::add(a, ones({3, 4})); }));
  EXPECT_NE(mismatch, "no error");
  const std::string bad_weight = message([&] { ops::add_layer_norm(a, a, ones({5}), Tensor()); });
  EXPECT_EQ(bad_weight, message([&] { ops::layer_norm(a, ones({5}), Tensor()); }));
  EXPECT_NE(bad_weight, "no error");
  EXPECT_EQ(message([&] { ops::add_layer_norm(a, a, w, Tensor(), -1.0); }),
            message([&] { ops::layer_norm(a, w, Tensor(), -1.0); }));
  EXPECT_EQ(message([&] {
              ops::add_layer_norm(a, ones({2, 4}, DType::bf16), w, Tensor());
            }),
            message([&] {
              ops::add(a, ones({2, 4}, DType::bf16));
            }));
}

TEST(AddLayerNorm, BitsDoNotDependOnTheThreadCount) {
  const int threads = num_threads();
  const Case c{Shape{700, 48}, DType::f32, DType::bf16, DType::bf16,
               DType::bf16,    true,       true,        Roots::both};
  const Inputs in = draw(c, 7);
  set_num_threads(1);
  const Results one = run(c, in, true);
  for (int t : {2, 3}) {
    set_num_threads(t);
    SCOPED_TRACE(std::to_string(t) + " threads");
    expect_same_results(run(c, in, true), one);
  }
  set_num_threads(threads);
}

TEST(AddLayerNorm, TheRegistryRunsTheRowsAndTheComposedKernelsForReference) {
  const Tensor none;
  Tensor mean = empty({2}), rstd = empty({2}), unset;
  auto forward = [&](DType a_dtype, DType b_dtype) {
    const Tensor a = zeros({2, 8}, a_dtype), b = zeros({2, 8}, b_dtype);
    Tensor sum = empty({2, 8}), y = empty({2, 8}, DType::bf16);
    return std::string(
        kernels::add_layer_norm.select(a, b, none, none, 1e-5, sum, y, mean, rstd).name);
  };
  auto backward = [&](DType g_dtype) {
    const Tensor s = zeros({2, 8}), g_y = zeros({2, 8}, g_dtype);
    Tensor ds = empty({2, 8}), narrow = empty({2, 8}, DType::bf16);
    return std::string(kernels::add_layer_norm_backward
                           .select(s, g_y, s, none, mean, rstd, ds, narrow, unset, unset)
                           .name);
  };
  {
    ReferenceMode reference;
    EXPECT_EQ(forward(DType::f32, DType::bf16), "composed");
    EXPECT_EQ(backward(DType::bf16), "composed");
  }
  if (reference_mode()) GTEST_SKIP() << "MIXP_REFERENCE=1 chooses the fallback everywhere";
  EXPECT_EQ(forward(DType::f32, DType::bf16), "rows");
  EXPECT_EQ(forward(DType::f16, DType::f32), "rows");
  EXPECT_EQ(forward(DType::bf16, DType::bf16), "composed");  // a bf16 sum: not the rows'
  EXPECT_EQ(backward(DType::bf16), "rows");
  EXPECT_EQ(backward(DType::f64), "composed");
}

// Two blocks and a final norm under autocast bf16, as the gpt chains them: the fused chain's
// result and every parameter's and the input's gradient are the bits of forward() block by
// block then the final norm.
TEST(AddLayerNorm, FusedBlocksGiveTheBlocksBits) {
  struct Run {
    Tensor out, dx;
    std::vector<Tensor> grads;
  };
  auto run_blocks = [](bool fused) {
    Philox rng(PhiloxState{21});
    auto dropout_rng = std::make_shared<Philox>();
    nn::TransformerBlock b0({.n_embd = 32, .n_head = 2}, rng, dropout_rng);
    nn::TransformerBlock b1({.n_embd = 32, .n_head = 2}, rng, dropout_rng);
    nn::LayerNorm ln_f(nn::LayerNormOptions(32));
    {
      NoGradGuard no_grad;  // values away from the initial ones, so that every parameter counts
      for (nn::Module* m : std::initializer_list<nn::Module*>{&b0, &b1, &ln_f}) {
        const auto params = m->named_parameters();
        const std::vector<bool> norms = m->norm_parameter_flags();
        for (size_t i = 0; i < params.size(); ++i) {
          Tensor& p = *params[i].second;
          const bool norm_weight = norms[i] && params[i].first.ends_with("weight");
          p.copy_(ops::add_scalar(randn(p.shape(), rng, 0.1), norm_weight ? 1.0 : 0.0));
        }
      }
    }
    Tensor x = randn({2, 16, 32}, rng).set_requires_grad(true);
    Tensor out;
    {
      amp::Autocast autocast(DType::bf16);
      if (fused) {
        ops::SumAndNorm s{.sum = x, .normalized = b0.ln_1().forward_for_linear(x)};
        s = b0.forward_fused(s.sum, s.normalized, b1.ln_1());
        out = b1.forward_fused(s.sum, s.normalized, ln_f).normalized;
      } else {
        out = ln_f.forward_for_linear(b1.forward(b0.forward(x)));
      }
    }
    out.backward(randn(out.shape(), rng, 1.0, out.dtype()));
    Run r{.out = out.detach(), .dx = x.grad(), .grads = {}};
    for (nn::Module* m : std::initializer_list<nn::Module*>{&b0, &b1, &ln_f}) {
      for (auto& [name, p] : m->named_parameters()) r.grads.push_back(p->grad());
    }
    return r;
  };
  const Run fused = run_blocks(true), unfused = run_blocks(false);
  EXPECT_EQ(fused.out.dtype(), DType::bf16);
  EXPECT_TRUE(same_bits(fused.out, unfused.out));
  EXPECT_TRUE(same_bits(fused.dx, unfused.dx));
  ASSERT_EQ(fused.grads.size(), unfused.grads.size());
  for (size_t i = 0; i < fused.grads.size(); ++i) {
    EXPECT_TRUE(same_bits(fused.grads[i], unfused.grads[i])) << "parameter " << i;
  }
}

}  // namespace
}  // namespace mixp
