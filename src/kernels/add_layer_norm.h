// A residual add and the layer norm that reads its sum, in one pass over the rows, forward and
// backward. Private to mixp.
#pragma once

#include "kernels/registry.h"

namespace mixp::kernels {

/// sum = a + b, then layer_norm(sum) into y, mean and rstd (kernels/layer_norm.h), with the same
/// bits as add_forward then layer_norm. a and b have one shape: both of sum's dtype, or (as
/// add reads them under autocast) one fp32 and the other bf16 or f16, read widened, with an
/// fp32 sum. The fast candidate computes each row's sum and normalizes it while it is in L1;
/// the fallback runs the two kernels in turn.
using AddLayerNormFn = void(const Tensor& a, const Tensor& b, const Tensor& weight,
                            const Tensor& bias, double eps, Tensor& sum, Tensor& y, Tensor& mean,
                            Tensor& rstd);
extern Kernel<AddLayerNormFn> add_layer_norm;

/// The gradient of the sum, from both of its uses: ds = g_sum + the layer norm's input gradient
/// from g_y (layer_norm_backward), with dweight and dbias as layer_norm_backward gives them
/// (where defined), and ds_narrow (where defined: bf16 or f16) ds rounded once to its dtype, for
/// a narrow input of the add. The same bits as layer_norm_backward, then the two gradients'
/// sum, then the rounding. The fast candidate does it per row in one pass.
using AddLayerNormBackwardFn = void(const Tensor& sum, const Tensor& g_y, const Tensor& g_sum,
                                    const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                                    Tensor& ds, Tensor& ds_narrow, Tensor& dweight, Tensor& dbias);
extern Kernel<AddLayerNormBackwardFn> add_layer_norm_backward;

}  // namespace mixp::kernels
