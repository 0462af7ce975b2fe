// Reductions over a set of dimensions. Private to mixp.
#pragma once

#include <vector>

#include "kernels/lines.h"
#include "mixp/tensor.h"

namespace mixp::ops::detail {

/// Normalized, sorted, unique dims of `x` (all of them when `dims` is empty).
std::vector<int> reduction_dims(const char* op, const Tensor& x, const std::vector<int>& dims);
/// The shape of the result: reduced dims removed, or kept as 1 with keepdim.
Shape reduced_shape(const Shape& shape, const std::vector<int>& dims, bool keepdim);
/// scale * sum of x over dims (normalized), accumulated in fp32 (f64 for f64) and rounded once
/// to x's dtype, with the kept-dims shape [.., 1, ..]. Not recorded by autograd.
Tensor sum_kernel(const Tensor& x, const std::vector<int>& dims, double scale);

/// [outer, n, inner] sizes of `shape` around dimension `dim`.
using Around = kernels::Lines;
Around around(const Shape& shape, int dim);

}  // namespace mixp::ops::detail
