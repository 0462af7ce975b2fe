// What `mixp inspect --block-formats` measures: the capture keeps each Linear layer's own input
// and output gradient (divided by the loss scale), and each preset's figures are
// diag::block_scale_stats of them, and of the weight, in the layout the preset's recipe
// quantizes them.
#include "train/inspect_block_scales.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "mixp/autograd.h"
#include "mixp/error.h"
#include "mixp/nn/sequential.h"
#include "mixp/ops.h"

namespace mixp::train {
namespace {

void expect_same(const diag::BlockScaleStats& got, const diag::BlockScaleStats& want) {
  EXPECT_EQ(got.block_rows, want.block_rows);
  EXPECT_EQ(got.block_cols, want.block_cols);
  EXPECT_EQ(got.blocks, want.blocks);
  EXPECT_EQ(got.zero_blocks, want.zero_blocks);
  EXPECT_EQ(got.non_finite_blocks, want.non_finite_blocks);
  EXPECT_EQ(got.scaled_blocks, want.scaled_blocks);
  EXPECT_EQ(got.log2_scale_min, want.log2_scale_min);
  EXPECT_EQ(got.log2_scale_median, want.log2_scale_median);
  EXPECT_EQ(got.log2_scale_max, want.log2_scale_max);
  EXPECT_EQ(got.saturated_blocks, want.saturated_blocks);
  EXPECT_EQ(got.flushed_blocks, want.flushed_blocks);
  EXPECT_EQ(got.nonzero_elements, want.nonzero_elements);
  EXPECT_EQ(got.flushed_elements, want.flushed_elements);
  EXPECT_EQ(got.relative_rms_error, want.relative_rms_error);
  EXPECT_EQ(got.max_relative_error, want.max_relative_error);
}

// Two Linear layers, [6, 40] -> 136 -> 24: widths that leave partial blocks of 16, 32 and 128,
// and two 128-row weight tiles. The loss is sum(y * c) * scale, so the last layer's output
// gradient is c * scale by construction.
struct TwoLinearLayers {
  Philox rng{PhiloxState{11}};
  std::shared_ptr<nn::Linear> fc1 = std::make_shared<nn::Linear>(nn::LinearOptions(40, 136), rng);
  std::shared_ptr<nn::Linear> fc2 = std::make_shared<nn::Linear>(nn::LinearOptions(136, 24), rng);
  nn::Sequential net;
  Tensor x = uniform(Shape{6, 40}, rng, -2.0, 2.0);
  Tensor c = uniform(Shape{6, 24}, rng, -1.0, 1.0);
  static constexpr double kScale = 1024.0;

  TwoLinearLayers() {
    net.push_back(fc1);
    net.push_back(fc2);
  }
  void step() { ops::mul_scalar(ops::sum(ops::mul(net.forward(x), c)), kScale).backward(); }
};

TEST(InspectBlockScales, CapturesEachLinearLayersInputAndUnscaledOutputGradient) {
  TwoLinearLayers s;
  {
    LinearTensorCapture capture(s.net, TwoLinearLayers::kScale);
    s.step();
    ASSERT_EQ(capture.layers().size(), 2u);
    const LinearTensorCapture::Layer &first = capture.layers()[0], &last = capture.layers()[1];
    EXPECT_EQ(first.name, "0");
    EXPECT_EQ(last.name, "1");
    EXPECT_EQ(first.input.to_vector(), s.x.to_vector());
    Tensor hidden;
    {
      NoGradGuard no_grad;
      hidden = s.fc1->forward(s.x);
    }
    EXPECT_EQ(last.input.to_vector(), hidden.to_vector());
    EXPECT_EQ(last.output_gradient.to_vector(), s.c.to_vector());  // (c * 2^10) / 2^10
    EXPECT_EQ(first.output_gradient.shape(), (Shape{6, 136}));
  }
  // Destroyed, the capture's hooks are gone: the layers run as before.
  s.step();
}

TEST(InspectBlockScales, EachPresetMeasuresTheTensorsInItsRecipesLayout) {
  TwoLinearLayers s;
  LinearTensorCapture capture(s.net, TwoLinearLayers::kScale);
  s.step();
  TrainOptions run;
  run.fp4_without = amp::parse_fp4_ablation("sr");  // gradients to nearest: comparable exactly
  const std::vector<amp::Preset> presets =
      block_scale_presets({"nvfp4", "fp8-block", "mxfp8", "mxfp4"}, run);
  const std::vector<BlockScaleInspection> got =
      inspect_block_scales(capture, s.net, presets, /*seed=*/0, /*step=*/0);
  ASSERT_EQ(got.size(), 4u);
  const amp::MxScaleRounding up = amp::MxScaleRounding::up;
  const Tensor& g1 = capture.layers()[0].output_gradient;
  const Tensor w1 = s.fc1->weight(), w2 = s.fc2->weight(), hidden = capture.layers()[1].input;

  // nvfp4: 1 x 16 blocks, 16 x 16 weight tiles; the last of the two layers stays in bf16.
  ASSERT_EQ(got[0].layers.size(), 2u);
  EXPECT_EQ(got[0].preset, "nvfp4");
  EXPECT_EQ(got[0].layers[0].computes, "nvfp4");
  EXPECT_EQ(got[0].layers[1].computes, "bf16");
  const amp::Fp4Scaling nv = amp::Fp4Scaling::nvfp4;
  expect_same(got[0].layers[0].input, diag::block_scale_stats(s.x, nv, {.mx_rounding = up}));
  expect_same(got[0].layers[0].weight,
              diag::block_scale_stats(w1, nv, {.square_blocks = true, .mx_rounding = up}));
  expect_same(got[0].layers[0].output_gradient,
              diag::block_scale_stats(g1, nv, {.mx_rounding = up}));
  expect_same(got[0].layers[1].output_gradient,
              diag::block_scale_stats(s.c, nv, {.mx_rounding = up}));
  EXPECT_EQ(got[0].layers[0].weight.block_rows, 16);

  // fp8-block: 1 x 128 for inputs and gradients, 128 x 128 tiles for weights; E4M3 throughout.
  const DType e4m3 = DType::e4m3;
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(got[1].layers[i].computes, "fp8-block");
  expect_same(got[1].layers[1].input,
              diag::block_scale_stats(hidden, e4m3, amp::Fp8Scaling::block_1x128));
  expect_same(got[1].layers[0].weight,
              diag::block_scale_stats(w1, e4m3, amp::Fp8Scaling::block_128x128));
  expect_same(got[1].layers[1].weight,
              diag::block_scale_stats(w2, e4m3, amp::Fp8Scaling::block_128x128));
  expect_same(got[1].layers[1].output_gradient,
              diag::block_scale_stats(s.c, e4m3, amp::Fp8Scaling::block_1x128));
  EXPECT_EQ(got[1].layers[0].weight.blocks, 2 * 1);

  // mxfp8: 1 x 32 everywhere, the weight along `in`.
  expect_same(got[2].layers[0].weight,
              diag::block_scale_stats(w1, e4m3, amp::Fp8Scaling::mxfp8, up));
  expect_same(got[2].layers[0].output_gradient,
              diag::block_scale_stats(g1, e4m3, amp::Fp8Scaling::mxfp8, up));

  // mxfp4: 32 x 32 weight tiles.
  expect_same(got[3].layers[1].weight,
              diag::block_scale_stats(w2, amp::Fp4Scaling::mxfp4,
                                      {.square_blocks = true, .mx_rounding = up}));
}

TEST(InspectBlockScales, StochasticGradientsKeepTheScalesAndChangeTheRounding) {
  TwoLinearLayers s;
  LinearTensorCapture capture(s.net, TwoLinearLayers::kScale);
  s.step();
  const std::vector<amp::Preset> presets = block_scale_presets({"nvfp4"}, TrainOptions{});
  const diag::BlockScaleStats sr =
      inspect_block_scales(capture, s.net, presets, 0, 0)[0].layers[1].output_gradient;
  const diag::BlockScaleStats nearest = diag::block_scale_stats(
      s.c, amp::Fp4Scaling::nvfp4, {.mx_rounding = amp::MxScaleRounding::up});
  // The block scales come from the amax alone; the elements round otherwise.
  EXPECT_EQ(sr.blocks, nearest.blocks);
  EXPECT_EQ(sr.log2_scale_min, nearest.log2_scale_min);
  EXPECT_EQ(sr.log2_scale_median, nearest.log2_scale_median);
  EXPECT_EQ(sr.log2_scale_max, nearest.log2_scale_max);
  EXPECT_NE(sr.relative_rms_error, nearest.relative_rms_error);
}

TEST(InspectBlockScales, OnlyBlockScaledPresetsAreTaken) {
  for (const auto& [name, message] : std::vector<std::pair<std::string, std::string>>{
           {"fp8", "'fp8' has no block scales"},
           {"amp-bf16", "'amp-bf16' has no block scales"},
           {"", "empty"},
           {"nvfp5", "nvfp5"}}) {
    try {
      block_scale_presets({name}, TrainOptions{});
      ADD_FAILURE() << name;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace mixp::train
