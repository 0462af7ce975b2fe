#include "mixp/optim/adam.h"

#include "mixp/autograd.h"
#include "mixp/error.h"
#include "optim/adam_update.h"

namespace mixp::optim {

namespace {
const AdamOptions& checked(const AdamOptions& o) {
  detail::check_adam_options("Adam", o.eps, o.betas, o.weight_decay);
  return o;
}
}  // namespace

Adam::Adam(std::vector<Tensor> parameters, const AdamOptions& options)
    : MasterWeightOptimizer(std::move(parameters), options.lr, checked(options).precision,
                            options.rounding),
      options_(options) {
  parameter_steps_.assign(parameters_.size(), 0);
  for (const Tensor& p : parameters_) {
    exp_avg_.push_back(zeros(p.shape(), detail::adam_state_dtype(p), MemoryTag::optimizer_state));
    exp_avg_sq_.push_back(
        zeros(p.shape(), detail::adam_state_dtype(p), MemoryTag::optimizer_state));
  }
}

void Adam::step() {
  NoGradGuard no_grad;
  const AdamOptions& o = options_;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const Slot s = slot(i);
    if (!s.grad.defined()) continue;
    const int64_t t = ++parameter_steps_[i];
    if (s.param.dtype() == DType::f64) {
      detail::adam_update<double>(s, exp_avg_[i], exp_avg_sq_[i], t, learning_rate(), o.betas,
                                  o.eps, o.weight_decay, detail::Decay::l2);
    } else {
      detail::adam_update<float>(s, exp_avg_[i], exp_avg_sq_[i], t, learning_rate(), o.betas, o.eps,
                                 o.weight_decay, detail::Decay::l2);
    }
    bump_version(i);
  }
  ++steps_;
}

void Adam::set_parameter_steps(size_t i, int64_t steps) {
  MIXP_CHECK(i < parameter_steps_.size(), "Adam: parameter ", i, " of ", parameter_steps_.size());
  MIXP_CHECK(steps >= 0, "Adam: parameter steps must be >= 0, got ", steps);
  parameter_steps_[i] = steps;
}

}  // namespace mixp::optim
