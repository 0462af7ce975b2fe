// Golden tests: mixp's ops against fixtures that PyTorch 1.13 computed in float64
// (tests/golden/make_fixtures.py; the layout is in tests/golden/README.md). Each case rebuilds its
// inputs, runs the op on the fast path and on the reference path, backpropagates the recorded
// upstream gradient, and compares the output and every input gradient with the one tolerance
// function of the tests. An op in the fixtures without a runner here fails, so a fixture cannot
// go unchecked. The GPT of transformer.json is composed from the ops at the end of the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "mixp/autograd.h"
#include "mixp/ops.h"
#include "mixp/runtime.h"
#include "support/tolerance.h"

namespace mixp {
namespace {

using json = nlohmann::json;

// The groups whose cases share the per-op layout (transformer.json has its own).
const char* const kGroups[] = {"elementwise", "reductions", "linalg", "losses",
                               "misc",        "norm",       "conv",   "attention"};

json load_fixture(const std::string& group) {
  const std::filesystem::path path =
      std::filesystem::path(MIXP_GOLDEN_FIXTURES_DIR) / (group + ".json");
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open golden fixture " + path.string());
  return json::parse(in);
}

DType dtype_named(const std::string& name) {
  if (name == "f64") return DType::f64;
  if (name == "f32") return DType::f32;
  if (name == "i64") return DType::i64;
  throw std::runtime_error("golden fixture: unknown dtype " + name);
}

Tensor tensor_from(const json& j) {
  const std::vector<int64_t> dims = j.at("shape").get<std::vector<int64_t>>();
  const std::vector<double> data = j.at("data").get<std::vector<double>>();
  return from_values(data, Shape(dims), dtype_named(j.at("dtype").get<std::string>()));
}

/// The fixture's values rounded to `dtype` (to nearest even).
Tensor tensor_from(const json& j, DType dtype) {
  const std::vector<int64_t> dims = j.at("shape").get<std::vector<int64_t>>();
  const std::vector<double> data = j.at("data").get<std::vector<double>>();
  return from_values(data, Shape(dims), dtype);
}

// ---- one runner per mixp op: named inputs and attributes in, outputs out ----------------------

using Inputs = std::map<std::string, Tensor>;
using Runner = std::function<std::vector<Tensor>(const Inputs&, const json&)>;

const Tensor& in(const Inputs& inputs, const std::string& name) {
  const auto it = inputs.find(name);
  if (it == inputs.end()) throw std::runtime_error("golden fixture: no input " + name);
  return it->second;
}

// The runners of the elementwise ops, with and without a scalar.
void add_elementwise_runners(std::map<std::string, Runner>& t) {
  using Unary = Tensor (*)(const Tensor&);
  using Binary = Tensor (*)(const Tensor&, const Tensor&);
  auto unary = [&](const char* name, Unary f) {
    t[name] = [f](const Inputs& i, const json&) { return std::vector{f(in(i, "x"))}; };
  };
  auto binary = [&](const char* name, Binary f) {
    t[name] = [f](const Inputs& i, const json&) { return std::vector{f(in(i, "a"), in(i, "b"))}; };
  };
  binary("add", ops::add);
  binary("sub", ops::sub);
  binary("mul", ops::mul);
  binary("div", ops::div);
  unary("neg", ops::neg);
  unary("exp", ops::exp);
  unary("log", ops::log);
  unary("sqrt", ops::sqrt);
  unary("rsqrt", ops::rsqrt);
  unary("tanh", ops::tanh);
  unary("sigmoid", ops::sigmoid);
  unary("relu", ops::relu);
  unary("gelu", ops::gelu);
  unary("gelu_tanh", ops::gelu_tanh);
  unary("silu", ops::silu);
  t["pow"] = [](const Inputs& i, const json& a) {
    return std::vector{ops::pow(in(i, "x"), a.at("exponent").get<double>())};
  };
  t["add_scalar"] = [](const Inputs& i, const json& a) {
    return std::vector{ops::add_scalar(in(i, "x"), a.at("scalar").get<double>())};
  };
  t["mul_scalar"] = [](const Inputs& i, const json& a) {
    return std::vector{ops::mul_scalar(in(i, "x"), a.at("scalar").get<double>())};
  };
}

// The runners of reductions, products, softmax and losses.
void add_reduction_and_product_runners(std::map<std::string, Runner>& t) {
  t["sum"] = [](const Inputs& i, const json& a) {
    return std::vector{
        ops::sum(in(i, "x"), a.at("dims").get<std::vector<int>>(), a.at("keepdim").get<bool>())};
  };
  t["mean"] = [](const Inputs& i, const json& a) {
    return std::vector{
        ops::mean(in(i, "x"), a.at("dims").get<std::vector<int>>(), a.at("keepdim").get<bool>())};
  };
  t["max"] = [](const Inputs& i, const json& a) {
    return std::vector{ops::max(in(i, "x"), a.at("dim").get<int>(), a.at("keepdim").get<bool>())};
  };
  t["matmul"] = [](const Inputs& i, const json&) {
    return std::vector{ops::matmul(in(i, "a"), in(i, "b"))};
  };
  t["bmm"] = [](const Inputs& i, const json&) {
    return std::vector{ops::bmm(in(i, "a"), in(i, "b"))};
  };
  t["linear"] = [](const Inputs& i, const json&) {
    return std::vector{ops::linear(in(i, "x"), in(i, "weight"), in(i, "bias"))};
  };
  t["softmax"] = [](const Inputs& i, const json& a) {
    return std::vector{ops::softmax(in(i, "x"), a.at("dim").get<int>())};
  };
  t["log_softmax"] = [](const Inputs& i, const json& a) {
    return std::vector{ops::log_softmax(in(i, "x"), a.at("dim").get<int>())};
  };
  t["cross_entropy"] = [](const Inputs& i, const json& a) {
    ops::CrossEntropyOptions o;
    o.ignore_index = a.at("ignore_index").get<int64_t>();
    o.label_smoothing = a.at("label_smoothing").get<double>();
    return std::vector{ops::cross_entropy(in(i, "logits"), in(i, "targets"), o)};
  };
  t["mse_loss"] = [](const Inputs& i, const json&) {
    return std::vector{ops::mse_loss(in(i, "prediction"), in(i, "target"))};
  };
}

// The runners of views, copies and indexing.
void add_layout_runners(std::map<std::string, Runner>& t) {
  t["transpose"] = [](const Inputs& i, const json& a) {
    return std::vector{
        ops::transpose(in(i, "x"), a.at("dim0").get<int>(), a.at("dim1").get<int>())};
  };
  t["permute"] = [](const Inputs& i, const json& a) {
    return std::vector{ops::permute(in(i, "x"), a.at("order").get<std::vector<int>>())};
  };
  t["embedding"] = [](const Inputs& i, const json&) {
    return std::vector{ops::embedding(in(i, "weight"), in(i, "indices"))};
  };
  t["cat"] = [](const Inputs& i, const json& a) {
    // x0, x1, ... in order; the name is appended to, not built with operator+ (GCC 12 reports
    // a false -Wrestrict on "x" + std::to_string(k)).
    std::vector<Tensor> xs;
    for (size_t k = 0;; ++k) {
      std::string name = "x";
      name += std::to_string(k);
      if (i.count(name) == 0) break;
      xs.push_back(in(i, name));
    }
    return std::vector{ops::cat(xs, a.at("dim").get<int>())};
  };
  t["split"] = [](const Inputs& i, const json& a) {
    return ops::split(in(i, "x"), a.at("split_size").get<int64_t>(), a.at("dim").get<int>());
  };
  t["narrow"] = [](const Inputs& i, const json& a) {
    return std::vector{ops::narrow(in(i, "x"), a.at("dim").get<int>(), a.at("start").get<int64_t>(),
                                   a.at("length").get<int64_t>())};
  };
}

// The runners of norms, convolution, pooling and attention.
void add_norm_conv_pool_attention_runners(std::map<std::string, Runner>& t) {
  t["layer_norm"] = [](const Inputs& i, const json& a) {
    return std::vector{
        ops::layer_norm(in(i, "x"), in(i, "weight"), in(i, "bias"), a.at("eps").get<double>())};
  };
  t["batch_norm"] = [](const Inputs& i, const json& a) {
    // Handles to the inputs' storage: the op updates the running stats in place, and
    // check_case compares them afterwards with the fixture's "after".
    Tensor running_mean = in(i, "running_mean"), running_var = in(i, "running_var");
    return std::vector{ops::batch_norm(in(i, "x"), in(i, "weight"), in(i, "bias"), running_mean,
                                       running_var, a.at("training").get<bool>(),
                                       a.at("momentum").get<double>(), a.at("eps").get<double>())};
  };
  t["conv2d"] = [](const Inputs& i, const json& a) {
    ops::Conv2dOptions o;
    o.stride_h = o.stride_w = a.at("stride").get<int64_t>();
    o.pad_h = o.pad_w = a.at("pad").get<int64_t>();
    o.dilation_h = o.dilation_w = a.at("dilation").get<int64_t>();
    o.groups = a.at("groups").get<int64_t>();
    return std::vector{ops::conv2d(in(i, "x"), in(i, "weight"), in(i, "bias"), o)};
  };
  using Pool = Tensor (*)(const Tensor&, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
  auto pool = [&](const char* name, Pool f) {
    t[name] = [f](const Inputs& i, const json& a) {
      const int64_t k = a.at("kernel").get<int64_t>(), s = a.at("stride").get<int64_t>(),
                    p = a.at("pad").get<int64_t>();
      return std::vector{f(in(i, "x"), k, k, s, s, p, p)};
    };
  };
  pool("max_pool2d", ops::max_pool2d);
  pool("avg_pool2d", ops::avg_pool2d);
  t["adaptive_avg_pool2d"] = [](const Inputs& i, const json& a) {
    const std::vector<int64_t> out = a.at("output_size").get<std::vector<int64_t>>();
    if (out.size() != 2) throw std::runtime_error("golden fixture: output_size is [oh, ow]");
    return std::vector{ops::adaptive_avg_pool2d(in(i, "x"), out[0], out[1])};
  };
  t["scaled_dot_product_attention"] = [](const Inputs& i, const json& a) {
    return std::vector{ops::scaled_dot_product_attention(in(i, "q"), in(i, "k"), in(i, "v"),
                                                         a.at("causal").get<bool>())};
  };
}
const std::map<std::string, Runner>& runners() {
  static const std::map<std::string, Runner> table = [] {
    std::map<std::string, Runner> t;
    add_elementwise_runners(t);
    add_reduction_and_product_runners(t);
    add_layout_runners(t);
    add_norm_conv_pool_attention_runners(t);
    return t;
  }();
  return table;
}

// ---- the cases -------------------------------------------------------------------------------

struct GoldenCase {
  std::string group;
  json data;
};

// What gtest prints as the parameter: the case, not its bytes.
void PrintTo(const GoldenCase& c, std::ostream* out) {
  *out << c.group << ".json: " << c.data.at("name").get<std::string>();
}

std::vector<GoldenCase> all_cases() {
  std::vector<GoldenCase> cases;
  for (const char* group : kGroups) {
    const json fixture = load_fixture(group);
    for (const json& c : fixture.at("cases")) cases.push_back({group, c});
  }
  return cases;
}

std::string test_name(const GoldenCase& c) {
  std::string name = c.group + "_" + c.data.at("name").get<std::string>();
  std::string out;
  for (char ch : name) {
    const bool keep = std::isalnum(static_cast<unsigned char>(ch)) != 0;
    if (keep) {
      out += ch;
    } else if (!out.empty() && out.back() != '_') {
      out += '_';
    }
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out;
}

// Runs one case and checks every recorded tensor; `path` names the kernels for the messages.
void check_case(const json& c, const char* path) {
  SCOPED_TRACE(std::string(path) + " path, " + c.at("name").get<std::string>());
  const Runner& run = runners().at(c.at("op").get<std::string>());
  const test::Tolerance tol = test::tolerance(dtype_named(c.at("dtype").get<std::string>()),
                                              c.at("reduction_length").get<int64_t>());
  Inputs inputs;
  for (const json& input : c.at("inputs")) {
    Tensor t;
    if (!input.at("value").is_null()) {
      t = tensor_from(input.at("value"));
      if (input.contains("grad")) t.set_requires_grad(true);
    }
    inputs.emplace(input.at("name").get<std::string>(), t);
  }

  const std::vector<Tensor> outputs = run(inputs, c.at("attrs"));
  const json& want = c.at("outputs");
  ASSERT_EQ(outputs.size(), want.size());
  std::vector<Tensor> upstream;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor expected = tensor_from(want[k].at("value"));
    const std::string name = want[k].at("name").get<std::string>();
    ASSERT_EQ(outputs[k].shape(), expected.shape()) << name;
    ASSERT_EQ(outputs[k].dtype(), expected.dtype()) << name;
    EXPECT_EQ(test::compare(outputs[k], expected, tol), "") << name;
    upstream.push_back(tensor_from(want[k].at("grad")));
  }

  // Backward from the recorded upstream gradient; several outputs backpropagate together as
  // the scalar sum_k <output_k, upstream_k>, whose gradient is the same.
  if (outputs.size() == 1) {
    outputs[0].backward(upstream[0]);
  } else {
    Tensor total = ops::sum(ops::mul(outputs[0], upstream[0]));
    for (size_t k = 1; k < outputs.size(); ++k) {
      total = ops::add(total, ops::sum(ops::mul(outputs[k], upstream[k])));
    }
    total.backward();
  }
  for (const json& input : c.at("inputs")) {
    if (!input.contains("grad")) continue;
    const std::string name = input.at("name").get<std::string>();
    const Tensor grad = inputs.at(name).grad();
    ASSERT_TRUE(grad.defined()) << "no gradient for " << name;
    const Tensor expected = tensor_from(input.at("grad"));
    ASSERT_EQ(grad.shape(), expected.shape()) << "gradient of " << name;
    ASSERT_EQ(grad.dtype(), expected.dtype()) << "gradient of " << name;
    EXPECT_EQ(test::compare(grad, expected, tol), "") << "gradient of " << name;
  }
  // State that the op updates in place (batch norm's running statistics). Its dtype may differ
  // from the case's (running stats are f32 for f64 inputs too): its tolerance is its own
  // dtype's, over the same reduction.
  if (c.contains("after")) {
    for (const auto& [name, value] : c.at("after").items()) {
      const Tensor expected = tensor_from(value);
      const Tensor& got = inputs.at(name);
      ASSERT_EQ(got.dtype(), expected.dtype()) << name << " after";
      const test::Tolerance state_tol =
          test::tolerance(expected.dtype(), c.at("reduction_length").get<int64_t>());
      EXPECT_EQ(test::compare(got, expected, state_tol), "") << name << " after";
    }
  }
}

class GoldenOp : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(GoldenOp, MatchesPyTorch) {
  const json& c = GetParam().data;
  const std::string op = c.at("op").get<std::string>();
  ASSERT_EQ(runners().count(op), 1u) << "the fixtures have op " << op << " and no runner";
  check_case(c, "fast");
  ReferenceMode reference;
  check_case(c, "reference");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenOp, ::testing::ValuesIn(all_cases()),
                         [](const auto& info) { return test_name(info.param); });

TEST(GoldenFixtures, EveryGroupHasCasesOfTheCurrentFormat) {
  for (const char* group : kGroups) {
    const json fixture = load_fixture(group);
    EXPECT_EQ(fixture.at("meta").at("format").get<int>(), 1) << group;
    EXPECT_FALSE(fixture.at("cases").empty()) << group;
  }
}

// The structure of the GPT fixture, checked apart so that a broken regeneration names itself.
TEST(GoldenFixtures, TransformerHasEveryNanoGptParameterAndItsGradient) {
  const json fixture = load_fixture("transformer");
  ASSERT_EQ(fixture.at("models").size(), 2u);
  for (const json& model : fixture.at("models")) {
    const bool tied = model.at("config").at("tied").get<bool>();
    const json& params = model.at("params");
    const int n_layer = model.at("config").at("n_layer").get<int>();
    std::set<std::string> expected = {"transformer.wte.weight", "transformer.wpe.weight",
                                      "transformer.ln_f.weight", "transformer.ln_f.bias"};
    if (!tied) expected.insert("lm_head.weight");
    for (int i = 0; i < n_layer; ++i) {
      const std::string h = "transformer.h." + std::to_string(i) + ".";
      for (const char* p :
           {"ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj"}) {
        expected.insert(h + p + ".weight");
        expected.insert(h + p + ".bias");
      }
    }
    std::set<std::string> names;
    for (const auto& [name, value] : params.items()) names.insert(name);
    EXPECT_EQ(names, expected) << model.at("name");
    for (const std::string& name : expected) {
      const Tensor p = tensor_from(params.at(name));
      EXPECT_EQ(tensor_from(model.at("grads").at(name)).shape(), p.shape()) << name;
      EXPECT_EQ(tensor_from(model.at("sgd").at("params_after").at(name)).shape(), p.shape())
          << name;
    }
    const Tensor logits = tensor_from(model.at("logits"));
    EXPECT_EQ(logits.shape(), (Shape{2, 8, 11}));
    EXPECT_EQ(model.at("sgd").at("losses").size(), 3u);
  }
}

// ---- the GPT of transformer.json, composed from mixp's ops -------------------------------------

// The longest reduction in the model, for the tolerance of everything it computes. With C =
// n_embd, V = vocab_size and B * T positions, the sums are: forward, linear over C (c_attn,
// c_fc, lm_head) and over 4C (mlp.c_proj), layer norm over C, attention over T keys and Dh, the
// softmax of cross entropy over V and its mean over B * T; backward, the input gradients of
// those linears over their outputs (3C, 4C, C, V), the weight and bias gradients over the B * T
// rows, wpe's over B, wte's over at most B * T positions, plus B * T more for the tied lm_head.
// The longest is max(4C, 2 * B * T, V): 64 for this model (C = 16, B * T = 16, V = 11).
int64_t gpt_reduction_length(const json& model) {
  const json& config = model.at("config");
  const int64_t c = config.at("n_embd").get<int64_t>();
  const Shape idx = tensor_from(model.at("idx")).shape();
  const int64_t positions = idx[0] * idx[1];
  return std::max({4 * c, 2 * positions, config.at("vocab_size").get<int64_t>()});
}

/// nanoGPT's parameters by name, as leaves of one dtype that require gradients. In the tied
/// model lm_head.weight is the same tensor as transformer.wte.weight.
struct Gpt {
  int n_layer = 0, n_head = 0, n_embd = 0;
  bool tied = false;
  double eps = 0;
  std::map<std::string, Tensor> params;

  const Tensor& p(const std::string& name) const {
    const auto it = params.find(name);
    if (it == params.end()) throw std::runtime_error("gpt: no parameter " + name);
    return it->second;
  }
  const Tensor& lm_head() const { return tied ? p("transformer.wte.weight") : p("lm_head.weight"); }
};

Gpt load_gpt(const json& model, DType dtype) {
  const json& config = model.at("config");
  Gpt gpt;
  gpt.n_layer = config.at("n_layer").get<int>();
  gpt.n_head = config.at("n_head").get<int>();
  gpt.n_embd = config.at("n_embd").get<int>();
  gpt.tied = config.at("tied").get<bool>();
  gpt.eps = config.at("layer_norm_eps").get<double>();
  for (const auto& [name, value] : model.at("params").items()) {
    Tensor t = tensor_from(value, dtype);
    t.set_requires_grad(true);
    gpt.params.emplace(name, t);
  }
  return gpt;
}

Tensor causal_self_attention(const Gpt& gpt, const std::string& h, const Tensor& x) {
  const int64_t b = x.size(0), t = x.size(1), c = gpt.n_embd, heads = gpt.n_head;
  const Tensor qkv = ops::linear(x, gpt.p(h + "attn.c_attn.weight"), gpt.p(h + "attn.c_attn.bias"));
  const std::vector<Tensor> parts = ops::split(qkv, c, -1);  // q, k, v [B, T, C]
  std::vector<Tensor> heads_of;
  for (const Tensor& z : parts) {
    heads_of.push_back(ops::permute(z.reshape({b, t, heads, c / heads}), {0, 2, 1, 3}));
  }
  const Tensor y = ops::scaled_dot_product_attention(heads_of[0], heads_of[1], heads_of[2],
                                                     /*causal=*/true);  // [B, H, T, Dh]
  const Tensor merged = ops::permute(y, {0, 2, 1, 3}).reshape({b, t, c});
  return ops::linear(merged, gpt.p(h + "attn.c_proj.weight"), gpt.p(h + "attn.c_proj.bias"));
}

Tensor mlp(const Gpt& gpt, const std::string& h, const Tensor& x) {
  const Tensor hidden =
      ops::gelu_tanh(ops::linear(x, gpt.p(h + "mlp.c_fc.weight"), gpt.p(h + "mlp.c_fc.bias")));
  return ops::linear(hidden, gpt.p(h + "mlp.c_proj.weight"), gpt.p(h + "mlp.c_proj.bias"));
}

/// Logits [B, T, V] of idx [B, T].
Tensor gpt_logits(const Gpt& gpt, const Tensor& idx) {
  const int64_t t = idx.size(1);
  Tensor x = ops::add(ops::embedding(gpt.p("transformer.wte.weight"), idx),
                      ops::embedding(gpt.p("transformer.wpe.weight"), arange(t, DType::i64)));
  for (int layer = 0; layer < gpt.n_layer; ++layer) {
    const std::string h = "transformer.h." + std::to_string(layer) + ".";
    x = ops::add(x, causal_self_attention(gpt, h,
                                          ops::layer_norm(x, gpt.p(h + "ln_1.weight"),
                                                          gpt.p(h + "ln_1.bias"), gpt.eps)));
    x = ops::add(
        x,
        mlp(gpt, h, ops::layer_norm(x, gpt.p(h + "ln_2.weight"), gpt.p(h + "ln_2.bias"), gpt.eps)));
  }
  x = ops::layer_norm(x, gpt.p("transformer.ln_f.weight"), gpt.p("transformer.ln_f.bias"), gpt.eps);
  return ops::linear(x, gpt.lm_head());
}

/// Mean cross entropy of logits [B, T, V] against targets [B, T].
Tensor gpt_loss(const Tensor& logits, const Tensor& targets) {
  const int64_t v = logits.size(-1);
  return ops::cross_entropy(logits.reshape({-1, v}), targets.reshape({-1}));
}

/// p -= lr * grad for every parameter, outside the graph; the gradients are cleared.
void sgd_step(Gpt& gpt, double lr) {
  NoGradGuard no_grad;
  for (auto& [name, p] : gpt.params) {
    const Tensor grad = p.grad();
    if (!grad.defined()) throw std::runtime_error("gpt: no gradient for " + name);
    p.copy_(ops::sub(p, ops::mul_scalar(grad, lr)));
    p.set_grad(Tensor());
  }
}

struct GptCase {
  json data;
};

void PrintTo(const GptCase& c, std::ostream* out) {
  *out << "transformer.json: " << c.data.at("name").get<std::string>();
}

std::vector<GptCase> gpt_models() {
  std::vector<GptCase> models;
  const json fixture = load_fixture("transformer");
  for (const json& model : fixture.at("models")) models.push_back({model});
  return models;
}

class GoldenGpt : public ::testing::TestWithParam<GptCase> {};

std::string gpt_test_name(const GptCase& c) {
  return c.data.at("config").at("tied").get<bool>() ? "tied" : "untied";
}

// Logits, loss and every gradient at the fixture's parameters, then three SGD steps; `path`
// names the kernels for the messages.
void check_gpt_f64(const json& model, const char* path) {
  SCOPED_TRACE(std::string(path) + " path, " + model.at("name").get<std::string>());
  const test::Tolerance tol = test::tolerance(DType::f64, gpt_reduction_length(model));
  Gpt gpt = load_gpt(model, DType::f64);
  const Tensor idx = tensor_from(model.at("idx")), targets = tensor_from(model.at("targets"));

  const Tensor logits = gpt_logits(gpt, idx);
  const Tensor want_logits = tensor_from(model.at("logits"));
  ASSERT_EQ(logits.shape(), want_logits.shape());
  ASSERT_EQ(logits.dtype(), DType::f64);
  EXPECT_EQ(test::compare(logits, want_logits, tol), "") << "logits";

  const Tensor loss = gpt_loss(logits, targets);
  const Tensor want_loss = tensor_from(model.at("loss"));
  ASSERT_EQ(loss.shape(), want_loss.shape());
  ASSERT_EQ(loss.dtype(), DType::f64);
  EXPECT_EQ(test::compare(loss, want_loss, tol), "") << "loss";

  loss.backward();
  ASSERT_EQ(gpt.params.size(), model.at("grads").size());
  for (const auto& [name, want] : model.at("grads").items()) {
    const Tensor grad = gpt.p(name).grad();
    ASSERT_TRUE(grad.defined()) << "no gradient for " << name;
    const Tensor expected = tensor_from(want);
    ASSERT_EQ(grad.shape(), expected.shape()) << "gradient of " << name;
    ASSERT_EQ(grad.dtype(), expected.dtype()) << "gradient of " << name;
    EXPECT_EQ(test::compare(grad, expected, tol), "") << "gradient of " << name;
  }

  // SGD on the same batch, from the initial parameters: the loss before each step, then the
  // loss and the parameters after the last.
  gpt = load_gpt(model, DType::f64);
  const json& sgd = model.at("sgd");
  ASSERT_EQ(sgd.at("momentum").get<double>(), 0.0);
  ASSERT_EQ(sgd.at("weight_decay").get<double>(), 0.0);
  const double lr = sgd.at("lr").get<double>();
  const std::vector<double> losses = sgd.at("losses").get<std::vector<double>>();
  ASSERT_EQ(losses.size(), sgd.at("steps").get<size_t>());
  for (size_t step = 0; step < losses.size(); ++step) {
    const Tensor step_loss = gpt_loss(gpt_logits(gpt, idx), targets);
    EXPECT_EQ(test::compare(step_loss, full({}, losses[step], DType::f64), tol), "")
        << "loss before step " << step;
    step_loss.backward();
    sgd_step(gpt, lr);
  }
  {
    NoGradGuard no_grad;
    const Tensor after = gpt_loss(gpt_logits(gpt, idx), targets);
    EXPECT_EQ(test::compare(after, full({}, sgd.at("loss_after").get<double>(), DType::f64), tol),
              "")
        << "loss after the steps";
  }
  for (const auto& [name, want] : sgd.at("params_after").items()) {
    EXPECT_EQ(test::compare(gpt.p(name), tensor_from(want), tol), "") << name << " after SGD";
  }
}

TEST_P(GoldenGpt, LogitsLossGradientsAndSgdStepsMatchPyTorch) {
  check_gpt_f64(GetParam().data, "fast");
  ReferenceMode reference;
  check_gpt_f64(GetParam().data, "reference");
}

// The same model in f32 (its parameters rounded to f32): the f32 kernels end to end (oneDNN's
// matmul on the fast path), against the f64 answer.
void check_gpt_f32_loss(const json& model, const char* path) {
  SCOPED_TRACE(std::string(path) + " path, " + model.at("name").get<std::string>());
  const Gpt gpt = load_gpt(model, DType::f32);
  const Tensor idx = tensor_from(model.at("idx")), targets = tensor_from(model.at("targets"));
  const Tensor loss = gpt_loss(gpt_logits(gpt, idx), targets);
  ASSERT_EQ(loss.dtype(), DType::f32);
  const test::Tolerance tol = test::tolerance(DType::f32, gpt_reduction_length(model));
  EXPECT_EQ(test::compare(loss.to(DType::f64), tensor_from(model.at("loss")), tol), "");
}

TEST_P(GoldenGpt, F32LossMatchesTheF64Fixture) {
  check_gpt_f32_loss(GetParam().data, "fast");
  ReferenceMode reference;
  check_gpt_f32_loss(GetParam().data, "reference");
}

INSTANTIATE_TEST_SUITE_P(Transformer, GoldenGpt, ::testing::ValuesIn(gpt_models()),
                         [](const ::testing::TestParamInfo<GptCase>& info) {
                           return gpt_test_name(info.param);
                         });

}  // namespace
}  // namespace mixp
