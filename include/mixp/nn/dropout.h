// mixp/nn/dropout.h — inverted dropout, as torch.nn.Dropout.
//
// In training mode each element is zeroed with probability p and the others are scaled by
// 1 / (1 - p) (ops::dropout); in evaluation mode, or with p == 0, forward returns its input.
// The masks come from a Philox generator that the module shares with its owner (a model owns
// one per seed, Model::generator()) and that advances by the number of elements of each mask,
// so a run is deterministic and a checkpoint can resume it.
//
// Example:
//
//   auto rng = std::make_shared<mixp::Philox>(mixp::PhiloxState{/*seed=*/0, /*stream=*/1});
//   mixp::nn::Dropout drop(mixp::nn::DropoutOptions(0.1), rng);
//   mixp::Tensor y = drop.forward(x);
#pragma once

#include <memory>

#include "mixp/nn/module.h"

namespace mixp::nn {

struct DropoutOptions {
  explicit DropoutOptions(double p = 0.5) : p(p) {}
  double p = 0.5;  ///< in [0, 1)
};

class Dropout : public UnaryModule {
 public:
  /// The generator is required (mixp::Error when null): two modules that each made their own
  /// from a fixed seed would draw the same masks.
  Dropout(const DropoutOptions& options, std::shared_ptr<Philox> generator);

  Tensor forward(const Tensor& x) override;

  const DropoutOptions& options() const { return options_; }
  Philox& generator() { return *generator_; }

 protected:
  std::string type_name() const override { return "Dropout"; }
  std::string extra_repr() const override;

 private:
  DropoutOptions options_;
  std::shared_ptr<Philox> generator_;
};

}  // namespace mixp::nn
