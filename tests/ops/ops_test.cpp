// Every op: fast kernels against the reference kernels, forward and backward, for f32, bf16 and
// f16 inputs; and in f64, analytic gradients against central differences.
#include <gtest/gtest.h>

#include <cmath>

#include "mixp/autograd.h"
#include "mixp/runtime.h"
#include "ops/op_cases.h"
#include "support/tolerance.h"

namespace mixp {
namespace {

using test::OpCase;

struct RunResult {
  Tensor output;
  std::vector<Tensor> grads;
};

// Runs the case and backpropagates a fixed random gradient of the output.
RunResult run(const OpCase& c, const std::vector<Tensor>& inputs, uint64_t seed) {
  RunResult r;
  r.output = c.fn(inputs);
  Philox rng(PhiloxState{seed, 99, 0});
  const Tensor g = randn(r.output.shape(), rng, 1.0, DType::f64).to(r.output.dtype()).detach();
  r.output.backward(g);
  for (const Tensor& t : inputs) r.grads.push_back(t.grad());
  return r;
}

class OpTest : public ::testing::TestWithParam<OpCase> {};

TEST_P(OpTest, FastMatchesReferenceOnEveryDtype) {
  const OpCase& c = GetParam();
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    const std::vector<Tensor> fast_in = test::make_inputs(c, dtype, 11);
    const RunResult fast = run(c, fast_in, 5);
    RunResult ref;
    {
      ReferenceMode reference;
      ref = run(c, test::make_inputs(c, dtype, 11), 5);
    }
    ASSERT_EQ(fast.output.dtype(), ref.output.dtype());
    ASSERT_EQ(fast.output.shape(), ref.output.shape());
    const test::Tolerance tol = test::tolerance(dtype, c.reduction_length);
    EXPECT_EQ(test::compare(fast.output, ref.output, tol), "") << name_of(dtype) << " output";
    for (size_t i = 0; i < fast.grads.size(); ++i) {
      ASSERT_TRUE(fast.grads[i].defined()) << "no gradient for input " << i;
      EXPECT_EQ(fast.grads[i].dtype(), dtype) << "gradient " << i;
      EXPECT_EQ(test::compare(fast.grads[i], ref.grads[i], tol), "")
          << name_of(dtype) << " gradient of input " << i;
    }
  }
}

// The cases small enough for central differences (the large ones exist for the kernels' chunking).
class GradCheckTest : public ::testing::TestWithParam<OpCase> {};

std::vector<OpCase> gradcheck_cases() {
  std::vector<OpCase> out;
  for (const OpCase& c : test::all_op_cases()) {
    if (c.gradcheck) out.push_back(c);
  }
  return out;
}

TEST_P(GradCheckTest, GradientsMatchCentralDifferencesInF64) {
  const OpCase& c = GetParam();
  const std::vector<Tensor> inputs = test::make_inputs(c, DType::f64, 23);
  const RunResult analytic = run(c, inputs, 7);
  Philox rng(PhiloxState{7, 99, 0});
  const Tensor g = randn(analytic.output.shape(), rng, 1.0, DType::f64);
  // L(x) = sum(g * f(x)); dL/dx_i by central differences.
  auto loss = [&](const std::vector<Tensor>& in) {
    NoGradGuard no_grad;
    const std::vector<double> y = c.fn(in).to_vector(), w = g.to_vector();
    double total = 0;
    for (size_t i = 0; i < y.size(); ++i) total += y[i] * w[i];
    return total;
  };
  for (size_t which = 0; which < inputs.size(); ++which) {
    std::vector<Tensor> perturbed;
    for (const Tensor& t : inputs) perturbed.push_back(t.clone());
    double* x = perturbed[which].data<double>();
    const std::vector<double> grad = analytic.grads[which].to_vector();
    for (int64_t i = 0; i < perturbed[which].numel(); ++i) {
      const double saved = x[i], h = 1e-6 * std::max(1.0, std::fabs(saved));
      x[i] = saved + h;
      const double up = loss(perturbed);
      x[i] = saved - h;
      const double down = loss(perturbed);
      x[i] = saved;
      const double numeric = (up - down) / (2 * h);
      ASSERT_NEAR(grad[size_t(i)], numeric, 1e-6 + 1e-5 * std::fabs(numeric))
          << c.name << " input " << which << " element " << i;
    }
  }
}

std::string case_name(const ::testing::TestParamInfo<OpCase>& info) {
  std::string n = info.param.name;
  for (char& ch : n) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return n;
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpTest, ::testing::ValuesIn(test::all_op_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(AllOps, GradCheckTest, ::testing::ValuesIn(gradcheck_cases()), case_name);

}  // namespace
}  // namespace mixp
