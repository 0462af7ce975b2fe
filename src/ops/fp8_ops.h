// The FP8 variants of linear and scaled_dot_product_attention, which their public functions
// call under an enabled amp::Fp8Autocast scope (mixp/amp/fp8.h). Private to mixp.
#pragma once

#include <optional>

#include "mixp/amp/fp8.h"
#include "mixp/tensor.h"

namespace mixp::ops::detail {

/// The scaling of activations and gradients under a recipe: block_128x128 tiles only weights,
/// the others 1x128; every other recipe scales all tensors alike.
amp::Fp8Scaling activation_scaling(amp::Fp8Scaling recipe);
/// [.., r, c] -> [.., c, r] for a 2-D or 3-D tensor, as f32 (not recorded by autograd).
Tensor transpose_last2(const Tensor& t);

/// linear with its products in FP8 (fp8_linear.cpp).
Tensor fp8_linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
                  std::optional<DType> out_dtype, amp::Fp8State& state);
/// causal or full attention with q k^T and P v (and the four products of backward) in FP8
/// (scaled_dot_product_attention.cpp).
Tensor fp8_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                     amp::Fp8State& state);

}  // namespace mixp::ops::detail
