// conv2d and the poolings: output shapes and dtypes for several option sets, values worked out
// by hand, gradient dtypes, and the errors for bad shapes, groups, strides and padding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kernels/conv2d.h"
#include "mixp/cpu.h"
#include "mixp/error.h"
#include "mixp/ops.h"
#include "mixp/random.h"
#include "mixp/runtime.h"

namespace mixp {
namespace {

Tensor filled(const Shape& shape, double value, DType dtype = DType::f32) {
  return full(shape, value, dtype);
}

// The message of the mixp::Error that `f` throws; empty (and a failure) if it throws none.
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_FALSE(e.is_internal()) << e.message();
    return e.message();
  }
  ADD_FAILURE() << "no error";
  return "";
}

void expect_mentions(const std::string& message, std::initializer_list<const char*> parts) {
  for (const char* part : parts) {
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
}

struct ShapeCase {
  Shape x, weight;
  ops::Conv2dOptions options;
  Shape expected;
};

ops::Conv2dOptions make(int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w,
                        int64_t dilation_h, int64_t dilation_w, int64_t groups) {
  ops::Conv2dOptions o;
  o.stride_h = stride_h, o.stride_w = stride_w, o.pad_h = pad_h, o.pad_w = pad_w;
  o.dilation_h = dilation_h, o.dilation_w = dilation_w, o.groups = groups;
  return o;
}

TEST(Conv2d, OutputShapesFollowPyTorch) {
  const std::vector<ShapeCase> cases = {
      {{2, 3, 8, 8}, {4, 3, 3, 3}, {}, {2, 4, 6, 6}},
      {{1, 3, 8, 7}, {4, 3, 3, 3}, make(2, 2, 1, 1, 1, 1, 1), {1, 4, 4, 4}},
      {{1, 3, 9, 9}, {5, 3, 3, 3}, make(1, 1, 0, 0, 2, 2, 1), {1, 5, 5, 5}},
      {{3, 4, 6, 5}, {6, 2, 1, 1}, make(1, 1, 0, 0, 1, 1, 2), {3, 6, 6, 5}},
      {{1, 4, 6, 6}, {4, 1, 3, 3}, make(1, 1, 1, 1, 1, 1, 4), {1, 4, 6, 6}},
      {{2, 2, 10, 7}, {3, 2, 2, 3}, make(3, 2, 0, 2, 1, 3, 1), {2, 3, 3, 3}},
      {{1, 1, 3, 3}, {1, 1, 3, 3}, {}, {1, 1, 1, 1}},
  };
  for (const ShapeCase& c : cases) {
    const Tensor y = ops::conv2d(ones(c.x), ones(c.weight), Tensor(), c.options);
    EXPECT_EQ(y.shape(), c.expected) << c.x.to_string() << " * " << c.weight.to_string();
    EXPECT_EQ(y.dtype(), DType::f32);
  }
}

TEST(Conv2d, OutputDtypeIsTheInputsUnlessGiven) {
  const Tensor x = ones({1, 2, 4, 4}, DType::bf16), w = ones({3, 2, 3, 3}, DType::bf16);
  EXPECT_EQ(ops::conv2d(x, w).dtype(), DType::bf16);
  ops::Conv2dOptions o;
  o.out_dtype = DType::f32;
  const Tensor y = ops::conv2d(x, w, ones({3}), o);
  EXPECT_EQ(y.dtype(), DType::f32);
  for (double v : y.to_vector()) EXPECT_EQ(v, 19.0);  // 2 * 3 * 3 ones, plus the bias
}

TEST(Conv2d, ValuesByHandOnBothPaths) {
  // x = 0..8 in a 3x3 plane; a 2x2 kernel of ones with padding 1, stride 2: windows at the
  // corners read one input each, plus the bias.
  const Tensor x = arange(9).reshape({1, 1, 3, 3});
  const Tensor w = ones({1, 1, 2, 2}), b = filled({1}, 0.5);
  for (bool reference : {false, true}) {
    std::optional<ReferenceMode> mode;
    if (reference) mode.emplace();
    const Tensor y = ops::conv2d(x, w, b, make(2, 2, 1, 1, 1, 1, 1));
    ASSERT_EQ(y.shape(), Shape({1, 1, 2, 2}));
    EXPECT_EQ(y.to_vector(), (std::vector<double>{0.5, 3.5, 9.5, 24.5})) << reference;
  }
}

TEST(Conv2d, GradientsTakeTheDtypesOfTheirInputs) {
  Tensor x = ones({2, 2, 5, 5}, DType::bf16).set_requires_grad(true);
  Tensor w = ones({4, 1, 3, 3}, DType::bf16).set_requires_grad(true);
  Tensor b = ones({4}, DType::f32).set_requires_grad(true);
  ops::sum(ops::conv2d(x, w, b, make(1, 1, 0, 0, 1, 1, 2))).backward();
  ASSERT_TRUE(x.grad().defined() && w.grad().defined() && b.grad().defined());
  EXPECT_EQ(x.grad().dtype(), DType::bf16);
  EXPECT_EQ(w.grad().dtype(), DType::bf16);
  EXPECT_EQ(b.grad().dtype(), DType::f32);
  EXPECT_EQ(w.grad().shape(), w.shape());
  // Each output channel's bias is summed over 2 images of 3 x 3 outputs.
  for (double v : b.grad().to_vector()) EXPECT_EQ(v, 18.0);
  // Each weight tap sees 2 images x 9 outputs of ones.
  for (double v : w.grad().to_vector()) EXPECT_EQ(v, 18.0);
}

// The bias gradient in one pass over g gives the bits of summing g widened to fp32 over
// N, H and W with ops::sum, for every floating dtype g can have, with rows longer than the
// 256-element blocks of the sums, one channel, and planes split over threads.
TEST(Conv2d, BiasGradientIsTheFp32SumOfTheGradientBitForBit) {
  struct Case {
    Shape x;  // the output has x's height and width: 3 x 3 taps, padding 1
    int64_t out_channels;
  };
  const std::vector<Case> cases = {{{2, 3, 5, 7}, 4}, {{2, 1, 3, 300}, 1}, {{3, 2, 40, 33}, 5}};
  Philox rng(PhiloxState{77, 0, 0});
  for (const Case& c : cases) {
    for (const DType dtype : {DType::f32, DType::bf16, DType::f16}) {
      SCOPED_TRACE(std::string(name_of(dtype)) + " " + c.x.to_string());
      Tensor x = randn(c.x, rng, 1.0, dtype).set_requires_grad(true);
      Tensor w = randn({c.out_channels, c.x[1], 3, 3}, rng, 0.3, dtype).set_requires_grad(true);
      Tensor b = zeros({c.out_channels}, DType::f32).set_requires_grad(true);
      const Shape y_shape{c.x[0], c.out_channels, c.x[2], c.x[3]};
      const Tensor g = randn(y_shape, rng, 1.0, dtype);
      ops::conv2d(x, w, b, make(1, 1, 1, 1, 1, 1, 1)).backward(g);
      const Tensor want = ops::sum(g.to(DType::f32), {0, 2, 3});
      ASSERT_EQ(b.grad().dtype(), DType::f32);
      EXPECT_EQ(b.grad().to_vector(), want.to_vector());
    }
  }
}

kernels::ConvShape conv_shape(const Shape& x, const Shape& w, int64_t stride, int64_t pad,
                              int64_t groups) {
  kernels::ConvShape s;
  s.n = x[0], s.c = x[1], s.h = x[2], s.w = x[3], s.o = w[0], s.kh = w[2], s.kw = w[3];
  s.stride_h = s.stride_w = stride, s.pad_h = s.pad_w = pad, s.groups = groups;
  s.oh = (s.h + 2 * pad - s.kh) / stride + 1;
  s.ow = (s.w + 2 * pad - s.kw) / stride + 1;
  return s;
}

// The bf16 forward that oneDNN writes straight to bf16, the bias added to its fp32
// accumulation, has the bits of the fp32 pass plus the bias rounded once to bf16 (the path
// through an fp32 buffer): on the cnn's two layers, strided, grouped and unbiased convolutions,
// and channel counts that are not multiples of the vector width.
TEST(Conv2d, Bf16ForwardWrittenDirectlyIsTheFp32PassPlusBiasRoundedOnce) {
  struct Case {
    Shape x, w;
    int64_t stride, pad, groups;
    bool bias;
  };
  const std::vector<Case> cases = {{{64, 1, 28, 28}, {32, 1, 3, 3}, 1, 1, 1, true},
                                   {{64, 32, 14, 14}, {64, 32, 3, 3}, 1, 1, 1, true},
                                   {{3, 5, 9, 11}, {7, 5, 3, 3}, 2, 1, 1, true},
                                   {{2, 6, 8, 8}, {9, 2, 3, 3}, 1, 0, 3, true},
                                   {{2, 3, 7, 7}, {5, 3, 1, 1}, 1, 0, 1, false}};
  Philox rng(PhiloxState{91, 0, 0});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.x.to_string() + " * " + c.w.to_string());
    const kernels::ConvShape s = conv_shape(c.x, c.w, c.stride, c.pad, c.groups);
    const Tensor x = randn(c.x, rng, 1.0, DType::bf16), w = randn(c.w, rng, 0.5, DType::bf16);
    const Tensor b = c.bias ? randn({c.w[0]}, rng, 1.0, DType::bf16) : Tensor();
    const Shape y_shape{s.n, s.o, s.oh, s.ow};
    Tensor wide = empty(y_shape, DType::f32);
    kernels::conv2d_forward(s, x, w, wide);
    if (c.bias) kernels::conv2d_add_bias(wide, b);
    const Tensor want = wide.to(DType::bf16);
    Tensor got = empty(y_shape, DType::bf16);
    kernels::conv2d_biased_forward(s, x, w, b, got);
    if (!reference_mode() && best_isa() >= Isa::avx512_bf16) {
      EXPECT_STREQ(kernels::conv2d_biased_forward.select(s, x, w, b, got).name,
                   "onednn_bf16_direct");
    }
    ASSERT_EQ(std::memcmp(got.raw_data(), want.raw_data(), size_t(want.numel()) * 2), 0);
    const Tensor via_op =
        ops::conv2d(x, w, b, make(c.stride, c.stride, c.pad, c.pad, 1, 1, c.groups));
    ASSERT_EQ(via_op.dtype(), DType::bf16);
    EXPECT_EQ(std::memcmp(via_op.raw_data(), want.raw_data(), size_t(want.numel()) * 2), 0);
  }
}

// The one exception to those bits, as for oneDNN's bf16 matmuls (docs/formats.md): an fp32
// sum below 2^-126 is flushed by oneDNN's rounding to a zero of its sign where mixp's rounding
// keeps the bf16 subnormal. Here the sum is a subnormal bias over a zero input.
TEST(Conv2d, Bf16ForwardWrittenDirectlyFlushesASubnormalSumAsOneDnnsProductsDo) {
  const double tiny = std::ldexp(1.0, -130);  // a bf16 subnormal
  const Tensor x = zeros({1, 1, 3, 3}, DType::bf16), w = ones({2, 1, 3, 3}, DType::bf16);
  const Tensor b = from_values({tiny, -tiny}, {2}, DType::bf16);
  const kernels::ConvShape s = conv_shape(x.shape(), w.shape(), 1, 1, 1);
  Tensor y = empty({1, 2, 3, 3}, DType::bf16);
  kernels::conv2d_biased_forward(s, x, w, b, y);
  const std::vector<double> v = y.to_vector();
  const bool direct = std::string(kernels::conv2d_biased_forward.select(s, x, w, b, y).name) ==
                      "onednn_bf16_direct";
  for (size_t i = 0; i < v.size(); ++i) {
    const bool negative = i >= 9;
    if (direct) {
      EXPECT_EQ(v[i], 0.0) << i;
      EXPECT_EQ(std::signbit(v[i]), negative) << i;
    } else {
      EXPECT_EQ(v[i], negative ? -tiny : tiny) << i;
    }
  }
}

// The bf16 input gradient that oneDNN writes straight to bf16 has the bits of the fp32 pass
// rounded once to bf16 (the path through an fp32 buffer), on the same shapes as the forward's;
// so has x's gradient from ops::conv2d's backward, which runs it.
TEST(Conv2d, Bf16BackwardDataWrittenDirectlyIsTheFp32PassRoundedOnce) {
  struct Case {
    Shape x, w;
    int64_t stride, pad, groups;
  };
  const std::vector<Case> cases = {{{64, 32, 14, 14}, {64, 32, 3, 3}, 1, 1, 1},
                                   {{3, 5, 9, 11}, {7, 5, 3, 3}, 2, 1, 1},
                                   {{2, 6, 8, 8}, {9, 2, 3, 3}, 1, 0, 3},
                                   {{2, 3, 7, 7}, {5, 3, 1, 1}, 1, 0, 1}};
  Philox rng(PhiloxState{92, 0, 0});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.x.to_string() + " * " + c.w.to_string());
    const kernels::ConvShape s = conv_shape(c.x, c.w, c.stride, c.pad, c.groups);
    const Tensor w = randn(c.w, rng, 0.5, DType::bf16);
    const Tensor dy = randn({s.n, s.o, s.oh, s.ow}, rng, 1.0, DType::bf16);
    Tensor wide = empty(c.x, DType::f32);
    kernels::conv2d_backward_data(s, dy, w, wide);
    const Tensor want = wide.to(DType::bf16);
    Tensor got = empty(c.x, DType::bf16);
    kernels::conv2d_backward_data_rounded(s, dy, w, got);
    if (!reference_mode() && best_isa() >= Isa::avx512_bf16) {
      EXPECT_STREQ(kernels::conv2d_backward_data_rounded.select(s, dy, w, got).name,
                   "onednn_bf16_direct");
    }
    ASSERT_EQ(std::memcmp(got.raw_data(), want.raw_data(), size_t(want.numel()) * 2), 0);
    Tensor x = randn(c.x, rng, 1.0, DType::bf16).set_requires_grad(true);
    ops::conv2d(x, w, Tensor(), make(c.stride, c.stride, c.pad, c.pad, 1, 1, c.groups))
        .backward(dy);
    ASSERT_EQ(x.grad().dtype(), DType::bf16);
    EXPECT_EQ(std::memcmp(x.grad().raw_data(), want.raw_data(), size_t(want.numel()) * 2), 0);
  }
}

// As the forward's, the one exception: an fp32 sum below 2^-126 is flushed to zero by oneDNN's
// rounding where mixp's rounding keeps the bf16 subnormal. Here dy is one subnormal.
TEST(Conv2d, Bf16BackwardDataWrittenDirectlyFlushesASubnormalSum) {
  const double tiny = std::ldexp(1.0, -130);  // a bf16 subnormal
  const Tensor dy = from_values({0, 0, 0, 0, tiny, 0, 0, 0, 0}, {1, 1, 3, 3}, DType::bf16);
  const Tensor w = ones({1, 2, 3, 3}, DType::bf16);
  const kernels::ConvShape s = conv_shape({1, 2, 3, 3}, w.shape(), 1, 1, 1);
  Tensor dx = empty({1, 2, 3, 3}, DType::bf16);
  kernels::conv2d_backward_data_rounded(s, dy, w, dx);
  const bool direct =
      std::string(kernels::conv2d_backward_data_rounded.select(s, dy, w, dx).name) ==
      "onednn_bf16_direct";
  for (double v : dx.to_vector()) EXPECT_EQ(v, direct ? 0.0 : tiny);
}

// The registry's choice among conv2d's kernels: oneDNN on bf16 only with AVX-512 BF16 active,
// f16 and bf16 otherwise widened, f64 and reference mode on the double loops; the bias gradient
// fused where it keeps ops::sum's order (kernels_test's Conv2dBiasGrad tests hold its rule).
TEST(Conv2d, KernelsAreChosenByDtypeIsaAndShape) {
  kernels::ConvShape s;
  s.n = 1, s.c = 2, s.h = 4, s.w = 4, s.o = 3, s.kh = 3, s.kw = 3, s.oh = 2, s.ow = 2;
  auto forward = [&](DType dt) {
    const Tensor x = zeros({1, 2, 4, 4}, dt), w = zeros({3, 2, 3, 3}, dt);
    Tensor y = empty({1, 3, 2, 2}, dt == DType::f64 ? DType::f64 : DType::f32);
    return std::string(kernels::conv2d_forward.select(s, x, w, y).name);
  };
  auto bias_grad = [](const Shape& g_shape, DType dt) {
    return std::string(kernels::conv2d_bias_grad.select(zeros(g_shape, dt)).name);
  };
  {
    ReferenceMode reference;
    EXPECT_EQ(forward(DType::f32), "scalar");
    EXPECT_EQ(bias_grad({2, 3, 4, 4}, DType::f32), "by_dims");
  }
  if (reference_mode()) GTEST_SKIP() << "MIXP_REFERENCE=1 chooses the fallback everywhere";
  EXPECT_EQ(forward(DType::f32), "onednn_f32");
  EXPECT_EQ(forward(DType::f16), "onednn_widened");
  EXPECT_EQ(forward(DType::f64), "scalar");
  if (best_isa() >= Isa::avx512_bf16) {
    EXPECT_EQ(forward(DType::bf16), "onednn_bf16");
  }
  {
    IsaLimit no_bf16(Isa::avx512);
    EXPECT_EQ(forward(DType::bf16), "onednn_widened");
  }
  {
    const Tensor dy = zeros({1, 3, 2, 2}, DType::bf16), w = zeros({3, 2, 3, 3}, DType::bf16);
    Tensor dx = empty({1, 2, 4, 4}, DType::bf16);
    const std::string chosen = kernels::conv2d_backward_data_rounded.select(s, dy, w, dx).name;
    EXPECT_EQ(chosen,
              best_isa() >= Isa::avx512_bf16 ? "onednn_bf16_direct" : "through_accumulation");
    Tensor dx_f32 = empty({1, 2, 4, 4}, DType::f32);
    EXPECT_STREQ(kernels::conv2d_backward_data_rounded.select(s, dy, w, dx_f32).name,
                 "through_accumulation");
    IsaLimit no_bf16(Isa::avx512);
    EXPECT_STREQ(kernels::conv2d_backward_data_rounded.select(s, dy, w, dx).name,
                 "through_accumulation");
  }
  EXPECT_EQ(bias_grad({2, 3, 4, 4}, DType::bf16),
            best_isa() >= Isa::avx512 ? "avx512_fused" : "openmp_fused");
  EXPECT_EQ(bias_grad({2, 3, 4, 4}, DType::f64), "by_dims");
  EXPECT_EQ(bias_grad({1, 1, 1, 70000}, DType::f32), "by_dims");  // ops::sum chunks this row
}

TEST(Conv2d, RejectsMismatchedChannelsAndGroups) {
  const Tensor x = ones({2, 6, 5, 5});
  expect_mentions(error_of([&] {
                    ops::conv2d(x, ones({4, 4, 3, 3}));
                  }),
                  {"conv2d", "[4, 4, 3, 3]", "[2, 6, 5, 5]", "takes 4 input channels", "has 6"});
  expect_mentions(error_of([&] {
                    ops::conv2d(x, ones({4, 3, 3, 3}), Tensor(), make(1, 1, 0, 0, 1, 1, 4));
                  }),
                  {"conv2d", "6 channels", "groups = 4"});
  expect_mentions(error_of([&] {
                    ops::conv2d(x, ones({5, 2, 3, 3}), Tensor(), make(1, 1, 0, 0, 1, 1, 3));
                  }),
                  {"conv2d", "5 output channels", "groups = 3"});
  expect_mentions(error_of([&] {
                    ops::conv2d(x, ones({6, 2, 3, 3}), Tensor(), make(1, 1, 0, 0, 1, 1, 2));
                  }),
                  {"conv2d", "groups = 2", "takes 4 input channels"});
  expect_mentions(error_of([&] {
                    ops::conv2d(x, ones({4, 6, 3, 3}), Tensor(), make(1, 1, 0, 0, 1, 1, 0));
                  }),
                  {"conv2d", "groups must be at least 1, got 0"});
}

TEST(Conv2d, RejectsBadShapesStridesAndPadding) {
  const Tensor x = ones({1, 2, 5, 5}), w = ones({3, 2, 3, 3});
  expect_mentions(error_of([&] {
                    ops::conv2d(ones({2, 5, 5}), w);
                  }),
                  {"conv2d", "[N, C, H, W]", "[2, 5, 5]"});
  expect_mentions(error_of([&] {
                    ops::conv2d(x, ones({3, 2, 3}));
                  }),
                  {"conv2d", "weight", "[3, 2, 3]"});
  expect_mentions(error_of([&] { ops::conv2d(x, w, ones({4})); }),
                  {"conv2d", "bias", "[3]", "[4]"});
  expect_mentions(error_of([&] { ops::conv2d(x, w, Tensor(), make(0, 1, 0, 0, 1, 1, 1)); }),
                  {"conv2d", "strides", "0 x 1"});
  expect_mentions(error_of([&] { ops::conv2d(x, w, Tensor(), make(1, 1, -1, 0, 1, 1, 1)); }),
                  {"conv2d", "padding", "-1 x 0"});
  expect_mentions(error_of([&] { ops::conv2d(x, w, Tensor(), make(1, 1, 0, 0, 1, 0, 1)); }),
                  {"conv2d", "dilations", "1 x 0"});
  expect_mentions(error_of([&] { ops::conv2d(x, w, Tensor(), make(1, 1, 0, 0, 3, 1, 1)); }),
                  {"conv2d", "smaller than the dilated kernel 7 x 3"});
  expect_mentions(error_of([&] {
                    ops::conv2d(x, ones({3, 2, 3, 3}, DType::bf16));
                  }),
                  {"conv2d", "different dtypes", "f32", "bf16"});
}

TEST(Pool2d, OutputShapes) {
  const Tensor x = ones({2, 3, 7, 9});
  EXPECT_EQ(ops::max_pool2d(x, 2, 2).shape(), Shape({2, 3, 3, 4}));  // stride = kernel
  EXPECT_EQ(ops::max_pool2d(x, 3, 3, 2, 2, 1, 1).shape(), Shape({2, 3, 4, 5}));
  EXPECT_EQ(ops::avg_pool2d(x, 3, 2, 1, 1, 1, 1).shape(), Shape({2, 3, 7, 10}));
  EXPECT_EQ(ops::adaptive_avg_pool2d(x, 3, 2).shape(), Shape({2, 3, 3, 2}));
  EXPECT_EQ(ops::adaptive_avg_pool2d(x, 8, 11).shape(), Shape({2, 3, 8, 11}));
  EXPECT_EQ(ops::avg_pool2d(ones({1, 1, 4, 4}, DType::bf16), 2, 2).dtype(), DType::bf16);
}

TEST(Pool2d, ValuesByHandOnBothPaths) {
  // 0..19 in a 4x5 plane.
  const Tensor x = arange(20).reshape({1, 1, 4, 5});
  for (bool reference : {false, true}) {
    std::optional<ReferenceMode> mode;
    if (reference) mode.emplace();
    EXPECT_EQ(ops::max_pool2d(x, 2, 2).to_vector(), (std::vector<double>{6, 8, 16, 18}));
    // Padding is -inf for the maximum: rows [0, 1) and [2, 4), columns [0, 1) and [3, 5).
    EXPECT_EQ(ops::max_pool2d(x, 2, 2, 3, 4, 1, 1).to_vector(),
              (std::vector<double>{0, 4, 15, 19}));
    // count_include_pad: the corner window {0, 1, 5, 6} padded to 3x3 divides by 9 (in f32).
    EXPECT_EQ(ops::avg_pool2d(x, 3, 3, 3, 3, 1, 1).slice(0, 1).to_vector()[0],
              double(float(12.0 / 9.0)));
    // Rows 4 -> 3: [0, 2), [1, 3), [2, 4); columns 5 -> 2: [0, 3), [2, 5).
    const std::vector<double> a = ops::adaptive_avg_pool2d(x, 3, 2).to_vector();
    ASSERT_EQ(a.size(), 6u);
    EXPECT_DOUBLE_EQ(a[0], (0 + 1 + 2 + 5 + 6 + 7) / 6.0);
    EXPECT_DOUBLE_EQ(a[5], (12 + 13 + 14 + 17 + 18 + 19) / 6.0);
  }
}

TEST(Pool2d, MaxGradientGoesToTheFirstMaximum) {
  Tensor x = from_values({1, 3, 3, 2, 3, 0, 1, 1, 1}, {1, 1, 3, 3}).set_requires_grad(true);
  ops::sum(ops::max_pool2d(x, 2, 2, 1, 1)).backward();
  // Windows (row-major): {1,3,2,3} -> index 1; {3,3,3,0} -> index 1; {2,3,1,1} -> index 4;
  // {3,0,1,1} -> index 4.
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{0, 2, 0, 0, 2, 0, 0, 0, 0}));
}

TEST(Pool2d, RejectsBadArguments) {
  const Tensor x = ones({1, 2, 5, 5});
  expect_mentions(error_of([&] {
                    ops::max_pool2d(ones({2, 5, 5}), 2, 2);
                  }),
                  {"max_pool2d", "[2, 5, 5]"});
  expect_mentions(error_of([&] { ops::max_pool2d(x, 2, 2, 1, 1, 2, 0); }),
                  {"max_pool2d", "half the kernel", "2 x 0"});
  expect_mentions(error_of([&] { ops::avg_pool2d(x, 0, 2); }), {"avg_pool2d", "0 x 2"});
  expect_mentions(error_of([&] { ops::avg_pool2d(x, 2, 2, -1, 1); }),
                  {"avg_pool2d", "strides", "-1 x 1"});
  expect_mentions(error_of([&] { ops::avg_pool2d(x, 6, 2); }),
                  {"avg_pool2d", "smaller than the kernel 6 x 2"});
  expect_mentions(error_of([&] { ops::adaptive_avg_pool2d(x, 0, 3); }),
                  {"adaptive_avg_pool2d", "0 x 3"});
}

}  // namespace
}  // namespace mixp
