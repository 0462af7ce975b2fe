// mixp/nn/linear.h — y = x W^T + b, as torch.nn.Linear.
//
// Parameters: weight [out_features, in_features], bias [out_features] (if options.bias).
// Initialization, PyTorch's default: kaiming_uniform(a = sqrt(5)) for the weight, which is
// U(-1/sqrt(in_features), 1/sqrt(in_features)), and the same bound for the bias.
//
// Example:
//
//   mixp::Philox rng({/*seed=*/0});
//   mixp::nn::Linear fc(mixp::nn::LinearOptions(784, 10), rng);
//   mixp::Tensor y = fc.forward(x);                 // x [..., 784] -> y [..., 10]
#pragma once

#include "mixp/nn/module.h"

namespace mixp::nn {

struct LinearOptions {
  LinearOptions(int64_t in_features, int64_t out_features, bool bias = true)
      : in_features(in_features), out_features(out_features), bias(bias) {}
  int64_t in_features;   ///< at least 1
  int64_t out_features;  ///< at least 1
  bool bias = true;      ///< PyTorch's default: with a bias
};

class Linear : public UnaryModule {
 public:
  /// Draws the initial values from `rng`, which advances. There is no constructor without a
  /// generator: two layers built alike would start equal.
  Linear(const LinearOptions& options, Philox& rng);

  /// x [..., in_features] -> [..., out_features].
  Tensor forward(const Tensor& x) override;
  /// Draws the parameters again, from `rng`, as the constructor does.
  void reset(Philox& rng);

  const LinearOptions& options() const { return options_; }
  Tensor& weight() { return *weight_; }
  Tensor& bias() { return *bias_; }  ///< an undefined tensor without a bias

 protected:
  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override;

 private:
  LinearOptions options_;
  Tensor* weight_ = nullptr;
  Tensor* bias_ = nullptr;
  Tensor no_bias_;
};

}  // namespace mixp::nn
