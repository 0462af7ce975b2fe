// mixp/nn/layer_norm.h — normalization over the last dimension, as torch.nn.LayerNorm with a
// one-dimensional normalized_shape.
//
// Parameters: weight [C] (ones), bias [C] (zeros), if options.elementwise_affine (bias only if
// options.bias). Statistics in fp32; a norm layer, so the bf16 and fp16 presets keep its
// parameters in fp32.
//
// Example:
//
//   mixp::nn::LayerNorm ln(mixp::nn::LayerNormOptions(384));
//   mixp::Tensor y = ln.forward(x);                 // x [..., 384]
#pragma once

#include "mixp/nn/module.h"
#include "mixp/ops.h"

namespace mixp::nn {

struct LayerNormOptions {
  explicit LayerNormOptions(int64_t normalized_shape) : normalized_shape(normalized_shape) {}
  int64_t normalized_shape;  ///< C, the size of the last dimension
  double eps = 1e-5;
  bool elementwise_affine = true;  ///< with weight (and bias)
  bool bias = true;                ///< with a bias, when elementwise_affine
};

class LayerNorm : public UnaryModule {
 public:
  explicit LayerNorm(const LayerNormOptions& options);

  /// x [..., C] -> the same shape and dtype.
  Tensor forward(const Tensor& x) override;
  /// forward for a layer whose result only a linear layer reads (a transformer's ln_1, ln_2,
  /// ln_f): under autocast, and with no FP8 recipe active, an f32 x gives the autocast dtype
  /// directly. The linear would cast the fp32 result to that dtype anyway: the same values,
  /// without the fp32 copy in forward or its widened gradient in backward. Otherwise forward(x).
  Tensor forward_for_linear(const Tensor& x);
  /// A residual add and this layer norm of its sum, for a linear layer to read: {a + b,
  /// forward_for_linear(a + b)}, the same values and gradients, bit for bit, as ops::add then
  /// forward_for_linear, by ops::add_layer_norm (one pass over the rows each way). The hooks
  /// see the normalized result, as forward's do.
  ///   auto [h, hn] = ln_2.add_forward_for_linear(x, attn.forward(xn));
  ops::SumAndNorm add_forward_for_linear(const Tensor& a, const Tensor& b);
  void reset();

  const LayerNormOptions& options() const { return options_; }
  Tensor& weight() { return *weight_; }
  Tensor& bias() { return *bias_; }

 protected:
  bool is_norm() const override { return true; }
  std::string type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override;

 private:
  LayerNormOptions options_;
  Tensor none_;
  Tensor* weight_ = &none_;
  Tensor* bias_ = &none_;
};

}  // namespace mixp::nn
