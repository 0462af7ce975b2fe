// Autograd internals shared with ops/. (Tensor's views, slices and casts reach the engine
// through tensor/autograd_hooks.h.) Private to mixp.
#pragma once

#include "mixp/autograd.h"

namespace mixp::autograd {

/// a + b for two gradients of the same shape and dtype (no graph is recorded).
Tensor add_gradients(const Tensor& a, const Tensor& b);

}  // namespace mixp::autograd
