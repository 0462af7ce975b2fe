// mixp/optim/optimizer.h — what every optimizer offers, and what GradScaler relies on.
//
// An optimizer holds the parameters it updates. step() applies one update from each
// parameter's .grad() (parameters without a gradient are left alone); zero_grad() drops the
// gradients. Optimizers that keep FP32 master weights for bf16 or f16 parameters make those
// parameters accumulate their gradients in fp32 (Tensor::set_grad_dtype), so that what
// GradScaler unscales and checks is always the gradient the update uses.
//
// Example:
//
//   mixp::optim::Sgd opt(model_parameters, {.lr = 0.1});
//   loss.backward();
//   opt.step();
//   opt.zero_grad();
#pragma once

#include <vector>

#include "mixp/tensor.h"

namespace mixp::optim {

class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> parameters);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update from the current gradients. Not recorded by autograd.
  virtual void step() = 0;
  /// Drops every parameter's gradient.
  void zero_grad();

  const std::vector<Tensor>& parameters() const { return parameters_; }
  double learning_rate() const { return learning_rate_; }
  void set_learning_rate(double lr);
  /// Updates applied so far.
  int64_t steps() const { return steps_; }
  /// Restores steps() from a checkpoint (>= 0; throws mixp::Error otherwise). The tensors of
  /// an optimizer's state (moments, compensation) are restored by copy_ into the handles its
  /// accessors return, which share the optimizer's storage; masters by set_master
  /// (mixp/optim/master_weights.h).
  void set_steps(int64_t steps);

 protected:
  std::vector<Tensor> parameters_;
  double learning_rate_ = 0.0;
  int64_t steps_ = 0;
};

}  // namespace mixp::optim
