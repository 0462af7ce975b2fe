// run_inspect on the deep-mlp of the loss-scaling test (tests/amp/paper_test.cpp): what it
// predicts from the fp32 probe must be what the paper test measures, and what amp-fp16 does
// to the same batch.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "mixp/error.h"
#include "mixp/train/inspect.h"

namespace mixp::train {
namespace {

InspectOptions deep_mlp(int64_t steps) {
  InspectOptions o;
  o.run.model.name = "deep-mlp";
  o.run.model.layers = 2;
  o.run.model.width = 64;
  o.run.train.precision = "amp-fp16";
  o.run.train.steps = steps;
  o.run.train.seed = 2018;  // the paper test's seed
  return o;
}

const LayerInspection& layer(const InspectResult& r, const std::string& name) {
  for (const LayerInspection& l : r.layers)
    if (l.layer == name) return l;
  throw std::runtime_error("no layer " + name);
}

// How far the observed zeros may stray from the prediction: only values that fp16's rounding
// of the layers in between can move across the zero threshold t / scale, that is values within
// a factor 2 of it: the two binades around it. (fp16's relative error is about 1e-3 per
// rounding, and at initialization the output y is far below the targets t, so the gradient
// 2 (y - t) / (8 N) has no cancellation to amplify it.)
double binades_around_threshold(const diag::TensorStats& s, double scale) {
  const int e = std::ilogb(Format::fp16().min_subnormal() / 2 / scale);
  const int i = e - diag::kWideMinExponent;
  return double(s.wide[size_t(i - 1)] + s.wide[size_t(i)]) / double(s.nonzero_finite());
}

TEST(Inspect, DeepMlpAtInitializationIsThePaperTestsRegime) {
  const InspectResult r = run_inspect(deep_mlp(0));
  ASSERT_EQ(r.layers.size(), 3u);
  EXPECT_EQ(r.loss_scale, 65536.0) << "amp-fp16's initial scale";
  // The paper test: more than 99% of the gradients are zero in fp16 without scaling.
  for (const LayerInspection& l : r.layers) EXPECT_GT(l.underflow_unscaled, 0.99) << l.layer;
  EXPECT_GT(r.model.underflow_unscaled, 0.99);
  // ... and at 2^16 the output layer's gradients are representable (its weight gradients had
  // no zero there), while the hidden layers' still flush.
  EXPECT_LT(layer(r, "fc3").underflow_at_scale, 1 - 0.999);
  EXPECT_LE(*layer(r, "fc3").smallest_safe_exponent, 16);
  EXPECT_GT(layer(r, "fc1").underflow_at_scale, 0.99);
  EXPECT_GT(layer(r, "fc2").underflow_at_scale, 0.99);
  // The prediction against what amp-fp16 computed from the same weights and batch.
  for (const LayerInspection& l : r.layers) {
    EXPECT_EQ(l.observed_loss_scale, 65536.0);
    EXPECT_EQ(l.activation_gradients.zeros, 0) << "no exact zero in fp32: tanh has none";
    EXPECT_DOUBLE_EQ(l.predicted_zero_fraction, l.underflow_at_scale);
    EXPECT_NEAR(l.observed_zero_fraction, l.predicted_zero_fraction,
                binades_around_threshold(l.activation_gradients, 65536.0))
        << l.layer;
  }
  // The advisor names the two hidden layers: scaling by 2^16 does not rescue them.
  ASSERT_EQ(r.advice.size(), 2u);
  EXPECT_EQ(r.advice[0].layer, "fc1");
  EXPECT_EQ(r.advice[1].layer, "fc2");
  EXPECT_EQ(r.advice[0].rule, "fp16_underflow");
}

TEST(Inspect, AfterTrainingTheSafeScalesAreBoundariesAndFilesAreWritten) {
  InspectOptions o = deep_mlp(4);
  o.every = 2;
  o.out_dir =
      (std::filesystem::temp_directory_path() / ("mixp_inspect_test_" + std::to_string(::getpid())))
          .string();
  const InspectResult r = run_inspect(o);
  EXPECT_EQ(r.train.steps, 4);
  // (No comparison with the observed zeros here: once the output fits the targets, the
  // gradient 2 (y - t) / (8 N) is a difference that fp16's rounding of y changes by more than
  // a factor of 2, so the bound of the test above does not hold value by value.)
  for (const LayerInspection& l : r.layers) {
    ASSERT_TRUE(l.largest_safe_exponent.has_value());
    ASSERT_TRUE(l.smallest_safe_exponent.has_value());
    // The safe scale keeps 99.9%, one binade less does not.
    EXPECT_LE(diag::underflow_fraction_at(l.activation_gradients, Format::fp16(),
                                          std::ldexp(1.0, *l.smallest_safe_exponent)),
              0.001);
    EXPECT_GT(diag::underflow_fraction_at(l.activation_gradients, Format::fp16(),
                                          std::ldexp(1.0, *l.smallest_safe_exponent - 1)),
              0.001);
  }
  // Collected on steps 0 and 2 of training, then the observation step (4).
  std::vector<int64_t> steps;
  for (const diag::LayerRecord& rec : r.records)
    if (rec.name == "fc1" && rec.role == diag::Role::activation) steps.push_back(rec.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{0, 2, 4}));

  namespace fs = std::filesystem;
  for (const char* f : {"inspect.json", "activation_gradients.svg", "layers/fc1.svg",
                        "layers/fc2.svg", "layers/fc3.svg"})
    EXPECT_TRUE(fs::exists(fs::path(o.out_dir) / f)) << f;
  std::ifstream in(fs::path(o.out_dir) / "inspect.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_EQ(j.at("layers").size(), 3u);
  EXPECT_EQ(j.at("layers")[0].at("fp16_underflow_at_loss_scale").get<double>(),
            r.layers[0].underflow_at_scale);
  EXPECT_EQ(j.at("loss_scale").get<double>(), r.loss_scale);
  fs::remove_all(o.out_dir);
}

TEST(Inspect, BadOptionsAreErrors) {
  InspectOptions o = deep_mlp(0);
  o.every = 0;
  EXPECT_THROW(run_inspect(o), Error);
  o = deep_mlp(0);
  o.run.model.name = "resnet";
  EXPECT_THROW(run_inspect(o), Error);
  o = deep_mlp(0);
  o.run.data = "/nonexistent";
  EXPECT_THROW(run_inspect(o), Error) << "deep-mlp takes no data";
}

}  // namespace
}  // namespace mixp::train
