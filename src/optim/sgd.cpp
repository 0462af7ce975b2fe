#include "mixp/optim/sgd.h"

#include <cmath>

#include "mixp/autograd.h"
#include "mixp/error.h"
#include "optim/weight_slot.h"

namespace mixp::optim {

namespace {
const SgdOptions& checked(const SgdOptions& o) {
  MIXP_CHECK(std::isfinite(o.momentum) && o.momentum >= 0.0,
             "Sgd: momentum must be finite and >= 0, got ", o.momentum);
  MIXP_CHECK(std::isfinite(o.dampening), "Sgd: dampening must be finite, got ", o.dampening);
  MIXP_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0.0,
             "Sgd: weight_decay must be finite and >= 0, got ", o.weight_decay);
  MIXP_CHECK(!o.nesterov || (o.momentum > 0.0 && o.dampening == 0.0),
             "Sgd: nesterov needs momentum > 0 and dampening 0, got momentum ", o.momentum,
             " and dampening ", o.dampening);
  return o;
}

DType state_dtype(const Tensor& p) { return p.dtype() == DType::f64 ? DType::f64 : DType::f32; }
}  // namespace

Sgd::Sgd(std::vector<Tensor> parameters, const SgdOptions& options)
    : MasterWeightOptimizer(std::move(parameters), options.lr, checked(options).precision,
                            options.rounding),
      options_(options) {
  momentum_.resize(parameters_.size());
  started_.assign(parameters_.size(), false);
  if (options_.momentum == 0.0) return;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const Tensor& p = parameters_[i];
    momentum_[i] = detail::zeros_beside(p, p.shape(), state_dtype(p), MemoryTag::optimizer_state);
  }
}

Tensor Sgd::momentum_buffer(size_t i) const {
  MIXP_CHECK(i < parameters_.size(), "momentum_buffer: parameter ", i, " of ", parameters_.size());
  return started_[i] ? momentum_[i] : Tensor();
}

const Tensor& Sgd::momentum_state(size_t i) const {
  MIXP_CHECK(i < parameters_.size(), "momentum_state: parameter ", i, " of ", parameters_.size());
  return momentum_[i];
}

bool Sgd::momentum_started(size_t i) const {
  MIXP_CHECK(i < parameters_.size(), "momentum_started: parameter ", i, " of ", parameters_.size());
  return started_[i];
}

void Sgd::set_momentum_started(size_t i, bool started) {
  MIXP_CHECK(i < parameters_.size(), "set_momentum_started: parameter ", i, " of ",
             parameters_.size());
  MIXP_CHECK(!started || momentum_[i].defined(),
             "set_momentum_started: this Sgd has no momentum (momentum = 0)");
  started_[i] = started;
}

void Sgd::save_state(StateDict& state) const {
  MasterWeightOptimizer::save_state(state);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (!momentum_[i].defined()) continue;
    const std::string index = std::to_string(i);
    state.tensors["momentum/" + index] = momentum_[i];
    state.set_int("momentum_started/" + index, started_[i] ? 1 : 0);
  }
}

void Sgd::check_state(const StateDict& state) const {
  MasterWeightOptimizer::check_state(state);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (!momentum_[i].defined()) continue;
    const std::string index = std::to_string(i);
    (void)state.tensor("momentum/" + index, momentum_[i]);
    const int64_t started = state.get_int("momentum_started/" + index);
    MIXP_CHECK(started == 0 || started == 1, "saved momentum_started/", index,
               " must be 0 or 1, got ", started);
  }
}

void Sgd::apply_state(const StateDict& state) {
  MasterWeightOptimizer::apply_state(state);
  NoGradGuard no_grad;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (!momentum_[i].defined()) continue;
    const std::string index = std::to_string(i);
    momentum_[i].copy_(state.tensor("momentum/" + index));
    started_[i] = state.get_int("momentum_started/" + index) == 1;
  }
}

void Sgd::step() {
  NoGradGuard no_grad;
  const kernels::SgdHyper hyper{.lr = learning_rate(),
                                .momentum = options_.momentum,
                                .dampening = options_.dampening,
                                .weight_decay = options_.weight_decay,
                                .nesterov = options_.nesterov};
  std::vector<kernels::SgdSlot> slots;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const Slot s = slot(i);
    if (!s.grad.defined()) continue;
    slots.push_back({.weights = detail::weight_slot(s),
                     .momentum = momentum_[i],
                     .first = !started_[i],
                     .hyper = hyper});
    if (momentum_[i].defined()) started_[i] = true;
    bump_version(i);
  }
  kernels::sgd_update(slots);
  ++steps_;
}

}  // namespace mixp::optim
