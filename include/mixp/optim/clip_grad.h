// mixp/optim/clip_grad.h — clipping gradients by their total L2 norm, as
// torch.nn.utils.clip_grad_norm_.
//
// The norm is that of all gradients taken together, sqrt(sum over parameters of sum g^2),
// accumulated in fp32 (in f64 when some gradient is f64); parameters without a gradient are
// skipped. When the factor max_norm / (norm + 1e-6) is below 1, every gradient is multiplied in
// place by it (in fp32, f64 for f64 gradients, rounded once to the gradient's dtype). When the norm
// is not finite (a gradient holds an inf or a NaN, or the squares overflow fp32), the norm is
// returned and the gradients are left unchanged: GradScaler skips such steps, and scaling by NaN
// would only spread the NaN.
//
// Example:
//
//   loss.backward();
//   double norm = mixp::optim::clip_grad_norm(model_parameters, /*max_norm=*/1.0);
//   if (std::isfinite(norm)) opt.step();
#pragma once

#include <vector>

#include "mixp/tensor.h"

namespace mixp::optim {

/// Returns the total norm before clipping. max_norm must be >= 0 (inf: never clip).
double clip_grad_norm(const std::vector<Tensor>& parameters, double max_norm);

}  // namespace mixp::optim
