// mixp/nn/pooling.h — MaxPool2d (as torch.nn.MaxPool2d, square windows) and Flatten (as
// torch.nn.Flatten: dimensions start_dim..end_dim joined into one). No parameters.
//
// Example:
//
//   seq.push_back(std::make_shared<mixp::nn::MaxPool2d>(mixp::nn::MaxPool2dOptions(2)));
//   seq.push_back(std::make_shared<mixp::nn::Flatten>());   // [N, C, H, W] -> [N, C*H*W]
#pragma once

#include "mixp/nn/module.h"

namespace mixp::nn {

struct MaxPool2dOptions {
  explicit MaxPool2dOptions(int64_t kernel_size) : kernel_size(kernel_size) {}
  int64_t kernel_size;
  int64_t stride = 0;   ///< 0, the default: the kernel size (PyTorch's stride=None)
  int64_t padding = 0;  ///< at most half the kernel
};

class MaxPool2d : public UnaryModule {
 public:
  explicit MaxPool2d(const MaxPool2dOptions& options) : options_(options) {}
  Tensor forward(const Tensor& x) override;
  const MaxPool2dOptions& options() const { return options_; }

 protected:
  std::string type_name() const override { return "MaxPool2d"; }
  std::string extra_repr() const override;

 private:
  MaxPool2dOptions options_;
};

struct FlattenOptions {
  int start_dim = 1;
  int end_dim = -1;
};

class Flatten : public UnaryModule {
 public:
  explicit Flatten(const FlattenOptions& options = {}) : options_(options) {}
  Tensor forward(const Tensor& x) override;

 protected:
  std::string type_name() const override { return "Flatten"; }
  std::string extra_repr() const override;

 private:
  FlattenOptions options_;
};

}  // namespace mixp::nn
