#include "mixp/nn/layer_norm.h"

#include "mixp/amp/autocast.h"
#include "mixp/amp/fp8.h"
#include "mixp/error.h"
#include "mixp/ops.h"

namespace mixp::nn {

LayerNorm::LayerNorm(const LayerNormOptions& options) : options_(options) {
  const int64_t c = options.normalized_shape;
  MIXP_CHECK(c >= 1, "LayerNorm: normalized_shape must be at least 1, got ", c);
  MIXP_CHECK(options.eps > 0, "LayerNorm: eps must be positive, got ", options.eps);
  if (options.elementwise_affine) {
    weight_ = &register_parameter("weight", ones({c}, DType::f32, MemoryTag::parameter));
    if (options.bias) {
      bias_ = &register_parameter("bias", zeros({c}, DType::f32, MemoryTag::parameter));
    }
  }
}

void LayerNorm::reset() {
  if (weight_->defined()) weight_->fill_(1.0);
  if (bias_->defined()) bias_->fill_(0.0);
}

Tensor LayerNorm::forward(const Tensor& x) {
  MIXP_CHECK(x.defined() && x.ndim() >= 1 && x.size(-1) == options_.normalized_shape,
             "LayerNorm: expected an input [..., ", options_.normalized_shape, "], got ",
             x.defined() ? x.shape().to_string() : "an undefined tensor");
  return run_forward_hooks(ops::layer_norm(x, *weight_, *bias_, options_.eps));
}

Tensor LayerNorm::forward_for_linear(const Tensor& x) {
  // FP8 linears quantize their fp32 input themselves: a bf16 one would round twice.
  const bool narrow = amp::autocast_enabled() && amp::fp8_active() == nullptr && x.defined() &&
                      x.dtype() == DType::f32 && amp::autocast_dtype() != DType::f32;
  if (!narrow) return forward(x);
  MIXP_CHECK(x.ndim() >= 1 && x.size(-1) == options_.normalized_shape,
             "LayerNorm: expected an input [..., ", options_.normalized_shape, "], got ",
             x.shape().to_string());
  return run_forward_hooks(
      ops::layer_norm(x, *weight_, *bias_, options_.eps, amp::autocast_dtype()));
}

std::string LayerNorm::extra_repr() const {
  return detail::concat("(", options_.normalized_shape, ",), eps=", options_.eps,
                        ", elementwise_affine=", options_.elementwise_affine ? "True" : "False");
}

}  // namespace mixp::nn
