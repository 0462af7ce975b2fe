// kernels::parallel_for: core's parallel_for (core/parallel.h), under the name the kernels, the
// ops and the optimizers use.
#pragma once

#include "core/parallel.h"

namespace mixp::kernels {
using mixp::parallel_for;
}  // namespace mixp::kernels
