// The mean squared error and its gradient. Private to mixp.
#pragma once

#include "kernels/registry.h"

namespace mixp::kernels {

/// mean((prediction - target)^2) over all n >= 1 elements: each difference, square and running
/// sum in fp32 (f64 for f64 inputs; double in the fallback), added in element order, divided by
/// n in double. prediction and target have one dtype and n elements each.
using MseLossFn = double(const Tensor& prediction, const Tensor& target);
extern Kernel<MseLossFn> mse_loss;

/// dprediction = scale * (prediction - target), elementwise in fp32 (f64 for f64; double in the
/// fallback), rounded once to the inputs' dtype, which dprediction has too.
using MseLossBackwardFn = void(const Tensor& prediction, const Tensor& target, double scale,
                               Tensor& dprediction);
extern Kernel<MseLossBackwardFn> mse_loss_backward;

}  // namespace mixp::kernels
