// The built-in models: names and shapes as PyTorch and nanoGPT name them, parameter counts,
// forward shapes and dtypes, gradients for every parameter, train/eval, initialization,
// determinism, a short training run each, the bf16 preset, and the gpt against the PyTorch
// fixture of tests/golden (tests/golden/README.md).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mixp/amp/presets.h"
#include "mixp/autograd.h"
#include "mixp/error.h"
#include "mixp/nn/lstm.h"
#include "mixp/nn/models.h"
#include "mixp/ops.h"
#include "mixp/optim/adam.h"
#include "nn/nn_test_util.h"
#include "support/tolerance.h"

namespace mixp::nn {
namespace {

using test::expect_named_shapes;
using test::expect_normal;
using test::expect_uniform;
using test::NamedShapes;

ModelConfig small_lm(const std::string& name) {
  return ModelConfig{.name = name, .vocab = 11, .layers = 2, .heads = 2, .width = 16, .context = 8};
}

int64_t count(Module& m) {
  int64_t n = 0;
  for (const Tensor& p : m.parameters()) n += p.numel();
  return n;
}

/// A batch of the model's input, and targets.
std::pair<Tensor, Tensor> batch_for(const Model& model, uint64_t seed, int64_t n = 4) {
  Philox rng(PhiloxState{seed, 99, 0});
  const ModelConfig& c = const_cast<Model&>(model).config();
  if (model.task() == Task::classification) {
    const Tensor x = randn({n, 1, c.image_size, c.image_size}, rng);
    std::vector<double> y;
    for (int64_t i = 0; i < n; ++i) y.push_back(double(rng.next_u32() % uint32_t(c.classes)));
    return {x, from_values(y, {n}, DType::i64)};
  }
  // A sequence that counts up modulo the vocabulary, from a random start per row: the next
  // token is a function of the current one, which a few steps can learn.
  const int64_t t = c.context;
  std::vector<double> x, y;
  for (int64_t b = 0; b < n; ++b) {
    const int64_t start = int64_t(rng.next_u32() % uint32_t(c.vocab));
    for (int64_t i = 0; i < t; ++i) {
      x.push_back(double((start + i) % c.vocab));
      y.push_back(double((start + i + 1) % c.vocab));
    }
  }
  return {from_values(x, {n, t}, DType::i64), from_values(y, {n, t}, DType::i64)};
}

Tensor loss_of(Model& model, const Tensor& x, const Tensor& y) {
  const Tensor logits = model.forward(x);
  if (model.task() == Task::classification) return ops::cross_entropy(logits, y);
  return ops::cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
}

// ---- names and shapes ----

TEST(Models, MlpNamesAndShapes) {
  auto m = make_model({.name = "mlp"}, 0);
  expect_named_shapes(m->named_parameters(), {{"fc1.weight", {1024, 784}},
                                              {"fc1.bias", {1024}},
                                              {"fc2.weight", {1024, 1024}},
                                              {"fc2.bias", {1024}},
                                              {"fc3.weight", {10, 1024}},
                                              {"fc3.bias", {10}}});
  EXPECT_TRUE(m->named_buffers().empty());
  EXPECT_EQ(count(*m), 784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10);
  EXPECT_EQ(m->task(), Task::classification);
}

TEST(Models, DeepMlpNamesShapesAndInitialScale) {
  const ModelConfig config{.name = "deep-mlp", .layers = 3, .width = 32};
  auto model = make_model(config, 5);
  EXPECT_EQ(model->task(), Task::regression);
  const auto named = model->named_parameters();
  ASSERT_EQ(named.size(), 4u);
  const std::vector<std::pair<std::string, Shape>> want = {{"fc1.weight", {32, kDeepMlpInputs}},
                                                           {"fc2.weight", {32, 32}},
                                                           {"fc3.weight", {32, 32}},
                                                           {"fc4.weight", {kDeepMlpOutputs, 32}}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(named[i].first, want[i].first);
    EXPECT_EQ(named[i].second->shape(), want[i].second) << want[i].first;
  }
  // Standard deviations 1/sqrt(fan_in) for the hidden layers and 1e-5 for the output, within
  // four standard errors of a sample standard deviation (sigma / sqrt(2 n)).
  const std::vector<double> stddev = {0.25, 1 / std::sqrt(32.0), 1 / std::sqrt(32.0), 1e-5};
  for (size_t i = 0; i < named.size(); ++i) {
    const std::vector<double> v = named[i].second->to_vector();
    double sq = 0;
    for (double x : v) sq += x * x;
    const double s = std::sqrt(sq / double(v.size()));
    EXPECT_NEAR(s, stddev[i], 4 * stddev[i] / std::sqrt(2.0 * double(v.size()))) << named[i].first;
  }
  const Tensor y = model->forward(ones({5, kDeepMlpInputs}));
  EXPECT_EQ(y.shape(), (Shape{5, kDeepMlpOutputs}));
  EXPECT_THROW(model->forward(ones({5, 15})), Error);
  // The same seed gives the same model.
  EXPECT_EQ(make_model(config, 5)->named_parameters()[3].second->to_vector(),
            named[3].second->to_vector());
}

TEST(Models, CnnNamesShapesAndBuffers) {
  auto m = make_model({.name = "cnn"}, 0);
  expect_named_shapes(m->named_parameters(), {{"features.0.weight", {32, 1, 3, 3}},
                                              {"features.0.bias", {32}},
                                              {"features.1.weight", {32}},
                                              {"features.1.bias", {32}},
                                              {"features.4.weight", {64, 32, 3, 3}},
                                              {"features.4.bias", {64}},
                                              {"features.5.weight", {64}},
                                              {"features.5.bias", {64}},
                                              {"classifier.0.weight", {128, 64 * 7 * 7}},
                                              {"classifier.0.bias", {128}},
                                              {"classifier.2.weight", {10, 128}},
                                              {"classifier.2.bias", {10}}});
  expect_named_shapes(m->named_buffers(), {{"features.1.running_mean", {32}},
                                           {"features.1.running_var", {32}},
                                           {"features.1.num_batches_tracked", {}},
                                           {"features.5.running_mean", {64}},
                                           {"features.5.running_var", {64}},
                                           {"features.5.num_batches_tracked", {}}});
  EXPECT_EQ(m->norm_parameter_flags(), (std::vector<bool>{false, false, true, true, false, false,
                                                          true, true, false, false, false, false}));
  EXPECT_EQ(count(*m), (32 * 9 + 32) + 2 * 32 + (64 * 32 * 9 + 64) + 2 * 64 + (3136 * 128 + 128) +
                           (128 * 10 + 10));
  EXPECT_NE(m->pretty_print().find("(features): Sequential("), std::string::npos);
}

TEST(Models, LstmNamesAndShapes) {
  auto m = make_model(small_lm("lstm"), 0);
  NamedShapes want = {{"embedding.weight", {11, 16}}};
  for (int k = 0; k < 2; ++k) {
    const std::string l = std::to_string(k);
    want.push_back({"lstm.weight_ih_l" + l, {64, 16}});
    want.push_back({"lstm.weight_hh_l" + l, {64, 16}});
    want.push_back({"lstm.bias_ih_l" + l, {64}});
    want.push_back({"lstm.bias_hh_l" + l, {64}});
  }
  want.push_back({"head.weight", {11, 16}});
  want.push_back({"head.bias", {11}});
  expect_named_shapes(m->named_parameters(), want);
  EXPECT_EQ(m->task(), Task::language_model);
}

NamedShapes gpt_names(int64_t v, int64_t ctx, int layers, int64_t c) {
  NamedShapes want = {{"transformer.wte.weight", {v, c}}, {"transformer.wpe.weight", {ctx, c}}};
  for (int i = 0; i < layers; ++i) {
    const std::string h = "transformer.h." + std::to_string(i) + ".";
    want.push_back({h + "ln_1.weight", {c}});
    want.push_back({h + "ln_1.bias", {c}});
    want.push_back({h + "attn.c_attn.weight", {3 * c, c}});
    want.push_back({h + "attn.c_attn.bias", {3 * c}});
    want.push_back({h + "attn.c_proj.weight", {c, c}});
    want.push_back({h + "attn.c_proj.bias", {c}});
    want.push_back({h + "ln_2.weight", {c}});
    want.push_back({h + "ln_2.bias", {c}});
    want.push_back({h + "mlp.c_fc.weight", {4 * c, c}});
    want.push_back({h + "mlp.c_fc.bias", {4 * c}});
    want.push_back({h + "mlp.c_proj.weight", {c, 4 * c}});
    want.push_back({h + "mlp.c_proj.bias", {c}});
  }
  want.push_back({"transformer.ln_f.weight", {c}});
  want.push_back({"transformer.ln_f.bias", {c}});
  return want;  // lm_head.weight is transformer.wte.weight (tied), listed once as nanoGPT does
}

TEST(Models, GptNamesAndShapesAsNanoGpt) {
  auto m = make_model(small_lm("gpt"), 0);
  expect_named_shapes(m->named_parameters(), gpt_names(11, 8, 2, 16));
  EXPECT_TRUE(m->named_buffers().empty());
}

TEST(Models, GptDefaultShapeParameterCount) {
  // shakespeare-char: V = 65, context 256, 6 layers, width 384, with biases (nanoGPT's default).
  auto m = make_model({.name = "gpt"}, 0);
  const int64_t v = 65, t = 256, l = 6, c = 384;
  const int64_t block =
      2 * c + (3 * c * c + 3 * c) + (c * c + c) + 2 * c + (4 * c * c + 4 * c) + (4 * c * c + c);
  const int64_t total = v * c + t * c + l * block + 2 * c;
  EXPECT_EQ(total, 10770816);
  EXPECT_EQ(count(*m), total);
  // nanoGPT's "10.65M" counts without wpe and with bias=False (its shakespeare-char config):
  const int64_t biases = l * (c + 3 * c + c + c + 4 * c + c) + c;
  EXPECT_EQ(total - t * c - biases, 10646784);
  expect_named_shapes(m->named_parameters(), gpt_names(v, t, int(l), c));
}

// ---- forward, backward ----

class EveryModel : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<Model> make(uint64_t seed = 0, double dropout = 0.0) {
    ModelConfig c = small_lm(GetParam());
    c.dropout = dropout;
    if (GetParam() == "cnn") c.image_size = 12;
    if (GetParam() == "mlp" || GetParam() == "cnn") c.classes = 5;
    return make_model(c, seed);
  }
};

TEST_P(EveryModel, ForwardShapeAndDtype) {
  auto m = make();
  const auto [x, y] = batch_for(*m, 1);
  const Tensor out = m->forward(x);
  EXPECT_EQ(out.dtype(), DType::f32);
  if (m->task() == Task::classification) {
    EXPECT_EQ(out.shape(), Shape({4, 5}));
  } else {
    EXPECT_EQ(out.shape(), Shape({4, 8, 11}));
    // Shorter sequences too.
    EXPECT_EQ(m->forward(x.reshape({-1}).slice(0, 3).reshape({1, 3})).shape(), Shape({1, 3, 11}));
  }
}

TEST_P(EveryModel, BackwardGivesEveryParameterAGradient) {
  auto m = make();
  const auto [x, y] = batch_for(*m, 2);
  loss_of(*m, x, y).backward();
  for (auto& [name, p] : m->named_parameters()) {
    ASSERT_TRUE(p->grad().defined()) << name;
    EXPECT_EQ(p->grad().shape(), p->shape()) << name;
    double norm = 0;
    for (double g : p->grad().to_vector()) norm += g * g;
    EXPECT_TRUE(std::isfinite(norm)) << name;
    EXPECT_GT(norm, 0.0) << name;
  }
}

TEST_P(EveryModel, SameSeedSameModelOtherSeedAnother) {
  auto a = make(5), b = make(5), c = make(6);
  const auto pa = a->parameters(), pb = b->parameters(), pc = c->parameters();
  bool all_same_as_c = true;
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].to_vector(), pb[i].to_vector()) << i;
    all_same_as_c = all_same_as_c && pa[i].to_vector() == pc[i].to_vector();
  }
  EXPECT_FALSE(all_same_as_c);
  const auto [x, y] = batch_for(*a, 3);
  EXPECT_EQ(a->forward(x).to_vector(), b->forward(x).to_vector());
}

TEST_P(EveryModel, ErrorsForBadInputs) {
  auto m = make();
  if (m->task() == Task::classification) {
    EXPECT_THROW(m->forward(ones({2, 1, 7, 7})), Error);
    EXPECT_THROW(m->forward(ones({2, 784})), Error);
  } else {
    EXPECT_THROW(m->forward(ones({2, 4})), Error);                  // not i64
    EXPECT_THROW(m->forward(zeros({2, 9}, DType::i64)), Error);     // longer than context
    EXPECT_THROW(m->forward(full({1, 2}, 11, DType::i64)), Error);  // token out of range
    EXPECT_THROW(m->forward(zeros({2, 3, 1}, DType::i64)), Error);  // not [B, T]
  }
}

TEST_P(EveryModel, AFewAdamStepsReduceTheLoss) {
  auto m = make(7);
  const auto [x, y] = batch_for(*m, 4);
  optim::Adam opt(m->parameters(), {.lr = 1e-2});
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    const Tensor loss = loss_of(*m, x, y);
    if (step == 0) first = loss.item();
    last = loss.item();
    loss.backward();
    opt.step();
    opt.zero_grad();
  }
  EXPECT_TRUE(std::isfinite(last));
  EXPECT_LT(last, 0.5 * first) << "first " << first << ", last " << last;
}

TEST_P(EveryModel, Bf16PresetRunsWithNormsInFp32) {
  auto m = make(8);
  const amp::Preset& p = amp::preset("bf16");
  replace_parameters(*m, p.cast_parameters(m->parameters(), m->norm_parameter_flags()));
  const auto named = m->named_parameters();
  const auto norms = m->norm_parameter_flags();
  for (size_t i = 0; i < named.size(); ++i) {
    EXPECT_EQ(named[i].second->dtype(), norms[i] ? DType::f32 : DType::bf16) << named[i].first;
  }
  const auto [x, y] = batch_for(*m, 5);
  Tensor loss;
  {
    auto scope = p.autocast();
    loss = loss_of(*m, x, y);
  }
  ASSERT_TRUE(std::isfinite(loss.item()));
  loss.backward();
  for (auto& [name, t] : m->named_parameters()) EXPECT_TRUE(t->grad().defined()) << name;
}

INSTANTIATE_TEST_SUITE_P(Nn, EveryModel, ::testing::Values("mlp", "cnn", "lstm", "gpt"),
                         [](const auto& info) { return info.param; });

// ---- train / eval ----

TEST(Models, CnnBatchNormFollowsTrainAndEval) {
  auto m = make_model({.name = "cnn", .image_size = 8}, 0);
  const auto [x, y] = batch_for(*m, 6);
  const Tensor* tracked = m->named_buffers()[2].second;
  m->forward(x);
  EXPECT_EQ(tracked->item(), 1.0);
  m->train(false);
  const std::vector<double> a = m->forward(x).to_vector();
  EXPECT_EQ(tracked->item(), 1.0);
  EXPECT_EQ(m->forward(x).to_vector(), a);
  m->train(true);
  m->forward(x);
  EXPECT_EQ(tracked->item(), 2.0);
}

TEST(Models, GptDropoutFollowsTrainAndEvalAndAdvancesTheModelGenerator) {
  ModelConfig c = small_lm("gpt");
  c.dropout = 0.2;
  auto m = make_model(c, 0);
  const auto [x, y] = batch_for(*m, 7);
  EXPECT_EQ(m->generator().state(), (PhiloxState{0, 1, 0}));
  const std::vector<double> a = m->forward(x).to_vector();
  const uint64_t after_one = m->generator().state().offset;
  EXPECT_GT(after_one, 0u);
  EXPECT_NE(m->forward(x).to_vector(), a);
  m->train(false);
  const uint64_t before_eval = m->generator().state().offset;
  const std::vector<double> e = m->forward(x).to_vector();
  EXPECT_EQ(m->forward(x).to_vector(), e);
  EXPECT_EQ(m->generator().state().offset, before_eval);

  // The masks are a function of the generator state: restore it, get the same output.
  m->train(true);
  m->generator().set_state({0, 1, 0});
  EXPECT_EQ(m->forward(x).to_vector(), a);
}

// ---- initialization ----

TEST(Models, GptHasGpt2Init) {
  ModelConfig c{.name = "gpt", .vocab = 65, .layers = 3, .heads = 4, .width = 128, .context = 64};
  auto m = make_model(c, 1);
  const double proj = 0.02 / std::sqrt(2.0 * 3);
  const auto named = m->named_parameters();
  const auto norms = m->norm_parameter_flags();
  for (size_t i = 0; i < named.size(); ++i) {
    const std::string& name = named[i].first;
    const std::vector<double> v = named[i].second->to_vector();
    if (norms[i]) {
      EXPECT_EQ(v, std::vector<double>(v.size(), name.ends_with("bias") ? 0.0 : 1.0)) << name;
      EXPECT_NE(name.find("ln_"), std::string::npos) << name;
    } else if (name.ends_with("bias")) {
      EXPECT_EQ(v, std::vector<double>(v.size(), 0.0)) << name;
    } else {
      SCOPED_TRACE(name);
      expect_normal(*named[i].second, name.ends_with("c_proj.weight") ? proj : 0.02);
    }
  }
}

TEST(Models, PyTorchDefaultInitOfTheOtherModels) {
  auto mlp = make_model({.name = "mlp"}, 2);
  const auto p = mlp->named_parameters();
  expect_uniform(*p[0].second, 1 / std::sqrt(784.0));
  expect_uniform(*p[1].second, 1 / std::sqrt(784.0));
  expect_uniform(*p[2].second, 1 / std::sqrt(1024.0));
  auto cnn = make_model({.name = "cnn"}, 2);
  const auto q = cnn->named_parameters();
  expect_uniform(*q[4].second, 1 / std::sqrt(32.0 * 9));  // features.4.weight
  expect_uniform(*q[8].second, 1 / std::sqrt(3136.0));    // classifier.0.weight
  auto lstm = make_model({.name = "lstm", .vocab = 65, .layers = 2, .width = 128}, 2);
  const auto r = lstm->named_parameters();
  expect_normal(*r[0].second, 1.0);  // embedding
  for (size_t i = 1; i <= 8; ++i) expect_uniform(*r[i].second, 1 / std::sqrt(128.0));
}

TEST(Models, UnknownNameAndBadShapesThrow) {
  EXPECT_THROW(make_model({.name = "resnet"}, 0), Error);
  EXPECT_THROW(make_model({.name = "gpt", .heads = 5, .width = 384}, 0), Error);
  EXPECT_THROW(make_model({.name = "gpt", .layers = 0}, 0), Error);
  EXPECT_THROW(make_model({.name = "cnn", .image_size = 30}, 0), Error);
  EXPECT_THROW(make_model({.name = "lstm", .vocab = 0}, 0), Error);
  EXPECT_THROW(make_model({.name = "mlp", .dropout = 1.0}, 0), Error);
  try {
    make_model({.name = "resnet"}, 0);
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("mlp, cnn, lstm, gpt"), std::string::npos) << e.message();
  }
}

// ---- against PyTorch: the tied GPT of tests/golden/fixtures/transformer.json ----

using json = nlohmann::json;

json load_fixture(const std::string& file) {
  std::ifstream in(std::string(MIXP_GOLDEN_FIXTURES_DIR) + "/" + file);
  if (!in) throw std::runtime_error("cannot open fixture " + file);
  return json::parse(in);
}

Tensor tensor_from(const json& j, DType dtype) {
  const auto dims = j.at("shape").get<std::vector<int64_t>>();
  return from_values(j.at("data").get<std::vector<double>>(), Shape(dims), dtype);
}

TEST(Golden, GptModelMatchesPyTorchTiedNanoGpt) {
  const json fixture = load_fixture("transformer.json");
  const json* tied = nullptr;
  for (const json& m : fixture.at("models")) {
    if (m.at("name") == "gpt/tied") tied = &m;
  }
  ASSERT_NE(tied, nullptr);
  const json& cfg = tied->at("config");
  ModelConfig c{.name = "gpt",
                .vocab = cfg.at("vocab_size").get<int64_t>(),
                .layers = cfg.at("n_layer").get<int>(),
                .heads = cfg.at("n_head").get<int>(),
                .width = cfg.at("n_embd").get<int64_t>(),
                .context = cfg.at("block_size").get<int64_t>()};
  auto m = make_model(c, 0);
  // Our names are exactly the fixture's (nanoGPT's named_parameters of the tied model).
  const auto named = m->named_parameters();
  ASSERT_EQ(named.size(), tied->at("params").size());
  std::vector<Tensor> values;
  for (const auto& [name, p] : named) {
    ASSERT_TRUE(tied->at("params").contains(name)) << name;
    values.push_back(tensor_from(tied->at("params").at(name), DType::f64).set_requires_grad(true));
  }
  replace_parameters(*m, values);
  const Tensor idx = tensor_from(tied->at("idx"), DType::i64);
  const Tensor targets = tensor_from(tied->at("targets"), DType::i64);
  const Tensor logits = m->forward(idx);
  const auto tol = mixp::test::tolerance(DType::f64, 64);
  EXPECT_EQ(mixp::test::compare(logits, tensor_from(tied->at("logits"), DType::f64), tol), "");
  const Tensor loss = ops::cross_entropy(logits.reshape({-1, c.vocab}), targets.reshape({-1}));
  EXPECT_EQ(mixp::test::compare(loss, tensor_from(tied->at("loss"), DType::f64), tol), "");
  loss.backward();
  for (const auto& [name, p] : m->named_parameters()) {
    EXPECT_EQ(
        mixp::test::compare(p->grad(), tensor_from(tied->at("grads").at(name), DType::f64), tol),
        "")
        << name;
  }
}

// ---- against PyTorch: torch.nn.LSTM of tests/golden/fixtures/lstm.json ----

TEST(Golden, LstmMatchesTorchNnLstm) {
  const json fixture = load_fixture("lstm.json");
  ASSERT_EQ(fixture.at("models").size(), 2u);
  for (const json& model : fixture.at("models")) {
    SCOPED_TRACE(model.at("name").get<std::string>());
    const json& cfg = model.at("config");
    LSTMOptions o(cfg.at("input_size").get<int64_t>(), cfg.at("hidden_size").get<int64_t>());
    o.num_layers = cfg.at("num_layers").get<int>();
    o.batch_first = true;
    Philox rng;  // the values are replaced by the fixture's
    LSTM lstm(o, rng);
    const auto named = lstm.named_parameters();
    ASSERT_EQ(named.size(), model.at("params").size());
    std::vector<Tensor> values;
    for (const auto& [name, p] : named) {
      ASSERT_TRUE(model.at("params").contains(name)) << name;
      values.push_back(
          tensor_from(model.at("params").at(name), DType::f64).set_requires_grad(true));
    }
    replace_parameters(lstm, values);
    Tensor x = tensor_from(model.at("x"), DType::f64).set_requires_grad(true);
    const Tensor out = lstm.forward(x);
    // The longest sum: T steps of the recurrence over 4 H gates (64 is more than enough here).
    const auto tol = mixp::test::tolerance(DType::f64, 64);
    EXPECT_EQ(mixp::test::compare(out, tensor_from(model.at("out"), DType::f64), tol), "");
    out.backward(tensor_from(model.at("grad_out"), DType::f64));
    EXPECT_EQ(mixp::test::compare(x.grad(), tensor_from(model.at("grad_x"), DType::f64), tol), "");
    for (const auto& [name, p] : lstm.named_parameters()) {
      EXPECT_EQ(
          mixp::test::compare(p->grad(), tensor_from(model.at("grads").at(name), DType::f64), tol),
          "")
          << name;
    }
  }
}

}  // namespace
}  // namespace mixp::nn
