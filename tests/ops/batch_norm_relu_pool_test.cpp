// batch_norm_relu_max_pool2d against the three ops it fuses: max_pool2d(relu(batch_norm(x)), 2,
// 2) gives the same bits in the output, the running stats and every gradient, for each floating
// dtype, in training and evaluation, with and without the affine parameters, odd heights and
// widths and rows of more than 16 windows, on the fast kernels and on the reference ones; the
// fused kernels agree with their fallback (the unfused kernels, double accumulation in reference
// mode) within the tests' tolerance and do not depend on the thread count; the bf16 and f16
// rows on AVX-512 BF16 give the generic kernel's bits; nn::Sequential runs a BatchNorm2d, a ReLU
// and a 2 x 2 MaxPool2d through it on 16-bit inputs unless a hook watches the norm.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kernels/batch_norm.h"
#include "mixp/autograd.h"
#include "mixp/cpu.h"
#include "mixp/error.h"
#include "mixp/memory.h"
#include "mixp/nn/activation.h"
#include "mixp/nn/batch_norm.h"
#include "mixp/nn/pooling.h"
#include "mixp/nn/sequential.h"
#include "mixp/ops.h"
#include "mixp/random.h"
#include "mixp/runtime.h"
#include "support/same_bits.h"
#include "support/tolerance.h"

namespace mixp {
namespace {

using test::same_bits;

Shape pooled(const Shape& x) { return Shape{x[0], x[1], x[2] / 2, x[3] / 2}; }

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

// A case's inputs, kept as exact values so that both modes see the same ones: x around a
// shifted mean, so that some windows are cut whole and others pass.
struct Inputs {
  std::vector<double> x, w, b, running_mean, running_var, g;
};

Inputs draw(const Case& c, uint64_t seed) {
  Philox rng(PhiloxState{seed, 0, 0});
  const int64_t channels = c.x[1];
  Inputs in;
  in.x = ops::add_scalar(randn(c.x, rng, 1.5, DType::f32), -0.8).to(c.dtype).to_vector();
  in.w = randn({channels}, rng, 0.7, DType::f32).to_vector();
  in.b = randn({channels}, rng, 0.5, DType::f32).to_vector();
  in.running_mean = randn({channels}, rng, 0.2, DType::f32).to_vector();
  for (int64_t k = 0; k < channels; ++k) in.running_var.push_back(0.5 + 0.25 * double(k % 5));
  in.g = randn(pooled(c.x), rng, 1.0, c.dtype).to_vector();
  return in;
}

// One forward and backward of the fused op, or of max_pool2d(relu(batch_norm)).
Results run(const Case& c, const Inputs& in, bool fused) {
  const int64_t channels = c.x[1];
  Tensor x = from_values(in.x, c.x, c.dtype).set_requires_grad(true);
  Tensor w, b;
  if (c.affine) {
    w = from_values(in.w, {channels}, DType::f32).set_requires_grad(true);
    b = from_values(in.b, {channels}, DType::f32).set_requires_grad(true);
  }
  Tensor running_mean = from_values(in.running_mean, {channels}, DType::f32);
  Tensor running_var = from_values(in.running_var, {channels}, DType::f32);
  Tensor y;
  if (fused) {
    y = ops::batch_norm_relu_max_pool2d(x, w, b, running_mean, running_var, c.training);
  } else {
    y = ops::max_pool2d(ops::relu(ops::batch_norm(x, w, b, running_mean, running_var, c.training)),
                        2, 2);
  }
  y.backward(from_values(in.g, pooled(c.x), c.dtype));
  return {.y = y.detach(),
          .dx = x.grad(),
          .dw = c.affine ? w.grad() : Tensor(),
          .db = c.affine ? b.grad() : Tensor(),
          .running_mean = running_mean,
          .running_var = running_var};
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    for (const Shape& shape :
         {Shape{4, 3, 5, 7}, Shape{8, 32, 14, 14}, Shape{3, 2, 2, 2}, Shape{2, 3, 6, 41}}) {
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

class BatchNormReluPoolModes : public ::testing::TestWithParam<bool> {};  // true: reference

TEST_P(BatchNormReluPoolModes, IsMaxPoolOfReluOfBatchNormBitForBit) {
  uint64_t seed = 1;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name());
    const Inputs in = draw(c, seed++);
    std::optional<ReferenceMode> reference;
    if (GetParam()) reference.emplace();
    const Results fused = run(c, in, true), unfused = run(c, in, false);
    ASSERT_EQ(fused.y.dtype(), c.dtype);
    ASSERT_TRUE(fused.y.shape() == pooled(c.x));
    if (c.x.numel() > 100) {  // not vacuous: some windows are cut whole and some pass
      const std::vector<double> y = fused.y.to_vector();
      EXPECT_GT(std::count(y.begin(), y.end(), 0.0), 0);
      EXPECT_LT(std::count(y.begin(), y.end(), 0.0), int64_t(y.size()));
    }
    expect_same_results(fused, unfused);
  }
}

INSTANTIATE_TEST_SUITE_P(FastAndReference, BatchNormReluPoolModes, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "reference" : "fast"; });

// The fused kernels against their fallback, the unfused reference kernels accumulating in
// double: the forward's pooled values within the tolerance of the dtype and the channel's
// reduction length; the backward from the same pooled output and window places, so that both
// send each gradient to the same winner.
TEST(BatchNormReluPool, FusedKernelsAgreeWithTheFallback) {
  if (reference_mode()) GTEST_SKIP() << "MIXP_REFERENCE=1 runs the fallback on both sides";
  uint64_t seed = 100;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name());
    const Inputs in = draw(c, seed++);
    const int64_t channels = c.x[1];
    const Tensor x = from_values(in.x, c.x, c.dtype);
    const Tensor w = c.affine ? from_values(in.w, {channels}, DType::f32) : Tensor();
    const Tensor b = c.affine ? from_values(in.b, {channels}, DType::f32) : Tensor();
    const Tensor g = from_values(in.g, pooled(c.x), c.dtype);
    const DType acc = c.dtype == DType::f64 ? DType::f64 : DType::f32;
    struct Pass {
      Tensor y, window, mean, rstd, dx, dw, db;
    };
    auto forward = [&](Pass& p) {
      Tensor running_mean = from_values(in.running_mean, {channels}, DType::f32);
      Tensor running_var = from_values(in.running_var, {channels}, DType::f32);
      p.y = empty(pooled(c.x), c.dtype);
      p.window = empty(pooled(c.x), DType::u8);
      p.mean = empty({channels}, acc);
      p.rstd = empty({channels}, acc);
      kernels::batch_norm_relu_pool_forward(x, w, b, running_mean, running_var,
                                            {.training = c.training}, p.y, p.window, p.mean,
                                            p.rstd);
    };
    auto backward = [&](const Pass& from, Pass& p) {
      p.dx = empty(c.x, c.dtype);
      p.dw = c.affine ? empty({channels}, DType::f32) : Tensor();
      p.db = c.affine ? empty({channels}, DType::f32) : Tensor();
      kernels::batch_norm_relu_pool_backward(x, from.y, from.window, g, w, from.mean, from.rstd,
                                             c.training, p.dx, p.dw, p.db);
    };
    Pass fast, fallback;
    forward(fast);
    backward(fast, fast);
    {
      ReferenceMode reference;
      forward(fallback);
      backward(fast, fallback);
    }
    const int64_t per_channel = c.x.numel() / channels;
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

TEST(BatchNormReluPool, BitsDoNotDependOnTheThreadCount) {
  const int threads = num_threads();
  for (const DType dtype : {DType::bf16, DType::f32}) {
    const Case c{Shape{8, 32, 14, 14}, dtype, true, true};
    const Inputs in = draw(c, 7);
    set_num_threads(1);
    const Results one = run(c, in, true);
    for (int t : {2, 3}) {
      set_num_threads(t);
      SCOPED_TRACE(std::string(name_of(dtype)) + ", " + std::to_string(t) + " threads");
      expect_same_results(run(c, in, true), one);
    }
  }
  set_num_threads(threads);
}

TEST(BatchNormReluPool, TheRegistryRunsTheFusedKernelsAndTheUnfusedOnesForReference) {
  const Tensor none;
  Tensor mean = empty({3}), rstd = empty({3}), unused;
  Tensor window = empty({2, 3, 2, 2}, DType::u8);
  auto forward = [&](DType dt) {
    const Tensor x = zeros({2, 3, 4, 4}, dt);
    Tensor y = empty({2, 3, 2, 2}, dt);
    return std::string(kernels::batch_norm_relu_pool_forward
                           .select(x, none, none, unused, unused, {}, y, window, mean, rstd)
                           .name);
  };
  auto backward = [&](DType dt) {
    const Tensor x = zeros({2, 3, 4, 4}, dt), y = zeros({2, 3, 2, 2}, dt);
    Tensor dx = empty(x.shape(), dt);
    return std::string(kernels::batch_norm_relu_pool_backward
                           .select(x, y, window, y, none, mean, rstd, true, dx, unused, unused)
                           .name);
  };
  {
    ReferenceMode reference;
    EXPECT_EQ(forward(DType::bf16), "unfused");
    EXPECT_EQ(backward(DType::bf16), "unfused");
  }
  if (reference_mode()) GTEST_SKIP() << "MIXP_REFERENCE=1 chooses the fallback everywhere";
  EXPECT_EQ(forward(DType::f32), "openmp_pooled");
  EXPECT_EQ(forward(DType::f64), "openmp_pooled");
  EXPECT_EQ(backward(DType::f32), "openmp_scatter");
  if (best_isa() >= Isa::avx512_bf16) {
    for (const DType dt : {DType::bf16, DType::f16}) {
      EXPECT_EQ(forward(dt), "half_rows_pooled");
      EXPECT_EQ(backward(dt), "half_rows_folded");
    }
  }
  IsaLimit no_bf16(Isa::avx512);
  EXPECT_EQ(forward(DType::bf16), "openmp_pooled");
  EXPECT_EQ(backward(DType::bf16), "openmp_scatter");
}

// A forward with no window (an evaluation's) gives the same output, statistics and running
// stats as with one, on each candidate the registry can choose: the fused rows, the generic
// kernel and the unfused fallback.
TEST(BatchNormReluPool, EveryCandidateRunsWithoutWindowPlaces) {
  const Case c{Shape{2, 16, 9, 34}, DType::bf16, true, true};
  const Inputs in = draw(c, 11);
  const int64_t channels = c.x[1];
  for (const DType dtype : {DType::bf16, DType::f16, DType::f32}) {
    const Tensor x = from_values(in.x, c.x, dtype);
    const Tensor w = from_values(in.w, {channels}, DType::f32);
    const Tensor b = from_values(in.b, {channels}, DType::f32);
    struct Pass {
      Tensor y, mean, rstd, running_mean, running_var;
    };
    auto forward = [&](bool with_window) {
      Pass p{empty(pooled(c.x), dtype), empty({channels}), empty({channels}),
             from_values(in.running_mean, {channels}, DType::f32),
             from_values(in.running_var, {channels}, DType::f32)};
      Tensor window = with_window ? empty(pooled(c.x), DType::u8) : Tensor();
      kernels::batch_norm_relu_pool_forward(x, w, b, p.running_mean, p.running_var,
                                            {.training = true}, p.y, window, p.mean, p.rstd);
      return p;
    };
    auto expect_same = [&](const char* candidate) {
      SCOPED_TRACE(std::string(name_of(dtype)) + ", " + candidate);
      const Pass with = forward(true), without = forward(false);
      EXPECT_TRUE(same_bits(with.y, without.y));
      EXPECT_TRUE(same_bits(with.mean, without.mean));
      EXPECT_TRUE(same_bits(with.rstd, without.rstd));
      EXPECT_TRUE(same_bits(with.running_mean, without.running_mean));
      EXPECT_TRUE(same_bits(with.running_var, without.running_var));
    };
    expect_same("the best");
    {
      IsaLimit no_bf16(Isa::avx512);
      expect_same("without AVX-512 BF16");
    }
    ReferenceMode reference;
    expect_same("the fallback");
  }
}

// Under no_grad the op saves nothing, so it allocates no window places: its peak holds x and y
// only, and y has the bits of a forward recorded for backward.
TEST(BatchNormReluPool, AForwardWithoutGradientAllocatesNoWindowPlaces) {
  const Case c{Shape{4, 16, 12, 12}, DType::bf16, false, true};
  const Inputs in = draw(c, 12);
  const int64_t channels = c.x[1];
  Tensor x = from_values(in.x, c.x, DType::bf16);
  x.set_requires_grad(true);
  Tensor running_mean = from_values(in.running_mean, {channels}, DType::f32);
  Tensor running_var = from_values(in.running_var, {channels}, DType::f32);
  auto forward = [&] {
    return ops::batch_norm_relu_max_pool2d(x, Tensor(), Tensor(), running_mean, running_var,
                                           false, 0.1, 1e-5);
  };
  const int64_t before = memory::stats().current(DType::u8);
  const Tensor recorded = forward();
  const int64_t held = memory::stats().current(DType::u8);
  EXPECT_EQ(held - before, pooled(c.x).numel()) << "the recorded forward's window places";
  Tensor evaluated;
  {
    NoGradGuard no_grad;
    memory::reset_peaks();
    evaluated = forward();
    EXPECT_EQ(memory::stats().peak(DType::u8), held) << "the evaluation allocated u8 memory";
  }
  EXPECT_TRUE(same_bits(recorded.detach(), evaluated));
}

// The bf16 and f16 rows on AVX-512 BF16 give the bits and window places of the generic
// kernel's fp32 loops (the same kernels with AVX-512 BF16 out of reach).
TEST(BatchNormReluPool, HalfRowsGiveTheGenericKernelsBits) {
  if (reference_mode()) GTEST_SKIP() << "MIXP_REFERENCE=1 runs the fallback on both sides";
  if (best_isa() < Isa::avx512_bf16) GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
  uint64_t seed = 300;
  for (const Case& c : cases()) {
    if (c.dtype != DType::bf16 && c.dtype != DType::f16) continue;
    SCOPED_TRACE(c.name());
    const Inputs in = draw(c, seed++);
    const Results rows = run(c, in, true);
    Results generic;
    {
      IsaLimit no_bf16(Isa::avx512);
      generic = run(c, in, true);
    }
    expect_same_results(rows, generic);
  }
}

std::shared_ptr<nn::Sequential> norm_relu_pool(int64_t pool) {
  auto seq = std::make_shared<nn::Sequential>();
  seq->push_back(std::make_shared<nn::BatchNorm2d>(nn::BatchNorm2dOptions(6)));
  seq->push_back(std::make_shared<nn::ReLU>());
  seq->push_back(std::make_shared<nn::MaxPool2d>(nn::MaxPool2dOptions(pool)));
  return seq;
}

// The cnn's pattern in a Sequential runs as the fused op on bf16; with a hook on the norm, the
// hook sees batch norm's own output (full size, negative values included) and the result is
// unchanged; other poolings, and f32 inputs, are not fused.
TEST(BatchNormReluPool, SequentialFusesNormReluAndPairPoolingUnlessAHookWatches) {
  Philox rng(PhiloxState{5, 0, 0});
  const Tensor x = randn({4, 6, 6, 6}, rng, 1.0, DType::bf16);
  auto plain = norm_relu_pool(2), hooked = norm_relu_pool(2);
  const Tensor y = plain->forward(x);
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_STREQ(y.grad_fn()->name, "batch_norm_relu_max_pool2d");
  Shape seen;
  double hooked_min = 0;
  (*hooked)[0].add_forward_hook([&](nn::Module&, const Tensor& out) {
    seen = out.shape();
    const std::vector<double> v = out.to_vector();
    hooked_min = *std::min_element(v.begin(), v.end());
    return out;
  });
  const Tensor y_hooked = hooked->forward(x);
  EXPECT_EQ(seen, x.shape());
  EXPECT_LT(hooked_min, 0.0);
  EXPECT_STREQ(y_hooked.grad_fn()->name, "max_pool2d");
  EXPECT_TRUE(same_bits(y.detach(), y_hooked.detach()));
  const Tensor y3 = norm_relu_pool(3)->forward(x);
  EXPECT_STREQ(y3.grad_fn()->name, "max_pool2d");
  // On f32 the unfused kernels are the faster ones: batch_norm_relu, then max_pool2d.
  const Tensor y_f32 = norm_relu_pool(2)->forward(x.to(DType::f32));
  EXPECT_STREQ(y_f32.grad_fn()->name, "max_pool2d");
}

TEST(BatchNormReluPool, RejectsInputsWithoutTwoByTwoWindows) {
  Tensor rm = zeros({3}), rv = ones({3});
  for (const Shape& shape : {Shape{2, 3, 1, 5}, Shape{2, 3, 5, 1}, Shape{4, 3}}) {
    SCOPED_TRACE(shape.to_string());
    try {
      ops::batch_norm_relu_max_pool2d(ones(shape), Tensor(), Tensor(), rm, rv, true);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_FALSE(e.is_internal()) << e.message();
      EXPECT_NE(e.message().find("batch_norm_relu_max_pool2d"), std::string::npos) << e.message();
      EXPECT_NE(e.message().find(shape.to_string()), std::string::npos) << e.message();
    }
  }
}

}  // namespace
}  // namespace mixp
