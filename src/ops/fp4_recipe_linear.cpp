// linear under an FP4 recipe (amp::Fp8Recipe::fp4): which format each call computes in, and
// what it counts and measures. The recipe's FP4 layers go to fp4_linear; under adaptive
// precision (mixp/amp/adaptive.h) each Linear layer runs in its current format (fp4_linear, or
// fp8_linear under the adaptive state's MXFP8 state, or bf16), and on a measuring step its
// input and weight are measured here and its output gradient in backward (gradient_probe);
// every other product (a kept layer, a head tied to an embedding) runs in the Autocast's bf16.
// Training calls (grad mode on) count their FLOPs by format into the state.
// Shape contract: that of linear.
#include "autograd/autocast_internal.h"
#include "mixp/amp/adaptive.h"
#include "ops/fp8_ops.h"
#include "ops/op_helpers.h"

namespace mixp::ops::detail {
namespace {

Tensor bf16_linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
                   std::optional<DType> out_dtype) {
  amp::detail::Fp8Suspend plain;  // ops::linear without the recipe: the Autocast's path
  return ops::linear(x, weight, bias, out_dtype);
}

Tensor adaptive_linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
                       std::optional<DType> out_dtype, amp::Fp8State& state,
                       amp::AdaptivePrecision& adaptive, size_t layer) {
  const bool measure = grad_mode_enabled() && adaptive.measuring();
  Tensor x2;
  if (measure) {
    NoGradGuard no_grad;
    x2 = x.detach().reshape({x.numel() / weight.size(1), weight.size(1)});
    adaptive.measure_inputs(layer, x2, weight.detach());
  }
  Tensor y;
  switch (adaptive.format(layer)) {
    case amp::LayerFormat::fp4: y = fp4_linear(x, weight, bias, out_dtype, state, layer); break;
    case amp::LayerFormat::fp8:
      y = fp8_linear(x, weight, bias, out_dtype, adaptive.fp8_layers());
      break;
    case amp::LayerFormat::bf16: y = bf16_linear(x, weight, bias, out_dtype); break;
  }
  if (!measure) return y;
  const int64_t out = weight.size(0);
  return gradient_probe(y, [&adaptive, layer, out, x2](const Tensor& g) {
    adaptive.measure_gradient(layer, g.reshape({g.numel() / out, out}), x2);
  });
}

}  // namespace

Tensor fp4_recipe_linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
                         std::optional<DType> out_dtype, amp::Fp8State& state) {
  MIXP_CHECK(x.defined() && weight.defined() && weight.ndim() == 2,
             "linear: weight must be [out, in], got ",
             weight.defined() ? weight.shape().to_string() : std::string("an undefined tensor"));
  const std::optional<size_t> layer = state.fp4_layer_of(weight);
  amp::AdaptivePrecision* adaptive = amp::adaptive_of(state);
  amp::LayerFormat format = amp::LayerFormat::bf16;
  Tensor y;
  if (layer && adaptive) {
    format = adaptive->format(*layer);
    y = adaptive_linear(x, weight, bias, out_dtype, state, *adaptive, *layer);
  } else if (layer) {
    format = amp::LayerFormat::fp4;
    y = fp4_linear(x, weight, bias, out_dtype, state, *layer);
  } else {
    y = bf16_linear(x, weight, bias, out_dtype);
  }
  if (grad_mode_enabled()) {
    const double macs = double(x.numel() / weight.size(1)) * double(weight.numel());
    state.count_linear_flops(int(format), 6.0 * macs);
  }
  return y;
}

}  // namespace mixp::ops::detail
