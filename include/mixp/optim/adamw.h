// mixp/optim/adamw.h — Adam with decoupled weight decay (Loshchilov and Hutter, 2019), as
// torch.optim.AdamW.
//
// As Adam (mixp/optim/adam.h), except that the weight decay does not go through the gradient
// and the moments: each update first shrinks the weight,
//
//   w = w * (1 - lr * weight_decay)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g^2
//   w = w - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
//
// PyTorch's default weight_decay for AdamW is 0.01.
//
// Example:
//
//   mixp::optim::AdamW opt(params, {.lr = 6e-4, .betas = {0.9, 0.95}, .weight_decay = 0.1});
//   loss.backward();
//   opt.step();
//   opt.zero_grad();
#pragma once

#include <array>
#include <vector>

#include "mixp/optim/adam.h"
#include "mixp/optim/master_weights.h"

namespace mixp::optim {

struct AdamWOptions {
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};  ///< each in [0, 1)
  double eps = 1e-8;                           ///< >= 0
  double weight_decay = 1e-2;                  ///< >= 0, decoupled
  Precision precision = Precision::master_fp32;
  PhiloxState rounding{};          ///< for Precision::stochastic_rounding and bf16 moments
  DType state_dtype = DType::f32;  ///< the moments: f32, or bf16 (as Adam's: mixp/optim/adam.h)
};

class AdamW : public AdamFamily {
 public:
  /// Throws mixp::Error naming the offending value for options PyTorch rejects.
  AdamW(std::vector<Tensor> parameters, const AdamWOptions& options = {});

  void step() override;
  const char* kind() const override { return "adamw"; }
  const AdamWOptions& options() const { return options_; }

 private:
  AdamWOptions options_;
};

}  // namespace mixp::optim
