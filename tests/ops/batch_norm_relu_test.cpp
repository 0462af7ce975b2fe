// batch_norm_relu against the two ops it fuses: relu(batch_norm(x)) gives the same bits in the
// output, the running stats and every gradient, for each floating dtype, in training and
// evaluation, with and without the affine parameters, on the fast kernels and on the
// reference ones; its fused kernels agree with their fallback (the unfused kernels, double
// accumulation in reference mode) within the tests' tolerance and do not depend on the thread
// count; the bf16 and f16 rows on AVX-512 BF16 give the chunked kernels' bits; nn::Sequential runs
// a BatchNorm2d and a ReLU through it unless a hook watches the norm.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kernels/batch_norm.h"
#include "mixp/autograd.h"
#include "mixp/cpu.h"
#include "mixp/nn/activation.h"
#include "mixp/nn/batch_norm.h"
#include "mixp/nn/sequential.h"
#include "mixp/ops.h"
#include "mixp/random.h"
#include "mixp/runtime.h"
#include "support/same_bits.h"
#include "support/tolerance.h"

namespace mixp {
namespace {

using test::same_bits;

struct Results {
  Tensor y, dx, dw, db, running_mean, running_var;
};

struct Case {
  Shape x;
  DType dtype;
  bool training, affine;
  std::string name() const {
    return x.to_string() + " " + name_of(dtype) + (training ? " training" : " evaluation") +
           (affine ? " affine" : " plain");
  }
};

// The inputs of a case, drawn from `seed` on the fast kernels and kept as exact values, so
// that both modes see the same ones: x around a shifted mean so that about half the outputs
// are cut.
struct Inputs {
  std::vector<double> x, w, b, running_mean, running_var, g;
};

Inputs draw(const Case& c, uint64_t seed) {
  Philox rng(PhiloxState{seed, 0, 0});
  const int64_t channels = c.x[1];
  Inputs in;
  in.x = ops::add_scalar(randn(c.x, rng, 1.5, DType::f32), 0.3).to(c.dtype).to_vector();
  in.w = randn({channels}, rng, 0.7, DType::f32).to_vector();
  in.b = randn({channels}, rng, 0.5, DType::f32).to_vector();
  in.running_mean = randn({channels}, rng, 0.2, DType::f32).to_vector();
  for (int64_t k = 0; k < channels; ++k) in.running_var.push_back(0.5 + 0.25 * double(k % 5));
  in.g = randn(c.x, rng, 1.0, c.dtype).to_vector();
  return in;
}

enum class Form { fused, unfused, batch_norm_only };

// One forward and backward of batch_norm_relu (fused), relu(batch_norm), or batch_norm alone.
Results run(const Case& c, const Inputs& in, Form form) {
  const int64_t channels = c.x[1];
  Tensor x = from_values(in.x, c.x, c.dtype).set_requires_grad(true);
  Tensor w, b;
  if (c.affine) {
    w = from_values(in.w, {channels}, DType::f32).set_requires_grad(true);
    b = from_values(in.b, {channels}, DType::f32).set_requires_grad(true);
  }
  Tensor running_mean = from_values(in.running_mean, {channels}, DType::f32);
  Tensor running_var = from_values(in.running_var, {channels}, DType::f32);
  const Tensor g = from_values(in.g, c.x, c.dtype);
  Tensor y;
  if (form == Form::fused) {
    y = ops::batch_norm_relu(x, w, b, running_mean, running_var, c.training);
  } else {
    y = ops::batch_norm(x, w, b, running_mean, running_var, c.training);
    if (form == Form::unfused) y = ops::relu(y);
  }
  y.backward(g);
  return {.y = y.detach(),
          .dx = x.grad(),
          .dw = c.affine ? w.grad() : Tensor(),
          .db = c.affine ? b.grad() : Tensor(),
          .running_mean = running_mean,
          .running_var = running_var};
}

Results run(const Case& c, bool fused, uint64_t seed) {
  return run(c, draw(c, seed), fused ? Form::fused : Form::unfused);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    for (const Shape& shape : {Shape{4, 3, 5, 7}, Shape{8, 32, 14, 14}, Shape{5, 4}}) {
      for (const bool training : {true, false}) {
        for (const bool affine : {true, false}) out.push_back({shape, dtype, training, affine});
      }
    }
  }
  return out;
}

void expect_same_results(const Results& got, const Results& want) {
  EXPECT_TRUE(same_bits(got.y, want.y)) << "y";
  EXPECT_TRUE(same_bits(got.dx, want.dx)) << "dx";
  EXPECT_TRUE(same_bits(got.dw, want.dw)) << "dweight";
  EXPECT_TRUE(same_bits(got.db, want.db)) << "dbias";
  EXPECT_TRUE(same_bits(got.running_mean, want.running_mean)) << "running_mean";
  EXPECT_TRUE(same_bits(got.running_var, want.running_var)) << "running_var";
}

class BatchNormReluModes : public ::testing::TestWithParam<bool> {};  // true: reference kernels

TEST_P(BatchNormReluModes, IsReluOfBatchNormBitForBit) {
  uint64_t seed = 1;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name());
    const Inputs in = draw(c, seed++);
    std::optional<ReferenceMode> reference;
    if (GetParam()) reference.emplace();
    const Results fused = run(c, in, Form::fused), unfused = run(c, in, Form::unfused);
    ASSERT_EQ(fused.y.dtype(), c.dtype);
    ASSERT_TRUE(fused.y.shape() == c.x);
    // Not vacuous: some outputs are cut and some pass.
    const std::vector<double> y = fused.y.to_vector();
    EXPECT_GT(std::count(y.begin(), y.end(), 0.0), 0);
    EXPECT_LT(std::count(y.begin(), y.end(), 0.0), int64_t(y.size()));
    expect_same_results(fused, unfused);
  }
}

INSTANTIATE_TEST_SUITE_P(FastAndReference, BatchNormReluModes, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "reference" : "fast"; });

// The fused kernels against their fallback, the unfused reference kernels accumulating in
// double: within the tolerance of the dtype and the channel's reduction length.
TEST(BatchNormRelu, FusedKernelsAgreeWithTheFallback) {
  if (reference_mode()) GTEST_SKIP() << "MIXP_REFERENCE=1 runs the fallback on both sides";
  uint64_t seed = 100;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name());
    const Inputs in = draw(c, seed++);
    const Results fast = run(c, in, Form::fused);
    Results fallback;
    {
      ReferenceMode reference;
      fallback = run(c, in, Form::fused);
    }
    const int64_t per_channel = c.x.numel() / c.x[1];
    const test::Tolerance tol = test::tolerance(c.dtype, per_channel);
    EXPECT_EQ(test::compare(fast.y, fallback.y, tol), "") << "y";
    EXPECT_EQ(test::compare(fast.dx, fallback.dx, tol), "") << "dx";
    if (c.affine) {
      const test::Tolerance f32_tol = test::tolerance(DType::f32, per_channel);
      EXPECT_EQ(test::compare(fast.dw, fallback.dw, f32_tol), "") << "dweight";
      EXPECT_EQ(test::compare(fast.db, fallback.db, f32_tol), "") << "dbias";
    }
  }
}

TEST(BatchNormRelu, BitsDoNotDependOnTheThreadCount) {
  const int threads = num_threads();
  const Case c{Shape{8, 32, 14, 14}, DType::bf16, true, true};
  set_num_threads(1);
  const Results one = run(c, true, 7);
  for (int t : {2, 3}) {
    set_num_threads(t);
    SCOPED_TRACE(std::to_string(t) + " threads");
    expect_same_results(run(c, true, 7), one);
  }
  set_num_threads(threads);
}

TEST(BatchNormRelu, TheRegistryRunsTheFusedKernelsAndTheUnfusedOnesForReference) {
  const Tensor none;
  Tensor mean = empty({3}), rstd = empty({3}), unused;
  auto forward = [&](DType dt) {
    const Tensor x = zeros({2, 3, 4, 4}, dt);
    Tensor y = empty(x.shape(), dt);
    return std::string(
        kernels::batch_norm_relu_forward.select(x, none, none, unused, unused, {}, y, mean, rstd)
            .name);
  };
  auto backward = [&](DType dt) {
    const Tensor x = zeros({2, 3, 4, 4}, dt);
    Tensor dx = empty(x.shape(), dt);
    return std::string(kernels::batch_norm_relu_backward
                           .select(x, x, x, none, mean, rstd, true, dx, unused, unused)
                           .name);
  };
  {
    ReferenceMode reference;
    EXPECT_EQ(forward(DType::bf16), "unfused");
    EXPECT_EQ(backward(DType::bf16), "unfused");
  }
  if (reference_mode()) GTEST_SKIP() << "MIXP_REFERENCE=1 chooses the fallback everywhere";
  EXPECT_EQ(forward(DType::f32), "openmp_fused");
  EXPECT_EQ(backward(DType::f64), "openmp_fused");
  if (best_isa() >= Isa::avx512_bf16) {
    for (const DType dt : {DType::bf16, DType::f16}) {
      EXPECT_EQ(forward(dt), "half_rows_fused");
      EXPECT_EQ(backward(dt), "half_rows_fused");
    }
  }
  IsaLimit no_bf16(Isa::avx512);
  EXPECT_EQ(forward(DType::bf16), "openmp_fused");
  EXPECT_EQ(backward(DType::f16), "openmp_fused");
}

// The bf16 and f16 rows, widened and rounded in registers on AVX-512 BF16, give the bits of the
// chunked kernels' fp32 loops (the same kernels with AVX-512 BF16 out of reach), fused and
// plain, at runs of 1, 35 (a partial vector) and 196 values.
TEST(BatchNormRelu, HalfRowsGiveTheChunkedKernelsBits) {
  if (reference_mode()) GTEST_SKIP() << "MIXP_REFERENCE=1 runs the fallback on both sides";
  if (best_isa() < Isa::avx512_bf16) GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
  uint64_t seed = 300;
  for (const Shape& shape : {Shape{4, 3, 5, 7}, Shape{8, 32, 14, 14}, Shape{5, 4}}) {
    for (const bool training : {true, false}) {
      for (const auto& [affine, dtype] :
           {std::pair{true, DType::bf16}, std::pair{false, DType::bf16},
            std::pair{true, DType::f16}, std::pair{false, DType::f16}}) {
        const Case c{shape, dtype, training, affine};
        SCOPED_TRACE(c.name());
        const Inputs in = draw(c, seed++);
        for (const Form form : {Form::fused, Form::batch_norm_only}) {
          const Results rows = run(c, in, form);
          Results chunked;
          {
            IsaLimit no_bf16(Isa::avx512);
            chunked = run(c, in, form);
          }
          expect_same_results(rows, chunked);
        }
      }
    }
  }
}

// The cnn's pattern in a Sequential: the fused op's results; with a hook on the norm, the hook
// sees batch norm's own output (negative values included) and the result is unchanged.
TEST(BatchNormRelu, SequentialFusesANormAndAReluUnlessAHookWatches) {
  auto make = [] {
    auto seq = std::make_shared<nn::Sequential>();
    seq->push_back(std::make_shared<nn::BatchNorm2d>(nn::BatchNorm2dOptions(6)));
    seq->push_back(std::make_shared<nn::ReLU>());
    return seq;
  };
  Philox rng(PhiloxState{5, 0, 0});
  const Tensor x = randn({4, 6, 5, 5}, rng, 1.0, DType::bf16);
  auto plain = make(), hooked = make();
  const Tensor y = plain->forward(x);
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_STREQ(y.grad_fn()->name, "batch_norm_relu");
  double hooked_min = 0;
  (*hooked)[0].add_forward_hook([&](nn::Module&, const Tensor& out) {
    const std::vector<double> v = out.to_vector();
    hooked_min = *std::min_element(v.begin(), v.end());
    return out;
  });
  const Tensor y_hooked = hooked->forward(x);
  EXPECT_LT(hooked_min, 0.0);
  EXPECT_STREQ(y_hooked.grad_fn()->name, "relu");
  EXPECT_TRUE(same_bits(y.detach(), y_hooked.detach()));
}

}  // namespace
}  // namespace mixp
