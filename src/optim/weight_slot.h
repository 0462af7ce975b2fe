// An optimizer's Slot as the update kernels take it (kernels/weight_update.h). Private to mixp.
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

}  // namespace mixp::optim::detail
