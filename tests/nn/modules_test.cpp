// The layers of nn/: parameter names and shapes as PyTorch's, default initialization within
// bounds derived from the sample count, train/eval behaviour, and the Module base.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "mixp/amp/autocast.h"
#include "mixp/amp/fp8.h"
#include "mixp/error.h"
#include "mixp/nn/activation.h"
#include "mixp/nn/batch_norm.h"
#include "mixp/nn/conv2d.h"
#include "mixp/nn/dropout.h"
#include "mixp/nn/embedding.h"
#include "mixp/nn/layer_norm.h"
#include "mixp/nn/linear.h"
#include "mixp/nn/lstm.h"
#include "mixp/nn/pooling.h"
#include "mixp/nn/sequential.h"
#include "mixp/nn/transformer.h"
#include "mixp/ops.h"
#include "nn/nn_test_util.h"

namespace mixp::nn {
namespace {

using test::expect_named_shapes;
using test::expect_normal;
using test::expect_uniform;

TEST(Linear, HasPyTorchNamesShapesAndInit) {
  Philox rng(PhiloxState{3});
  Linear fc(LinearOptions(300, 200), rng);
  expect_named_shapes(fc.named_parameters(), {{"weight", {200, 300}}, {"bias", {200}}});
  expect_uniform(fc.weight(), 1.0 / std::sqrt(300.0));
  expect_uniform(fc.bias(), 1.0 / std::sqrt(300.0));
  EXPECT_EQ(fc.weight().tag(), MemoryTag::parameter);
  EXPECT_TRUE(fc.weight().requires_grad());
  EXPECT_TRUE(fc.weight().is_leaf());
  EXPECT_EQ(fc.pretty_print(), "Linear(in_features=300, out_features=200, bias=True)");

  Linear no_bias(LinearOptions(4, 3, /*bias=*/false), rng);
  expect_named_shapes(no_bias.named_parameters(), {{"weight", {3, 4}}});
  EXPECT_EQ(no_bias.forward(ones({2, 4})).shape(), Shape({2, 3}));
  EXPECT_THROW(no_bias.forward(ones({2, 5})), Error);
  EXPECT_THROW(Linear(LinearOptions(0, 3), rng), Error);
}

TEST(Linear, ForwardIsXWTransposedPlusB) {
  Philox rng;
  Linear fc(LinearOptions(3, 2), rng);
  fc.weight().copy_(from_values({1, 2, 3, 4, 5, 6}, {2, 3}));
  fc.bias().copy_(from_values({0.5, -1}, {2}));
  const Tensor y = fc.forward(from_values({1, 1, 2}, {1, 3}));
  EXPECT_EQ(y.to_vector(), (std::vector<double>{1 + 2 + 6 + 0.5, 4 + 5 + 12 - 1}));
}

TEST(Linear, ForwardPreHooksSeeTheInputBeforeTheForwardHooksSeeTheOutput) {
  Philox rng;
  Linear fc(LinearOptions(3, 2), rng);
  std::vector<std::string> order;
  std::vector<double> seen;
  const int64_t pre = fc.add_forward_pre_hook([&](Module& m, const Tensor& input) {
    EXPECT_EQ(&m, &fc);
    order.push_back("pre");
    seen = input.to_vector();
  });
  const int64_t post = fc.add_forward_hook([&](Module&, const Tensor& output) {
    order.push_back("post");
    return output;
  });
  EXPECT_NE(pre, post);
  fc.forward(from_values({1, -2, 3}, {1, 3}));
  EXPECT_EQ(order, (std::vector<std::string>{"pre", "post"}));
  EXPECT_EQ(seen, (std::vector<double>{1, -2, 3}));
  fc.remove_forward_pre_hook(pre);
  fc.remove_forward_pre_hook(post);  // another kind's id: ignored, the forward hook stays
  fc.forward(from_values({4, 5, 6}, {1, 3}));
  EXPECT_EQ(order, (std::vector<std::string>{"pre", "post", "post"}));
  EXPECT_EQ(seen, (std::vector<double>{1, -2, 3}));
  EXPECT_THROW(fc.add_forward_pre_hook(nullptr), Error);
}

TEST(Conv2d, HasPyTorchNamesShapesAndInit) {
  Philox rng(PhiloxState{4});
  Conv2d conv(Conv2dOptions(8, 64, 3).with_padding(1), rng);
  expect_named_shapes(conv.named_parameters(), {{"weight", {64, 8, 3, 3}}, {"bias", {64}}});
  expect_uniform(conv.weight(), 1.0 / std::sqrt(8.0 * 9.0));
  EXPECT_EQ(conv.forward(ones({2, 8, 5, 7})).shape(), Shape({2, 64, 5, 7}));
  EXPECT_EQ(conv.pretty_print(),
            "Conv2d(8, 64, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))");

  Conv2dOptions grouped(8, 4, 3);
  grouped.groups = 2;
  Conv2d g(grouped, rng);
  EXPECT_EQ(g.weight().shape(), Shape({4, 4, 3, 3}));
  expect_uniform(g.weight(), 1.0 / std::sqrt(4.0 * 9.0));
  Conv2dOptions bad(8, 3, 3);
  bad.groups = 2;
  EXPECT_THROW(Conv2d(bad, rng), Error);
  EXPECT_THROW(conv.forward(ones({2, 3, 5, 5})), Error);
}

TEST(BatchNorm2d, HasPyTorchNamesBuffersAndDefaults) {
  BatchNorm2d bn(BatchNorm2dOptions(5));
  expect_named_shapes(bn.named_parameters(), {{"weight", {5}}, {"bias", {5}}});
  expect_named_shapes(bn.named_buffers(),
                      {{"running_mean", {5}}, {"running_var", {5}}, {"num_batches_tracked", {}}});
  EXPECT_EQ(bn.weight().to_vector(), std::vector<double>(5, 1.0));
  EXPECT_EQ(bn.bias().to_vector(), std::vector<double>(5, 0.0));
  EXPECT_EQ(bn.running_mean().to_vector(), std::vector<double>(5, 0.0));
  EXPECT_EQ(bn.running_var().to_vector(), std::vector<double>(5, 1.0));
  EXPECT_EQ(bn.running_var().dtype(), DType::f32);
  EXPECT_EQ(bn.num_batches_tracked().dtype(), DType::i64);
  EXPECT_EQ(bn.num_batches_tracked().item(), 0.0);
  EXPECT_EQ(bn.norm_parameter_flags(), (std::vector<bool>{true, true}));
  EXPECT_EQ(bn.pretty_print(),
            "BatchNorm2d(5, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)");
}

TEST(BatchNorm2d, TrainingUsesBatchStatisticsAndUpdatesRunningOnes) {
  BatchNorm2d bn(BatchNorm2dOptions(2));
  Philox rng(PhiloxState{5});
  const Tensor x = ops::add_scalar(randn({4, 2, 3, 3}, rng, 2.0), 3.0);
  const Tensor y = bn.forward(x);
  // Normalized per channel: mean 0, biased variance 1 (up to eps).
  const Tensor mean = ops::mean(y, {0, 2, 3});
  const Tensor var = ops::mean(ops::mul(y, y), {0, 2, 3});
  for (int c = 0; c < 2; ++c) {
    EXPECT_NEAR(mean.to_vector()[size_t(c)], 0.0, 1e-5);
    EXPECT_NEAR(var.to_vector()[size_t(c)], 1.0, 1e-3);
  }
  EXPECT_EQ(bn.num_batches_tracked().item(), 1.0);
  const Tensor batch_mean = ops::mean(x, {0, 2, 3});
  for (int c = 0; c < 2; ++c) {
    EXPECT_NEAR(bn.running_mean().to_vector()[size_t(c)], 0.1 * batch_mean.to_vector()[size_t(c)],
                1e-5);
  }

  // Evaluation: the running statistics, which no longer change.
  bn.train(false);
  EXPECT_FALSE(bn.is_training());
  const std::vector<double> rm = bn.running_mean().to_vector(), rv = bn.running_var().to_vector();
  const Tensor z = bn.forward(x);
  EXPECT_EQ(bn.running_mean().to_vector(), rm);
  EXPECT_EQ(bn.num_batches_tracked().item(), 1.0);
  const double x0 = x.to_vector()[0], z0 = z.to_vector()[0];
  EXPECT_NEAR(z0, (x0 - rm[0]) / std::sqrt(rv[0] + 1e-5), 1e-4);
}

TEST(LayerNorm, HasWeightOneBiasZeroAndIsANorm) {
  LayerNorm ln(LayerNormOptions(6));
  expect_named_shapes(ln.named_parameters(), {{"weight", {6}}, {"bias", {6}}});
  EXPECT_EQ(ln.weight().to_vector(), std::vector<double>(6, 1.0));
  EXPECT_EQ(ln.bias().to_vector(), std::vector<double>(6, 0.0));
  EXPECT_EQ(ln.norm_parameter_flags(), (std::vector<bool>{true, true}));
  Philox rng(PhiloxState{6});
  const Tensor y = ln.forward(randn({3, 6}, rng));
  EXPECT_NEAR(ops::mean(y).item(), 0.0, 1e-6);
  EXPECT_EQ(ln.pretty_print(), "LayerNorm((6,), eps=1e-05, elementwise_affine=True)");
  EXPECT_THROW(ln.forward(ones({3, 5})), Error);
}

// For a layer norm that feeds a linear: the autocast dtype under autocast (the values the
// linear's cast would make), fp32 otherwise, and fp32 under an FP8 recipe (FP8 linears quantize
// the fp32 input themselves).
TEST(LayerNorm, ForLinearGivesTheAutocastDtypeUnderAutocast) {
  LayerNorm ln(LayerNormOptions(6));
  Philox rng(PhiloxState{8});
  const Tensor x = randn({3, 6}, rng);
  EXPECT_EQ(ln.forward_for_linear(x).dtype(), DType::f32);
  amp::Autocast autocast(DType::bf16);
  const Tensor y = ln.forward_for_linear(x);
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_EQ(y.to_vector(), ln.forward(x).to(DType::bf16).to_vector());
  amp::Fp8State fp8;
  amp::Fp8Autocast scope(fp8);
  EXPECT_EQ(ln.forward_for_linear(x).dtype(), DType::f32);
}

TEST(Embedding, IsStandardNormalAsPyTorch) {
  Philox rng(PhiloxState{7});
  Embedding e(EmbeddingOptions(100, 50), rng);
  expect_named_shapes(e.named_parameters(), {{"weight", {100, 50}}});
  expect_normal(e.weight(), 1.0);
  const Tensor y = e.forward(from_values({3, 7, 3}, {3}, DType::i64));
  EXPECT_EQ(y.shape(), Shape({3, 50}));
  EXPECT_THROW(e.forward(ones({3})), Error);
}

TEST(Dropout, TrainsWithAnAdvancingGeneratorAndIsTheIdentityInEval) {
  auto gen = std::make_shared<Philox>(PhiloxState{8, 1, 0});
  Dropout drop(DropoutOptions(0.5), gen);
  const Tensor x = ones({1000});
  const Tensor a = drop.forward(x);
  EXPECT_EQ(gen->state().offset, 1000u);
  const Tensor b = drop.forward(x);
  EXPECT_EQ(gen->state().offset, 2000u);
  const std::vector<double> va = a.to_vector(), vb = b.to_vector();
  int zeros_a = 0;
  for (double v : va) {
    EXPECT_TRUE(v == 0.0 || v == 2.0);
    zeros_a += v == 0.0;
  }
  EXPECT_NEAR(zeros_a, 500, 5 * std::sqrt(250.0));  // binomial(1000, 0.5): 5 sigma
  EXPECT_NE(va, vb);                                // the generator moved on

  drop.train(false);
  const Tensor c = drop.forward(x);
  EXPECT_TRUE(c.is_same(x));
  EXPECT_EQ(gen->state().offset, 2000u);
  const auto rng = std::make_shared<Philox>(PhiloxState{.seed = 0, .stream = 1});
  EXPECT_THROW(Dropout(DropoutOptions(1.0), rng), Error);
  EXPECT_THROW(Dropout(DropoutOptions(0.1), nullptr), Error);
}

TEST(Sequential, NamesChildrenByPosition) {
  Philox rng(PhiloxState{9});
  Sequential seq;
  seq.push_back(std::make_shared<Linear>(LinearOptions(4, 8), rng));
  seq.push_back(std::make_shared<ReLU>());
  seq.push_back(std::make_shared<Linear>(LinearOptions(8, 2), rng));
  expect_named_shapes(
      seq.named_parameters(),
      {{"0.weight", {8, 4}}, {"0.bias", {8}}, {"2.weight", {2, 8}}, {"2.bias", {2}}});
  EXPECT_EQ(seq.forward(ones({3, 4})).shape(), Shape({3, 2}));
  EXPECT_EQ(seq.pretty_print(),
            "Sequential(\n"
            "  (0): Linear(in_features=4, out_features=8, bias=True)\n"
            "  (1): ReLU()\n"
            "  (2): Linear(in_features=8, out_features=2, bias=True)\n"
            ")");
  seq.train(false);
  EXPECT_FALSE(seq[0].is_training());
}

TEST(Pooling, MaxPoolAndFlattenShapes) {
  MaxPool2d pool(MaxPool2dOptions(2));
  EXPECT_EQ(pool.forward(ones({2, 3, 8, 6})).shape(), Shape({2, 3, 4, 3}));
  Flatten flat;
  EXPECT_EQ(flat.forward(ones({2, 3, 4, 5})).shape(), Shape({2, 60}));
}

TEST(LSTM, HasPyTorchNamesShapesAndInit) {
  Philox rng(PhiloxState{10});
  LSTMOptions o(7, 32);
  o.num_layers = 2;
  o.batch_first = true;
  LSTM lstm(o, rng);
  expect_named_shapes(lstm.named_parameters(), {{"weight_ih_l0", {128, 7}},
                                                {"weight_hh_l0", {128, 32}},
                                                {"bias_ih_l0", {128}},
                                                {"bias_hh_l0", {128}},
                                                {"weight_ih_l1", {128, 32}},
                                                {"weight_hh_l1", {128, 32}},
                                                {"bias_ih_l1", {128}},
                                                {"bias_hh_l1", {128}}});
  for (auto& [name, p] : lstm.named_parameters()) expect_uniform(*p, 1.0 / std::sqrt(32.0));
  const Tensor y = lstm.forward(randn({3, 5, 7}, rng));
  EXPECT_EQ(y.shape(), Shape({3, 5, 32}));
  EXPECT_EQ(lstm.pretty_print(), "LSTM(7, 32, num_layers=2, batch_first=True)");
  EXPECT_THROW(lstm.forward(ones({3, 5, 6})), Error);
}

TEST(LSTM, SequenceFirstLayoutMatchesBatchFirst) {
  LSTMOptions o(3, 4);
  Philox a(PhiloxState{11}), b(PhiloxState{11});
  LSTM seq_first(o, a);
  o.batch_first = true;
  LSTM batch_first(o, b);
  Philox rng(PhiloxState{12});
  const Tensor x = randn({2, 5, 3}, rng);  // [B, T, C]
  const Tensor y1 = batch_first.forward(x);
  const Tensor y2 = ops::permute(seq_first.forward(ops::permute(x, {1, 0, 2})), {1, 0, 2});
  EXPECT_EQ(y1.to_vector(), y2.to_vector());
}

TEST(LSTM, OneStepIsTheGateEquations) {
  // One layer, one step, hidden 1: every gate by hand.
  LSTMOptions o(1, 1);
  Philox rng;
  LSTM lstm(o, rng);
  auto params = lstm.named_parameters();
  params[0].second->copy_(from_values({0.5, -0.25, 1.0, 0.75}, {4, 1}));  // weight_ih: i f g o
  params[1].second->copy_(from_values({0, 0, 0, 0}, {4, 1}));
  params[2].second->copy_(from_values({0.1, 0.2, 0.3, 0.4}, {4}));
  params[3].second->copy_(from_values({0, 0, 0, 0}, {4}));
  const double x = 2.0;
  const auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  const double i = sig(0.5 * x + 0.1), g = std::tanh(1.0 * x + 0.3), o_gate = sig(0.75 * x + 0.4);
  const double c = i * g, h = o_gate * std::tanh(c);
  const Tensor y = lstm.forward(from_values({x}, {1, 1, 1}));
  EXPECT_NEAR(y.item(), h, 1e-6);
}

TEST(Transformer, BlockHasNanoGptNames) {
  Philox rng(PhiloxState{13});
  TransformerBlock block({.n_embd = 8, .n_head = 2}, rng, std::make_shared<Philox>());
  expect_named_shapes(block.named_parameters(), {{"ln_1.weight", {8}},
                                                 {"ln_1.bias", {8}},
                                                 {"attn.c_attn.weight", {24, 8}},
                                                 {"attn.c_attn.bias", {24}},
                                                 {"attn.c_proj.weight", {8, 8}},
                                                 {"attn.c_proj.bias", {8}},
                                                 {"ln_2.weight", {8}},
                                                 {"ln_2.bias", {8}},
                                                 {"mlp.c_fc.weight", {32, 8}},
                                                 {"mlp.c_fc.bias", {32}},
                                                 {"mlp.c_proj.weight", {8, 32}},
                                                 {"mlp.c_proj.bias", {8}}});
  EXPECT_EQ(block.norm_parameter_flags(),
            (std::vector<bool>{true, true, false, false, false, false, true, true, false, false,
                               false, false}));
  EXPECT_EQ(block.forward(randn({2, 5, 8}, rng)).shape(), Shape({2, 5, 8}));
  EXPECT_THROW(TransformerBlock({.n_embd = 9, .n_head = 2}, rng, std::make_shared<Philox>()),
               Error);
}

TEST(Transformer, AttentionIsCausal) {
  Philox rng(PhiloxState{14});
  CausalSelfAttention attn({.n_embd = 8, .n_head = 2}, rng, std::make_shared<Philox>());
  const Tensor x = randn({1, 6, 8}, rng);
  const std::vector<double> y = attn.forward(x).to_vector();
  // Changing the last position leaves the outputs of the earlier ones alone.
  std::vector<double> changed = x.to_vector();
  for (size_t i = 5 * 8; i < 6 * 8; ++i) changed[i] += 1.0;
  const std::vector<double> z = attn.forward(from_values(changed, {1, 6, 8})).to_vector();
  for (size_t i = 0; i < 5 * 8; ++i) EXPECT_EQ(y[i], z[i]) << i;
  EXPECT_NE(y[5 * 8], z[5 * 8]);
}

// A layer with random initial values takes the generator they come from, always. Without one,
// all such layers drew from Philox{seed 0}, so two built alike started equal.
TEST(Module, RandomlyInitializedLayersRequireAGenerator) {
  EXPECT_FALSE((std::is_constructible_v<Linear, const LinearOptions&>));
  EXPECT_FALSE((std::is_constructible_v<Conv2d, const Conv2dOptions&>));
  EXPECT_FALSE((std::is_constructible_v<Embedding, const EmbeddingOptions&>));
  EXPECT_FALSE((std::is_constructible_v<LSTM, const LSTMOptions&>));
  // Nor a temporary generator: the caller keeps the stream, and with it the next draws.
  EXPECT_FALSE((std::is_constructible_v<Linear, const LinearOptions&, Philox>));
  EXPECT_TRUE((std::is_constructible_v<Linear, const LinearOptions&, Philox&>));

  Philox rng(PhiloxState{15});
  Linear a(LinearOptions(4, 3), rng), b(LinearOptions(4, 3), rng);
  EXPECT_NE(a.weight().to_vector(), b.weight().to_vector());
  Conv2d c(Conv2dOptions(2, 3, 3), rng), d(Conv2dOptions(2, 3, 3), rng);
  EXPECT_NE(c.weight().to_vector(), d.weight().to_vector());
  Embedding e(EmbeddingOptions(5, 4), rng), f(EmbeddingOptions(5, 4), rng);
  EXPECT_NE(e.weight().to_vector(), f.weight().to_vector());
  LSTM g(LSTMOptions(2, 3), rng), h(LSTMOptions(2, 3), rng);
  EXPECT_NE(g.parameters()[0].to_vector(), h.parameters()[0].to_vector());
}

TEST(Module, ReplaceParametersChecksCountAndShapes) {
  Philox rng;
  Linear fc(LinearOptions(3, 2), rng);
  EXPECT_THROW(replace_parameters(fc, {zeros({2, 3})}), Error);
  EXPECT_THROW(replace_parameters(fc, {zeros({3, 2}), zeros({2})}), Error);
  const Tensor before = fc.weight();
  EXPECT_THROW(replace_parameters(fc, {zeros({2, 3}), zeros({2}, DType::i64)}), Error);
  EXPECT_TRUE(fc.weight().is_same(before));  // nothing changed
  const Tensor w = zeros({2, 3}, DType::bf16), b = zeros({2}, DType::bf16);
  replace_parameters(fc, {w, b});
  EXPECT_TRUE(fc.weight().is_same(w));
  EXPECT_TRUE(fc.parameters()[1].is_same(b));
  EXPECT_EQ(fc.forward(ones({1, 3}, DType::bf16)).dtype(), DType::bf16);
}

}  // namespace
}  // namespace mixp::nn
