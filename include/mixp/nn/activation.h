// mixp/nn/activation.h — elementwise activations as modules, for Sequential: ReLU, GELU (with
// PyTorch's approximate="none" or "tanh"), Tanh. No parameters.
//
// Example:
//
//   seq.push_back(std::make_shared<mixp::nn::ReLU>());
//   seq.push_back(std::make_shared<mixp::nn::GELU>(mixp::nn::GELUOptions{.approximate_tanh =
//   true}));
#pragma once

#include "mixp/nn/module.h"

namespace mixp::nn {

class ReLU : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;

 protected:
  std::string type_name() const override { return "ReLU"; }
};

struct GELUOptions {
  bool approximate_tanh = false;  ///< PyTorch's approximate="tanh" (GPT-2's); else the erf form
};

class GELU : public UnaryModule {
 public:
  explicit GELU(const GELUOptions& options = {}) : options_(options) {}
  Tensor forward(const Tensor& x) override;

 protected:
  std::string type_name() const override { return "GELU"; }
  std::string extra_repr() const override;

 private:
  GELUOptions options_;
};

class Tanh : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override;

 protected:
  std::string type_name() const override { return "Tanh"; }
};

}  // namespace mixp::nn
