// Layer norm over the last dimension, forward and backward. Private to mixp.
#pragma once

#include "kernels/registry.h"

namespace mixp::kernels {

/// For each row of n = x's last dimension: mean, the biased variance, rstd = 1 / sqrt(var + eps)
/// and y = (x - mean) rstd, times weight where it is defined, plus bias where it is defined.
/// Computed in fp32 (f64 for f64 x; double in the fallback): the fp32 rows by
/// kernels/layer_norm_rows.h, in its order of operations; y is rounded once to its dtype (x's,
/// or bf16 or f16 for an f32 x). weight and bias are [n] of any floating dtype, read in the
/// compute type; mean and rstd are the rows' statistics in fp32 (f64 for f64 x).
using LayerNormFn = void(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                         Tensor& y, Tensor& mean, Tensor& rstd);
extern Kernel<LayerNormFn> layer_norm;

/// The gradients of layer_norm from x, its saved mean and rstd, and g, the result's gradient in
/// the result's dtype. With xhat = (x - mean) rstd and gw = g weight (g where weight is
/// undefined), per row: dx = rstd (gw - mean(gw) - xhat mean(gw xhat)), rounded once to x's
/// dtype; over the rows: dweight = sum of g xhat and dbias = sum of g, each rounded once to its
/// tensor's dtype. All in fp32 (f64 for f64 x; double in the fallback); the fast candidate adds
/// the rows in fixed chunks and the chunks in order, so its sums do not depend on the thread
/// count. dx, dweight and dbias are written where defined (dweight and dbias [n]).
using LayerNormBackwardFn = void(const Tensor& x, const Tensor& g, const Tensor& weight,
                                 const Tensor& mean, const Tensor& rstd, Tensor& dx,
                                 Tensor& dweight, Tensor& dbias);
extern Kernel<LayerNormBackwardFn> layer_norm_backward;

/// The rows per chunk of the fast backward: each chunk sums its own dweight and dbias partials,
/// added in chunk order. Shared with add_layer_norm_backward, whose sums must be the same bits.
int64_t layer_norm_backward_grain(int64_t rows, int64_t n);

}  // namespace mixp::kernels
