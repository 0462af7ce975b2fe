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

ops::SumAndNorm LayerNorm::add_forward_for_linear(const Tensor& a, const Tensor& b) {
  MIXP_CHECK(a.defined() && a.ndim() >= 1 && a.size(-1) == options_.normalized_shape,
             "LayerNorm: expected an input [..., ", options_.normalized_shape, "], got ",
             a.defined() ? a.shape().to_string() : "an undefined tensor");
  // The sum is fp32 where one operand is fp32 and the other fp32, bf16 or f16: then, as in
  // forward_for_linear, the result is rounded to the autocast dtype directly.
  auto f32_or_narrow = [](DType d) {
    return d == DType::f32 || d == DType::bf16 || d == DType::f16;
  };
  const bool sum_f32 = b.defined() && f32_or_narrow(a.dtype()) && f32_or_narrow(b.dtype()) &&
                       (a.dtype() == DType::f32 || b.dtype() == DType::f32);
  const bool narrow = amp::autocast_enabled() && amp::fp8_active() == nullptr && sum_f32 &&
                      amp::autocast_dtype() != DType::f32;
  ops::SumAndNorm out =
      ops::add_layer_norm(a, b, *weight_, *bias_, options_.eps,
                          narrow ? std::optional<DType>(amp::autocast_dtype()) : std::nullopt);
  out.normalized = run_forward_hooks(out.normalized);
  return out;
}

std::string LayerNorm::extra_repr() const {
  return detail::concat("(", options_.normalized_shape, ",), eps=", options_.eps,
                        ", elementwise_affine=", options_.elementwise_affine ? "True" : "False");
}

}  // namespace mixp::nn
