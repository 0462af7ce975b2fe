// The sum of a tensor along the middle dimension of [outer, n, inner]. Private to mixp.
#pragma once

#include "kernels/lines.h"
#include "kernels/registry.h"

namespace mixp::kernels {

/// out[o, i] = scale * sum over k of x[o, k, i], accumulated in fp32 (f64 for f64 x; double in
/// the fallback) and rounded once to the dtype of x and out. A row (inner = 1) is summed in
/// blocks of 256 whose partial sums are then added in order (a few rows longer than 65536, in
/// chunks of 16384 summed so, whose sums are then added in order); a column (inner > 1) is
/// summed over k in order. out holds outer * inner elements.
using SumLinesFn = void(const Tensor& x, Lines lines, double scale, Tensor& out);
extern Kernel<SumLinesFn> sum_lines;

}  // namespace mixp::kernels
