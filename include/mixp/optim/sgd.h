// mixp/optim/sgd.h — stochastic gradient descent with momentum, as torch.optim.SGD.
//
// For each parameter w with gradient g, in fp32 (f64 for f64 parameters), with PyTorch's names:
//
//   d = g + weight_decay * w
//   if momentum != 0:
//     b = d on the first step of w, else momentum * b + (1 - dampening) * d
//     d = nesterov ? d + momentum * b : b
//   w = w - lr * d
//
// The momentum buffer b is fp32 (f64 for f64 parameters), tagged MemoryTag::optimizer_state,
// allocated at construction when momentum != 0. bf16 and f16 parameters are updated through
// an fp32 master copy unless options.precision says otherwise (mixp/optim/master_weights.h).
// set_learning_rate() changes lr for the following steps. momentum_state() and
// momentum_started() are what a checkpoint saves (see them below).
//
// Example:
//
//   mixp::optim::Sgd opt(params, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
//   loss.backward();
//   opt.step();
//   opt.zero_grad();
#pragma once

#include <vector>

#include "mixp/optim/master_weights.h"

namespace mixp::optim {

struct SgdOptions {
  double lr = 1e-3;  ///< PyTorch 2's default; must be finite and >= 0
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;  ///< L2 penalty added to the gradient
  bool nesterov = false;      ///< needs momentum > 0 and dampening == 0
  Precision precision = Precision::master_fp32;
  PhiloxState rounding{};  ///< for Precision::stochastic_rounding
};

class Sgd : public MasterWeightOptimizer {
 public:
  /// Throws mixp::Error naming the offending value for options PyTorch rejects.
  Sgd(std::vector<Tensor> parameters, const SgdOptions& options = {});

  void step() override;
  const char* kind() const override { return "sgd"; }
  const SgdOptions& options() const { return options_; }
  /// The momentum buffer of parameter i (undefined without momentum or before its first step).
  Tensor momentum_buffer(size_t i) const;
  /// For checkpoints: the buffer of parameter i whether or not a step has started it
  /// (undefined without momentum), sharing the optimizer's storage, so that copy_ into it
  /// restores a saved buffer; and whether it has started (PyTorch's momentum_buffer is not
  /// None: the first step sets b = d instead of momentum * b + (1 - dampening) * d). Together
  /// with steps(), master(i) and rounding_state() they make a resumed Sgd bitwise the one
  /// that was not interrupted.
  const Tensor& momentum_state(size_t i) const;
  bool momentum_started(size_t i) const;
  /// Throws mixp::Error for an index out of range or a start without momentum.
  void set_momentum_started(size_t i, bool started);

 protected:
  /// Adds "momentum/<i>" and "momentum_started/<i>" (0 or 1) with momentum.
  void save_state(StateDict& state) const override;
  void check_state(const StateDict& state) const override;
  void apply_state(const StateDict& state) override;

 private:
  SgdOptions options_;
  std::vector<Tensor> momentum_;
  std::vector<bool> started_;
};

}  // namespace mixp::optim
