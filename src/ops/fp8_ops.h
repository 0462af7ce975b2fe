// The FP8 variants of linear and scaled_dot_product_attention, which their public functions
// call under an enabled amp::Fp8Autocast scope (mixp/amp/fp8.h). Private to mixp.
#pragma once

#include <functional>
#include <optional>
#include <span>

#include "mixp/amp/autocast.h"
#include "mixp/op_kind.h"

#include "mixp/amp/fp8.h"
#include "mixp/tensor.h"

namespace mixp::ops::detail {

/// The scaling of activations and gradients under a recipe: block_128x128 tiles only weights,
/// the others 1x128; every other recipe scales all tensors alike.
amp::Fp8Scaling activation_scaling(amp::Fp8Scaling recipe);
/// [.., r, c] -> [.., c, r] for a 2-D or 3-D tensor, as f32 (not recorded by autograd).
Tensor transpose_last2(const Tensor& t);

/// What an FP8 op holds while it runs: its call counted in Autocast's table, Autocast suspended
/// for its insides, and the dtype the enclosing Autocast gives its output (nothing when none is
/// on). The inputs are not cast: FP8 quantizes what it is given (the fp32 master weight, not a
/// bf16 copy of it).
struct Fp8OpEntry {
  amp::CastInputs suspended;
  std::optional<DType> autocast_output;
};
Fp8OpEntry enter_fp8_op(OpKind op, std::span<const Tensor* const> inputs);

/// The shape and dtype contract of the quantized linears (fp8_linear.cpp): x and weight f32 or
/// bf16, weight [out, in], x [..., in], bias [out] or undefined; mixp::Error naming `op`.
void check_quantized_linear(const char* op, const Tensor& x, const Tensor& weight,
                            const Tensor& bias);
/// y + bias (f32 y, the bias added in fp32), rounded once to `out` (fp8_linear.cpp).
Tensor add_bias_and_round(Tensor y, const Tensor& bias, DType out);

/// linear with its products in FP8 (fp8_linear.cpp).
Tensor fp8_linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
                  std::optional<DType> out_dtype, amp::Fp8State& state);
/// linear with its products in FP4 by state's recipe().fp4, for FP4 layer `layer` of the state
/// (fp4_linear.cpp).
Tensor fp4_linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
                  std::optional<DType> out_dtype, amp::Fp8State& state, size_t layer);
/// linear under an FP4 recipe: each layer in its format, FLOPs counted, adaptive precision's
/// measurements taken (fp4_recipe_linear.cpp).
Tensor fp4_recipe_linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
                         std::optional<DType> out_dtype, amp::Fp8State& state);
/// The identity, whose backward calls on_gradient with the incoming gradient (gradient_probe.cpp).
Tensor gradient_probe(const Tensor& y, std::function<void(const Tensor&)> on_gradient);
/// causal or full attention with q k^T and P v (and the four products of backward) in FP8
/// (scaled_dot_product_attention.cpp).
Tensor fp8_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                     amp::Fp8State& state);

}  // namespace mixp::ops::detail
