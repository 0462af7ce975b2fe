// Autograd internals shared by tensor/ and ops/. Private to mixp.
#pragma once

#include "mixp/autograd.h"

namespace mixp::autograd {

/// Records `view` (a reshape of `base`) for backward.
void record_view(const Tensor& base, Tensor& view);
/// Records `rows` = base rows [begin, begin + rows.size(0)) for backward.
void record_slice(const Tensor& base, Tensor& rows, int64_t begin);
/// Records `out` = `in` converted to another dtype; the gradient converts back.
void record_cast(const Tensor& in, Tensor& out);

/// a + b for two gradients of the same shape and dtype (no graph is recorded).
Tensor add_gradients(const Tensor& a, const Tensor& b);

}  // namespace mixp::autograd
