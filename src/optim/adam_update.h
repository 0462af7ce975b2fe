// What Adam (L2 penalty in the gradient) and AdamW (decoupled decay) check of their options and
// state; their update is kernels/weight_update.h's adam_update. Private to mixp.
#pragma once

#include <array>
#include <cmath>

#include "mixp/error.h"
#include "mixp/tensor.h"

namespace mixp::optim::detail {

inline void check_adam_options(const char* name, double eps, std::array<double, 2> betas,
                               double weight_decay) {
  MIXP_CHECK(std::isfinite(eps) && eps >= 0.0, name, ": eps must be finite and >= 0, got ", eps);
  MIXP_CHECK(betas[0] >= 0.0 && betas[0] < 1.0, name, ": betas[0] must be in [0, 1), got ",
             betas[0]);
  MIXP_CHECK(betas[1] >= 0.0 && betas[1] < 1.0, name, ": betas[1] must be in [0, 1), got ",
             betas[1]);
  MIXP_CHECK(std::isfinite(weight_decay) && weight_decay >= 0.0, name,
             ": weight_decay must be finite and >= 0, got ", weight_decay);
}

/// The moments' dtype: f64 for f64 parameters, else the options' (f32 or bf16).
inline DType adam_state_dtype(const char* name, size_t i, const Tensor& p, DType requested) {
  MIXP_CHECK(requested == DType::f32 || requested == DType::bf16, name,
             ": state_dtype must be f32 or bf16, got ", name_of(requested));
  if (p.dtype() != DType::f64) return requested;
  MIXP_CHECK(requested == DType::f32, name, ": parameter ", i,
             " is f64, whose moments are f64; bf16 moments are for f32, bf16 and f16 parameters");
  return DType::f64;
}

}  // namespace mixp::optim::detail
