// An optimizer's Slot as the update kernels take it (kernels/weight_update.h), and its state
// allocated where its parameter lives. Private to mixp.
#pragma once

#include "kernels/weight_update.h"
#include "mixp/optim/master_weights.h"

namespace mixp::optim::detail {

inline kernels::WeightSlot weight_slot(const MasterWeightOptimizer::Slot& s) {
  return {.param = s.param,
          .grad = s.grad,
          .master = s.master,
          .master_low = s.master_low,
          .compensation = s.compensation,
          .stochastic = s.stochastic,
          .rng = s.rng};
}

/// Zeros on the device of `parameter`: the optimizer's state of it.
inline Tensor zeros_beside(const Tensor& parameter, const Shape& shape, DType dtype, MemoryTag tag) {
  Tensor t = empty(shape, dtype, tag, parameter.device());
  t.fill_(0.0);
  return t;
}

}  // namespace mixp::optim::detail
