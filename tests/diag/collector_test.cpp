// diag::Collector on a small model: what it records is the statistics of the tensors the
// layers really produce, computed here independently.
#include <gtest/gtest.h>

#include <cmath>

#include "mixp/autograd.h"
#include "mixp/diag/collector.h"
#include "mixp/error.h"
#include "mixp/nn/activation.h"
#include "mixp/nn/linear.h"
#include "mixp/nn/sequential.h"
#include "mixp/ops.h"

namespace mixp::diag {
namespace {

struct Fixture {
  Philox rng{PhiloxState{7, 0, 0}};
  nn::Sequential model;
  Tensor x, c;  // the loss is sum(model(x) * c), so dL/d(output) = c exactly
  Fixture() {
    model.push_back(std::make_shared<nn::Linear>(nn::LinearOptions(6, 5), rng));
    model.push_back(std::make_shared<nn::Tanh>());
    model.push_back(std::make_shared<nn::Linear>(nn::LinearOptions(5, 3), rng));
    x = randn({4, 6}, rng);
    c = randn({4, 3}, rng, 1e-3);
  }
  void step(Collector& collector, int64_t s, double scale) {
    collector.begin_step(s, scale);
    const Tensor loss = ops::mul_scalar(ops::sum(ops::mul(model.forward(x), c)), scale);
    loss.backward();
    collector.end_step();
    for (Tensor& p : model.parameters()) p.set_grad(Tensor());
  }
};

const LayerRecord* find(const Collector& c, int64_t step, const std::string& name, Role role) {
  for (const LayerRecord& r : c.records())
    if (r.step == step && r.name == name && r.role == role) return &r;
  return nullptr;
}

TEST(DiagCollector, RecordsTheFourTensorsOfEveryLayerUnscaled) {
  Fixture f;
  const double scale = 1024.0;
  Collector collector(f.model);
  EXPECT_EQ(collector.layers(), (std::vector<std::string>{"0", "2"}));
  f.step(collector, 0, scale);

  // Independently: the first layer's output, and the last layer's output gradient c.
  Tensor h;
  {
    NoGradGuard no_grad;
    h = ops::linear(f.x, *f.model.named_parameters()[0].second,
                    *f.model.named_parameters()[1].second);
  }
  const LayerRecord* act = find(collector, 0, "0", Role::activation);
  ASSERT_NE(act, nullptr);
  EXPECT_EQ(act->stats.histogram, tensor_stats(h).histogram);
  EXPECT_EQ(act->stats.max_abs, tensor_stats(h).max_abs);

  const LayerRecord* grad = find(collector, 0, "2", Role::activation_gradient);
  ASSERT_NE(grad, nullptr);
  const TensorStats want = tensor_stats(f.c);
  EXPECT_EQ(grad->stats.histogram, want.histogram) << "divided by the loss scale";
  EXPECT_EQ(grad->stats.min_abs, want.min_abs);
  EXPECT_EQ(grad->loss_scale, scale);
  // The queries at scale 1, then at the loss scale: fp16 at 1024 of c is fp16 at 1 of 1024 c.
  ASSERT_EQ(grad->stats.formats.size(), 8u);
  EXPECT_EQ(grad->stats.formats[4].query.label, "fp16@1024");
  EXPECT_EQ(grad->stats.formats[4].underflow,
            value_stats(ops::mul_scalar(f.c, scale).to_vector(), standard_queries())
                .formats[0]
                .underflow);

  for (const char* p : {"0.weight", "0.bias", "2.weight", "2.bias"}) {
    ASSERT_NE(find(collector, 0, p, Role::weight), nullptr) << p;
    ASSERT_NE(find(collector, 0, p, Role::weight_gradient), nullptr) << p;
  }
  EXPECT_EQ(find(collector, 0, "0.weight", Role::weight)->numel, 30);
  EXPECT_EQ(collector.records().size(), 2u * 2 + 4u * 2);
}

TEST(DiagCollector, EveryNStepsNothingOutsideStepsAndSampling) {
  Fixture f;
  Collector collector(f.model, {.every = 3, .max_elements = 7}, {"2"});
  for (int64_t s = 0; s < 7; ++s) f.step(collector, s, 1.0);
  std::vector<int64_t> steps;
  for (const LayerRecord& r : collector.records())
    if (r.role == Role::activation) steps.push_back(r.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{0, 3, 6}));
  const size_t before = collector.records().size();
  {
    NoGradGuard no_grad;
    (void)f.model.forward(f.x);  // evaluation: no step open
  }
  EXPECT_EQ(collector.records().size(), before);
  // The output has 12 elements: sampled down to 7; numel keeps the full size.
  const LayerRecord* act = find(collector, 0, "2", Role::activation);
  ASSERT_NE(act, nullptr);
  EXPECT_EQ(act->stats.count, 6);  // strides of 2 over 12 elements
  EXPECT_EQ(act->numel, 12);
}

TEST(DiagCollector, HooksLeaveWithTheCollectorAndNamesAreChecked) {
  Fixture f;
  {
    Collector collector(f.model);
    collector.begin_step(0, 1.0);
    EXPECT_STREQ(f.model.forward(f.x).grad_fn()->name, "gradient_hook");
    collector.end_step();
  }
  EXPECT_STREQ(f.model.forward(f.x).grad_fn()->name, "linear");
  EXPECT_THROW(Collector(f.model, {}, {"7"}), Error);
  EXPECT_THROW(Collector(f.model, {.every = 0}), Error);
  nn::Tanh no_parameters;
  EXPECT_THROW(Collector{no_parameters}, Error);
  Collector collector(f.model);
  EXPECT_THROW(collector.begin_step(0, 0.0), Error);
}

}  // namespace
}  // namespace mixp::diag
