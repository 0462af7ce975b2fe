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

#include <cstdint>
#include <vector>

#include "mixp/tensor.h"

namespace mixp::optim {

/// Returns the total norm before clipping. max_norm must be >= 0 (inf: never clip).
double clip_grad_norm(const std::vector<Tensor>& parameters, double max_norm);

// clip_grad_norm in its three parts, for gradients held in pieces by several processes (ZeRO):
// a piece that starts at a multiple of kGradNormChunk of its gradient has the same chunks, so
// the pieces' chunk squares put together in order give clip_grad_norm's norm, bit for bit.
//
//   std::vector<std::vector<double>> squares;                    // one entry per gradient
//   for (const Tensor& g : grads) squares.push_back(chunk_squares(g, /*f64=*/false));
//   double norm = norm_from_chunk_squares(squares, false);
//   scale_to_norm(grads, norm, 1.0);

/// The elements of one chunk of the sum of squares.
inline constexpr int64_t kGradNormChunk = 16 * 1024;
/// The sum of the squares of each chunk of kGradNormChunk elements of `gradient`, in chunk
/// order, accumulated in fp32 (f64 with `f64`, as when some gradient is f64), widened to double.
std::vector<double> chunk_squares(const Tensor& gradient, bool f64);
/// The total norm from each gradient's chunk squares: per gradient the chunks added in order,
/// then the gradients in order, in fp32 (f64 with `f64`), and the square root.
double norm_from_chunk_squares(const std::vector<std::vector<double>>& per_gradient, bool f64);
/// Multiplies every gradient in place by max_norm / (norm + 1e-6) when that is below 1 (in
/// fp32, f64 for f64 gradients, rounded once); nothing when `norm` is not finite.
void scale_to_norm(const std::vector<Tensor>& gradients, double norm, double max_norm);

}  // namespace mixp::optim
