// softmax and log_softmax along the middle dimension of [outer, n, inner]. Private to mixp.
#pragma once

#include "kernels/lines.h"
#include "kernels/registry.h"

namespace mixp::kernels {

/// y = softmax(x) (log_softmax when `log`) along n, the maximum subtracted first, accumulated in
/// fp32 (f64 for f64) and rounded once to the dtype of x and y.
using SoftmaxFn = void(const Tensor& x, Tensor& y, Lines lines, bool log);
extern Kernel<SoftmaxFn> softmax_lines;

/// dx = y (g - sum(g y)), or for log_softmax dx = g - exp(y) sum(g), along n.
using SoftmaxBackwardFn = void(const Tensor& g, const Tensor& y, Tensor& dx, Lines lines,
                               bool log);
extern Kernel<SoftmaxBackwardFn> softmax_backward_lines;

}  // namespace mixp::kernels
