#include "mixp/optim/optimizer.h"

#include <cmath>

#include "mixp/error.h"

namespace mixp::optim {

Optimizer::Optimizer(std::vector<Tensor> parameters) : parameters_(std::move(parameters)) {
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const Tensor& p = parameters_[i];
    MIXP_CHECK(p.defined(), "optimizer: parameter ", i, " is undefined");
    MIXP_CHECK(p.is_leaf() && p.requires_grad(), "optimizer: parameter ", i, " (shape ",
               p.shape().to_string(), ") is not a leaf that requires grad");
  }
}

void Optimizer::zero_grad() {
  for (Tensor& p : parameters_) p.set_grad(Tensor());
}

void Optimizer::set_learning_rate(double lr) {
  MIXP_CHECK(std::isfinite(lr) && lr >= 0.0,
             "optimizer: the learning rate must be finite and "
             "non-negative, got ",
             lr);
  learning_rate_ = lr;
}

void Optimizer::set_steps(int64_t steps) {
  MIXP_CHECK(steps >= 0, "optimizer: steps must be >= 0, got ", steps);
  steps_ = steps;
}

StateDict Optimizer::state_dict() const {
  StateDict state;
  save_state(state);
  return state;
}

void Optimizer::load_state_dict(const StateDict& state) {
  check_state(state);
  apply_state(state);
}

void Optimizer::save_state(StateDict& state) const {
  state.set_text("kind", kind());
  state.set_int("steps", steps_);
  state.set_real("lr", learning_rate_);
}

void Optimizer::check_state(const StateDict& state) const {
  MIXP_CHECK(state.get_text("kind") == kind(), "the saved optimizer is ", state.get_text("kind"),
             ", this run's is ", kind());
  const int64_t steps = state.get_int("steps");
  MIXP_CHECK(steps >= 0, "saved optimizer steps must be >= 0, got ", steps);
  const double lr = state.get_real("lr");
  MIXP_CHECK(std::isfinite(lr) && lr >= 0.0, "saved learning rate ", lr, " is not valid");
}

void Optimizer::apply_state(const StateDict& state) {
  steps_ = state.get_int("steps");
  learning_rate_ = state.get_real("lr");
}

}  // namespace mixp::optim
