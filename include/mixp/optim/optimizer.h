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

#include "mixp/state_dict.h"
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

  /// The optimizer's state for a checkpoint (mixp/state_dict.h): "kind", "steps", "lr", and
  /// what each optimizer adds (masters, moments, momentum buffers, per-parameter steps, the
  /// stochastic-rounding stream). load_state_dict() first checks the whole state against this
  /// optimizer (its kind, its parameters' count, shapes and dtypes), then applies it: a state
  /// that does not fit throws mixp::Error naming the key, and changes nothing.
  StateDict state_dict() const;
  void load_state_dict(const StateDict& state);
  /// "sgd", "adam" or "adamw" for mixp's optimizers.
  virtual const char* kind() const { return "optimizer"; }

 protected:
  /// Adds this optimizer's entries to `state`; overrides call their base first.
  virtual void save_state(StateDict& state) const;
  /// Throws mixp::Error unless `state` fits this optimizer; overrides call their base first.
  virtual void check_state(const StateDict& state) const;
  /// Applies a state that check_state() accepted; overrides call their base first.
  virtual void apply_state(const StateDict& state);

  std::vector<Tensor> parameters_;
  double learning_rate_ = 0.0;
  int64_t steps_ = 0;
};

}  // namespace mixp::optim
