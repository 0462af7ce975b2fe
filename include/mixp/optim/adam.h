// mixp/optim/adam.h — Adam (Kingma and Ba, 2015), as torch.optim.Adam.
//
// For each parameter w with gradient g, on its t-th update (t counts from 1, per parameter),
// in fp32 (f64 for f64 parameters), with PyTorch's names:
//
//   g = g + weight_decay * w                        (L2 penalty: coupled to the moments)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g^2
//   w = w - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
//
// The bias corrections are computed in double once per parameter and step, as PyTorch does.
// The moments m and v are fp32 (f64 for f64 parameters), tagged MemoryTag::optimizer_state,
// or bf16 with state_dtype = bf16: 2 bytes each instead of 4. bf16 moments are widened, updated
// and used in fp32 as above, then rounded back stochastically (an unbiased rounding: with
// beta2 = 0.999 a decay of v by 0.1% is under half a bf16 step, so rounding to nearest would
// freeze v once g^2 falls below it), drawing one Philox word per element from `rounding`:
// its low 16 bits round m and its high 16 bits v. The words follow those of the parameter's
// own stochastic rounding in the same stream, so rounding_state() resumes them too.
// For decoupled weight decay use AdamW (mixp/optim/adamw.h). bf16 and f16 parameters are
// updated through an fp32 master copy unless options.precision says otherwise
// (mixp/optim/master_weights.h). AMSGrad is not offered.
//
// Example:
//
//   mixp::optim::Adam opt(params, {.lr = 3e-4, .betas = {0.9, 0.95}});
//   mixp::optim::Adam small(params, {.lr = 3e-4, .rounding = {/*seed=*/1, /*stream=*/0},
//                                    .state_dtype = mixp::DType::bf16});
//   loss.backward();
//   opt.step();
//   opt.zero_grad();
#pragma once

#include <array>
#include <vector>

#include "mixp/optim/master_weights.h"

namespace mixp::optim {

struct AdamOptions {
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};  ///< each in [0, 1)
  double eps = 1e-8;                           ///< >= 0
  double weight_decay = 0.0;                   ///< >= 0
  Precision precision = Precision::master_fp32;
  PhiloxState rounding{};          ///< for Precision::stochastic_rounding and bf16 moments
  DType state_dtype = DType::f32;  ///< the moments: f32, or bf16 (stochastic rounding)
};

/// The state Adam and AdamW share: the moments and per-parameter step counts, and the update.
class AdamFamily : public MasterWeightOptimizer {
 public:
  /// First and second moments of parameter i.
  const Tensor& exp_avg(size_t i) const { return exp_avg_.at(i); }
  const Tensor& exp_avg_sq(size_t i) const { return exp_avg_sq_.at(i); }
  /// Updates parameter i has had (PyTorch's per-parameter "step").
  int64_t parameter_steps(size_t i) const { return parameter_steps_.at(i); }
  /// Restores parameter_steps(i) from a checkpoint (>= 0; throws mixp::Error otherwise). The
  /// moments are restored by copy_ into exp_avg(i) and exp_avg_sq(i).
  void set_parameter_steps(size_t i, int64_t steps);

 protected:
  enum class WeightDecay : uint8_t { l2_penalty, decoupled };
  /// Throws mixp::Error for a state_dtype other than f32 and bf16, and for bf16 moments of an
  /// f64 parameter.
  AdamFamily(const char* name, std::vector<Tensor> parameters, double lr, Precision precision,
             const PhiloxState& rounding, DType state_dtype);
  /// One update of every parameter that has a gradient.
  void update(const std::array<double, 2>& betas, double eps, double weight_decay,
              WeightDecay decay);
  /// Adds "exp_avg/<i>", "exp_avg_sq/<i>" (in the moments' dtype) and "parameter_steps/<i>".
  void save_state(StateDict& state) const override;
  void check_state(const StateDict& state) const override;
  void apply_state(const StateDict& state) override;

 private:
  const char* name_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
  std::vector<int64_t> parameter_steps_;
};

class Adam : public AdamFamily {
 public:
  /// Throws mixp::Error naming the offending value for options PyTorch rejects.
  Adam(std::vector<Tensor> parameters, const AdamOptions& options = {});

  void step() override;
  const char* kind() const override { return "adam"; }
  const AdamOptions& options() const { return options_; }

 private:
  AdamOptions options_;
};

}  // namespace mixp::optim
