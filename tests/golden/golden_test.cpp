// Golden tests: mixp's ops against fixtures that PyTorch 1.13 computed in float64
// (tests/golden/make_fixtures.py; the layout is in tests/golden/README.md). Each case rebuilds its
// inputs, runs the op on the fast path and on the reference path, backpropagates the recorded
// upstream gradient, and compares the output and every input gradient with the one tolerance
// function of the tests. Ops that mixp does not have yet are listed in pending_ops(): their cases
// are skipped, and any other op without a runner fails, so a fixture cannot go unchecked.
#include <gtest/gtest.h>

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

// ---- one runner per mixp op: named inputs and attributes in, outputs out ----------------------

using Inputs = std::map<std::string, Tensor>;
using Runner = std::function<std::vector<Tensor>(const Inputs&, const json&)>;

const Tensor& in(const Inputs& inputs, const std::string& name) {
  const auto it = inputs.find(name);
  if (it == inputs.end()) throw std::runtime_error("golden fixture: no input " + name);
  return it->second;
}

const std::map<std::string, Runner>& runners() {
  using Unary = Tensor (*)(const Tensor&);
  using Binary = Tensor (*)(const Tensor&, const Tensor&);
  static const std::map<std::string, Runner> table = [] {
    std::map<std::string, Runner> t;
    auto unary = [&](const char* name, Unary f) {
      t[name] = [f](const Inputs& i, const json&) { return std::vector{f(in(i, "x"))}; };
    };
    auto binary = [&](const char* name, Binary f) {
      t[name] = [f](const Inputs& i, const json&) {
        return std::vector{f(in(i, "a"), in(i, "b"))};
      };
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
    t["transpose"] = [](const Inputs& i, const json& a) {
      return std::vector{
          ops::transpose(in(i, "x"), a.at("dim0").get<int>(), a.at("dim1").get<int>())};
    };
    t["permute"] = [](const Inputs& i, const json& a) {
      return std::vector{ops::permute(in(i, "x"), a.at("order").get<std::vector<int>>())};
    };
    return t;
  }();
  return table;
}

// Ops with fixtures but not yet in mixp/ops.h. When one lands, add its runner above and remove
// it here; the fixture layout of each is in tests/golden/README.md.
const std::set<std::string>& pending_ops() {
  static const std::set<std::string> pending = {"layer_norm",
                                                "batch_norm",
                                                "conv2d",
                                                "max_pool2d",
                                                "avg_pool2d",
                                                "adaptive_avg_pool2d",
                                                "embedding",
                                                "cat",
                                                "split",
                                                "narrow",
                                                "scaled_dot_product_attention"};
  return pending;
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
  // State that the op updates in place (batch norm's running statistics).
  if (c.contains("after")) {
    for (const auto& [name, value] : c.at("after").items()) {
      EXPECT_EQ(test::compare(inputs.at(name), tensor_from(value), tol), "") << name << " after";
    }
  }
}

class GoldenOp : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(GoldenOp, MatchesPyTorch) {
  const json& c = GetParam().data;
  const std::string op = c.at("op").get<std::string>();
  if (runners().count(op) == 0) {
    ASSERT_EQ(pending_ops().count(op), 1u) << "the fixtures have op " << op << " and no runner";
    GTEST_SKIP() << "mixp has no " << op << " yet: fixture only";
  }
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

TEST(GoldenFixtures, NoPendingOpHasARunner) {
  for (const std::string& op : pending_ops()) {
    EXPECT_EQ(runners().count(op), 0u) << op << " has a runner: remove it from pending_ops()";
  }
}

// The GPT fixture is used once mixp has the modules; until then its structure is checked, so
// that a broken regeneration shows up here.
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

}  // namespace
}  // namespace mixp
