// What autocast's and FP8 autocast's thread-local state tell the rest of autograd and the ops.
// Private to mixp.
#pragma once

#include "mixp/tensor.h"

namespace mixp::amp::detail {

/// An fp32 and a bf16 or f16 tensor (in either order) of one shape: the inputs that autocast's
/// promote rule hands an fp32_inside op (add, sub) as they are, and the op reads widened.
bool reads_mixed_inputs(const Tensor& a, const Tensor& b);

/// How many op bodies (CastInputs) are alive on this thread (autocast.cpp).
int autocast_suspended();

/// Turns FP8 off on this thread while it lives: the backward engine holds one, so that backward
/// computes what its nodes saved (fp8_autocast.cpp).
class Fp8Suspend {
 public:
  Fp8Suspend();
  ~Fp8Suspend();
  Fp8Suspend(const Fp8Suspend&) = delete;
  Fp8Suspend& operator=(const Fp8Suspend&) = delete;
};

}  // namespace mixp::amp::detail
