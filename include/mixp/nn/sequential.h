// mixp/nn/sequential.h — modules applied one after the other, as torch.nn.Sequential.
//
// The children are named "0", "1", ... in the order they were added, so their parameters are
// "0.weight", "1.bias", ... as in PyTorch, counting the layers without parameters too.
//
// Example:
//
//   mixp::nn::Sequential mlp;
//   mlp.push_back(std::make_shared<mixp::nn::Linear>(mixp::nn::LinearOptions(784, 128), rng));
//   mlp.push_back(std::make_shared<mixp::nn::ReLU>());
//   mlp.push_back(std::make_shared<mixp::nn::Linear>(mixp::nn::LinearOptions(128, 10), rng));
//   mixp::Tensor logits = mlp.forward(x);           // names 0.weight, 0.bias, 2.weight, 2.bias
#pragma once

#include <memory>
#include <vector>

#include "mixp/nn/module.h"

namespace mixp::nn {

class Sequential : public UnaryModule {
 public:
  Sequential() = default;

  /// Appends `module` under the name of its position.
  void push_back(std::shared_ptr<UnaryModule> module);
  Tensor forward(const Tensor& x) override;

  size_t size() const { return layers_.size(); }
  UnaryModule& operator[](size_t i) { return *layers_.at(i); }

 protected:
  std::string type_name() const override { return "Sequential"; }

 private:
  std::vector<std::shared_ptr<UnaryModule>> layers_;
};

}  // namespace mixp::nn
