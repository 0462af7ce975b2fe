#include "mixp/autograd.h"
#include "mixp/data/dataset.h"
#include "mixp/error.h"
#include "mixp/ops.h"

namespace mixp::data {

Regression make_tiny_gradient_regression(uint64_t seed, int64_t n_train, int64_t n_test) {
  MIXP_CHECK(n_train >= 1 && n_test >= 1,
             "make_tiny_gradient_regression: both sets need at least one sample, got ", n_train,
             " and ", n_test);
  constexpr int64_t kInputs = 16, kOutputs = 8;
  Philox rng(PhiloxState{.seed = seed, .stream = kRegressionStream});
  const Tensor teacher = randn({kOutputs, kInputs}, rng, 0.25);
  NoGradGuard no_grad;
  auto targets = [&](const Tensor& x) {
    return ops::mul_scalar(ops::tanh(ops::linear(x, teacher)), 1e-4);
  };
  Regression r;
  r.train_x = randn({n_train, kInputs}, rng, 1.0, DType::f32, MemoryTag::data);
  r.test_x = randn({n_test, kInputs}, rng, 1.0, DType::f32, MemoryTag::data);
  r.train_y = targets(r.train_x);
  r.test_y = targets(r.test_x);
  return r;
}

}  // namespace mixp::data
