// conv2d's kernels beyond the passes that ops_test's conv tests hold to sums in double:
// conv2d_backward, both backward passes in one call, against the two pass kernels called in
// turn (its fallback); conv2d_bias_grad's candidates against ops::sum's passes (its fallback);
// for every candidate and thread count.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/conv2d.h"
#include "mixp/cpu.h"
#include "mixp/ops.h"
#include "mixp/random.h"
#include "mixp/runtime.h"
#include "support/same_bits.h"

namespace mixp::kernels {
namespace {

struct ConvCase {
  Shape x, w;
  int64_t stride, pad, groups;
};

ConvShape conv_shape(const ConvCase& c) {
  ConvShape s;
  s.n = c.x[0], s.c = c.x[1], s.h = c.x[2], s.w = c.x[3], s.o = c.w[0], s.kh = c.w[2],
  s.kw = c.w[3];
  s.stride_h = s.stride_w = c.stride, s.pad_h = s.pad_w = c.pad, s.groups = c.groups;
  s.oh = (s.h + 2 * c.pad - s.kh) / c.stride + 1;
  s.ow = (s.w + 2 * c.pad - s.kw) / c.stride + 1;
  return s;
}

using test::same_bits;

struct Backward {
  Tensor dx, dw;
};

Backward allocate(const ConvCase& c, DType dx_dtype, DType dw_dtype) {
  return {.dx = empty(c.x, dx_dtype), .dw = empty(c.w, dw_dtype)};
}

// The cnn's two layers at 4 images (conv1 has one input channel), strided, grouped and 1 x 1
// convolutions, channel counts that are not multiples of oneDNN's blocks, on every floating dtype
// and on both dx dtypes a low-precision input can ask for.
TEST(Conv2dBackward, GivesTheBitsOfThePassKernelsInTurn) {
  const std::vector<ConvCase> cases = {{{4, 32, 14, 14}, {64, 32, 3, 3}, 1, 1, 1},
                                       {{4, 1, 28, 28}, {32, 1, 3, 3}, 1, 1, 1},
                                       {{3, 5, 9, 11}, {7, 5, 3, 3}, 2, 1, 1},
                                       {{2, 6, 8, 8}, {9, 2, 3, 3}, 1, 0, 3},
                                       {{2, 3, 7, 7}, {5, 3, 1, 1}, 1, 0, 1}};
  const int threads = num_threads();
  Philox rng(PhiloxState{93, 0, 0});
  for (const ConvCase& c : cases) {
    const ConvShape s = conv_shape(c);
    for (const DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
      const DType acc = dtype == DType::f64 ? DType::f64 : DType::f32;
      const Tensor x = randn(c.x, rng, 1.0, dtype), w = randn(c.w, rng, 0.5, dtype);
      const Tensor dy = randn({s.n, s.o, s.oh, s.ow}, rng, 1.0, dtype);
      for (const DType dx_dtype : {dtype, acc}) {
        for (int t : {1, 2}) {
          set_num_threads(t);
          const std::string what = c.x.to_string() + " * " + c.w.to_string() + ", " +
                                   name_of(dtype) + " to " + name_of(dx_dtype) + ", " +
                                   std::to_string(t) + " threads";
          Backward want = allocate(c, dx_dtype, acc);
          conv2d_backward_data_rounded(s, dy, w, want.dx);
          conv2d_backward_weights(s, x, dy, want.dw);
          for (int repeat = 0; repeat < 2; ++repeat) {
            Backward got = allocate(c, dx_dtype, acc);
            conv2d_backward(s, x, dy, w, got.dx, got.dw);
            EXPECT_TRUE(same_bits(got.dx, want.dx)) << what;
            EXPECT_TRUE(same_bits(got.dw, want.dw)) << what;
          }
        }
      }
    }
  }
  set_num_threads(threads);
}

std::string chosen(DType dtype, DType dx_dtype, DType dw_dtype = DType::f32) {
  const ConvCase c{{2, 3, 6, 6}, {4, 3, 3, 3}, 1, 1, 1};
  const ConvShape s = conv_shape(c);
  const Tensor x = zeros(c.x, dtype), w = zeros(c.w, dtype), dy = zeros({2, 4, 6, 6}, dtype);
  Backward b = allocate(c, dx_dtype, dw_dtype);
  return conv2d_backward.select(s, x, dy, w, b.dx, b.dw).name;
}

// oneDNN's shared reorder for f32, and for bf16 where the CPU multiplies it; f16 (and bf16
// below AVX-512 BF16) widened once; f64 and reference mode the passes in turn. Each candidate
// is thereby run by the test above on this CPU, where its ISA is there.
TEST(Conv2dBackward, IsChosenByDtypeAndIsa) {
  {
    ReferenceMode reference;
    EXPECT_EQ(chosen(DType::f32, DType::f32), "in_turn");
  }
  if (reference_mode()) GTEST_SKIP() << "MIXP_REFERENCE=1 chooses the fallback everywhere";
  EXPECT_EQ(chosen(DType::f32, DType::f32), "onednn_f32_shared_dy");
  EXPECT_EQ(chosen(DType::f16, DType::f16), "onednn_widened_dy_once");
  EXPECT_EQ(chosen(DType::f16, DType::f32), "onednn_widened_dy_once");
  EXPECT_EQ(chosen(DType::f64, DType::f64, DType::f64), "in_turn");
  EXPECT_EQ(chosen(DType::bf16, DType::bf16),
            best_isa() >= Isa::avx512_bf16 ? "onednn_bf16_shared_dy" : "onednn_widened_dy_once");
  EXPECT_EQ(chosen(DType::bf16, DType::f16), "in_turn");  // dx in neither dy's dtype nor f32
  IsaLimit no_bf16(Isa::avx512);
  EXPECT_EQ(chosen(DType::bf16, DType::bf16), "onednn_widened_dy_once");
}

// The widened candidate on bf16, which the first test reaches only where the CPU lacks
// AVX-512 BF16.
TEST(Conv2dBackward, WidenedCandidateGivesTheBitsOfThePassKernelsOnBf16) {
  if (reference_mode()) GTEST_SKIP() << "MIXP_REFERENCE=1 chooses the fallback everywhere";
  IsaLimit no_bf16(Isa::avx512);
  const ConvCase c{{4, 6, 10, 9}, {8, 6, 3, 3}, 1, 1, 1};
  const ConvShape s = conv_shape(c);
  Philox rng(PhiloxState{94, 0, 0});
  const Tensor x = randn(c.x, rng, 1.0, DType::bf16), w = randn(c.w, rng, 0.5, DType::bf16);
  const Tensor dy = randn({s.n, s.o, s.oh, s.ow}, rng, 1.0, DType::bf16);
  Backward want = allocate(c, DType::bf16, DType::f32), got = allocate(c, DType::bf16, DType::f32);
  conv2d_backward_data_rounded(s, dy, w, want.dx);
  conv2d_backward_weights(s, x, dy, want.dw);
  ASSERT_STREQ(conv2d_backward.select(s, x, dy, w, got.dx, got.dw).name, "onednn_widened_dy_once");
  conv2d_backward(s, x, dy, w, got.dx, got.dw);
  EXPECT_TRUE(same_bits(got.dx, want.dx));
  EXPECT_TRUE(same_bits(got.dw, want.dw));
}

std::string bias_grad_chosen(const Shape& g_shape, DType dtype) {
  return conv2d_bias_grad.select(zeros(g_shape, dtype)).name;
}

// The AVX-512 row sums where a row is one of ops::sum's blocks and the dtype is bf16 or f16;
// the scalar fused sums elsewhere in ops::sum's order; its passes where they are not.
TEST(Conv2dBiasGrad, IsChosenByDtypeIsaAndShape) {
  if (reference_mode()) GTEST_SKIP() << "MIXP_REFERENCE=1 chooses the fallback everywhere";
  const std::string fast = best_isa() >= Isa::avx512 ? "avx512_fused" : "openmp_fused";
  for (const DType dtype : {DType::bf16, DType::f16}) {
    EXPECT_EQ(bias_grad_chosen({64, 32, 28, 28}, dtype), fast);
  }
  EXPECT_EQ(bias_grad_chosen({64, 32, 28, 28}, DType::f32), "openmp_fused");
  EXPECT_EQ(bias_grad_chosen({2, 3, 4, 256}, DType::bf16), fast);
  EXPECT_EQ(bias_grad_chosen({2, 3, 4, 257}, DType::bf16), "openmp_fused");
  EXPECT_EQ(bias_grad_chosen({2, 3, 4, 4}, DType::f64), "by_dims");
  IsaLimit no_avx512(Isa::avx2);
  EXPECT_EQ(bias_grad_chosen({64, 32, 28, 28}, DType::bf16), "openmp_fused");
}

// Every candidate gives the bits of ops::sum(g.to(f32), {0, 2, 3}), the fallback's passes, for
// 1, 2 and 3 threads: the cnn's two gradients, rows and columns that are not multiples of 16
// (one row, one column, 17, 33), planes of more than 16 rows, rows of 256 values, one channel.
TEST(Conv2dBiasGrad, EveryCandidateGivesTheBitsOfOpsSum) {
  const std::vector<Shape> shapes = {{64, 32, 28, 28}, {64, 64, 14, 14}, {3, 5, 17, 33},
                                     {2, 3, 1, 1},     {1, 4, 40, 1},    {2, 2, 33, 256},
                                     {5, 1, 7, 9},     {1, 3, 16, 16}};
  const int threads = num_threads();
  Philox rng(PhiloxState{95, 0, 0});
  for (const Shape& shape : shapes) {
    for (const DType dtype : {DType::f32, DType::bf16, DType::f16}) {
      const Tensor g = randn(shape, rng, 1.0, dtype);
      const std::vector<double> want = ops::sum(g.to(DType::f32), {0, 2, 3}).to_vector();
      for (const Isa isa : {best_isa(), Isa::avx2, Isa::scalar}) {
        IsaLimit limit(isa);
        for (int t : {1, 2, 3}) {
          set_num_threads(t);
          const std::string what = shape.to_string() + " " + name_of(dtype) + ", " +
                                   conv2d_bias_grad.select(g).name + ", " + std::to_string(t) +
                                   " threads";
          const Tensor got = conv2d_bias_grad(g);
          ASSERT_EQ(got.dtype(), DType::f32) << what;
          EXPECT_EQ(got.to_vector(), want) << what;
        }
      }
    }
  }
  set_num_threads(threads);
}

}  // namespace
}  // namespace mixp::kernels
