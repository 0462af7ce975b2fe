#include "mixp/optim/adam.h"

#include "mixp/autograd.h"
#include "mixp/error.h"
#include "optim/adam_update.h"
#include "optim/weight_slot.h"

namespace mixp::optim {

AdamFamily::AdamFamily(const char* name, std::vector<Tensor> parameters, double lr,
                       Precision precision, const PhiloxState& rounding, DType state_dtype)
    : MasterWeightOptimizer(std::move(parameters), lr, precision, rounding), name_(name) {
  parameter_steps_.assign(parameters_.size(), 0);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const Tensor& p = parameters_[i];
    const DType dtype = detail::adam_state_dtype(name, i, p, state_dtype);
    exp_avg_.push_back(detail::zeros_beside(p, p.shape(), dtype, MemoryTag::optimizer_state));
    exp_avg_sq_.push_back(detail::zeros_beside(p, p.shape(), dtype, MemoryTag::optimizer_state));
  }
}

void AdamFamily::update(const std::array<double, 2>& betas, double eps, double weight_decay,
                        WeightDecay decay) {
  NoGradGuard no_grad;
  const kernels::AdamDecay mode =
      decay == WeightDecay::l2_penalty ? kernels::AdamDecay::l2 : kernels::AdamDecay::decoupled;
  std::vector<kernels::AdamSlot> slots;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const Slot s = slot(i);
    if (!s.grad.defined()) continue;
    const int64_t t = ++parameter_steps_[i];
    const PhiloxState state_rng =
        exp_avg_[i].dtype() == DType::bf16 ? take_rounding_words(i) : PhiloxState{};
    slots.push_back({.weights = detail::weight_slot(s),
                     .exp_avg = exp_avg_[i],
                     .exp_avg_sq = exp_avg_sq_[i],
                     .state_rng = state_rng,
                     .hyper = {.step = t,
                               .lr = learning_rate(),
                               .betas = betas,
                               .eps = eps,
                               .weight_decay = weight_decay,
                               .decay = mode}});
    bump_version(i);
  }
  kernels::adam_update(slots);
  ++steps_;
}

void AdamFamily::set_parameter_steps(size_t i, int64_t steps) {
  MIXP_CHECK(i < parameter_steps_.size(), name_, ": parameter ", i, " of ",
             parameter_steps_.size());
  MIXP_CHECK(steps >= 0, name_, ": parameter steps must be >= 0, got ", steps);
  parameter_steps_[i] = steps;
}

void AdamFamily::save_state(StateDict& state) const {
  MasterWeightOptimizer::save_state(state);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const std::string index = std::to_string(i);
    state.tensors["exp_avg/" + index] = exp_avg_[i];
    state.tensors["exp_avg_sq/" + index] = exp_avg_sq_[i];
    state.set_int("parameter_steps/" + index, parameter_steps_[i]);
  }
}

void AdamFamily::check_state(const StateDict& state) const {
  MasterWeightOptimizer::check_state(state);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const std::string index = std::to_string(i);
    (void)state.tensor("exp_avg/" + index, exp_avg_[i]);
    (void)state.tensor("exp_avg_sq/" + index, exp_avg_sq_[i]);
    const int64_t steps = state.get_int("parameter_steps/" + index);
    MIXP_CHECK(steps >= 0, "saved parameter_steps/", index, " must be >= 0, got ", steps);
  }
}

void AdamFamily::apply_state(const StateDict& state) {
  MasterWeightOptimizer::apply_state(state);
  NoGradGuard no_grad;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const std::string index = std::to_string(i);
    exp_avg_[i].copy_(state.tensor("exp_avg/" + index));
    exp_avg_sq_[i].copy_(state.tensor("exp_avg_sq/" + index));
    parameter_steps_[i] = state.get_int("parameter_steps/" + index);
  }
}

namespace {
const AdamOptions& checked(const AdamOptions& o) {
  detail::check_adam_options("Adam", o.eps, o.betas, o.weight_decay);
  return o;
}
}  // namespace

Adam::Adam(std::vector<Tensor> parameters, const AdamOptions& options)
    : AdamFamily("Adam", std::move(parameters), options.lr, checked(options).precision,
                 options.rounding, options.state_dtype),
      options_(options) {}

void Adam::step() {
  update(options_.betas, options_.eps, options_.weight_decay, WeightDecay::l2_penalty);
}

}  // namespace mixp::optim
