// Broadcasting a tensor to a larger shape, materialized. Private to mixp.
#pragma once

#include "kernels/registry.h"

namespace mixp::kernels {

/// out = t broadcast (NumPy rules) to out's shape, each element a copy of its bytes (exact, any
/// dtype; out has t's).
using ExpandFn = void(const Tensor& t, Tensor& out);
extern Kernel<ExpandFn> expand;

}  // namespace mixp::kernels
