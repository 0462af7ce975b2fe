// linear: y = x W^T + bias, with fp32 accumulation (f64 for f64), the bias added in fp32 and
// one rounding to the output dtype (the inputs' unless given). Weights are [out, in], as in
// PyTorch.
// Shape contract: x [..., in]; weight [out, in]; bias [out] or undefined; all the same dtype;
// the result is [..., out].
// Backward: dx = g W, dW = g^T x over all rows, dbias = sum of g over rows (fp32 accumulation;
// dW, and dbias with it where the gradient has the input's dtype, from kernels/linear_grads.h,
// which on bf16 takes both from one pass over g, and computes dx beside them when both are
// needed).
// Under bf16 or f16 autocast an fp32 weight that is a leaf (a parameter) or needs no gradient is
// not cast by autocast: the products take it as it is and round it to bf16 as they pack it, or
// to f16's values in fp32 for an fp32 product (kernels/gemm_product.h), and dW, rounded once to
// the narrow dtype as before, comes widened from its kernel (kernels/linear_grads.h).
// The values are those of autocast's cast; what goes is the pass that writes the bf16 copy and
// the cast's own backward pass. Under an enabled amp::Fp8Autocast scope the
// products run in FP8 instead (fp8_linear.cpp), or by the scope's FP4 recipe
// (fp4_recipe_linear.cpp).
#include "kernels/linear_grads.h"
#include "ops/fp8_ops.h"
#include "ops/gemm_op.h"
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

struct LinearBackward : autograd::Node {
  autograd::SavedTensor x, weight;
  DType bias_dtype = DType::f32;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor xv = x.get(), wv = weight.get();
    const Tensor g = grads[0].to(xv.dtype()).detach();
    const int64_t in = wv.size(1), out = wv.size(0), rows = xv.numel() / std::max<int64_t>(in, 1);
    Tensor dx, dw, db, sums;
    const bool bias_grad = next.size() > 2 && next[2].node;
    if (next[1].node) {
      // db from dW's kernel only where it sums grads[0] itself (a bf16 gradient), as the
      // separate sum would. An fp32 weight with bf16 x gets dW rounded to bf16 and widened.
      dw = empty(wv.shape(), wv.dtype(), MemoryTag::gradient, wv.device());
      if (bias_grad && grads[0].dtype() == xv.dtype())
        sums = empty(Shape{out}, bias_dtype, MemoryTag::gradient, wv.device());
    }
    const Tensor g2 = g.reshape({rows, out}), x2 = xv.reshape({rows, in});
    bool summed = false;
    if (next[0].node && next[1].node) {  // dx [rows, out] x [out, in] with dW, in one kernel
      dx = empty(xv.shape(), xv.dtype(), MemoryTag::activation, xv.device());
      Tensor dx2 = dx.reshape({rows, in});
      summed = kernels::linear_grads(g2, x2, wv, dx2, dw, sums);
    } else if (next[0].node) {
      dx = detail::gemm({.m = rows, .n = in, .k = out}, g, wv, xv.shape(), xv.dtype());
    } else if (next[1].node) {
      summed = kernels::linear_weight_grads(g2, x2, dw, sums);
    }
    if (summed) db = sums;
    if (bias_grad && !db.defined()) {
      NoGradGuard no_grad;
      db = ops::sum(grads[0].reshape({rows, out}), {0}).to(bias_dtype).detach();
    }
    if (next.size() == 2) return {dx, dw};
    return {dx, dw, db};
  }
  void release() override {
    x.reset();
    weight.reset();
  }
};

// True where autocast would round an fp32 weight to bf16 or f16 for this call, and the products
// can do it instead: the weight is a leaf or needs no gradient, so its gradient goes straight to
// the leaf's accumulation, which would widen the cast's gradient in any case.
bool product_rounds_weight(const Tensor& x, const Tensor& weight) {
  const bool narrowable = x.defined() && (x.dtype() == DType::f32 || x.dtype() == DType::bf16 ||
                                          x.dtype() == DType::f16);
  const bool narrow_autocast = amp::autocast_dtype() == DType::bf16 ||
                               amp::autocast_dtype() == DType::f16;
  return amp::autocast_enabled() && narrow_autocast && narrowable &&
         weight.defined() && weight.dtype() == DType::f32 &&
         (weight.is_leaf() || !weight.requires_grad());
}

}  // namespace

Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in,
              std::optional<DType> out_dtype) {
  if (amp::Fp8State* fp8 = amp::fp8_active()) {
    if (!fp8->recipe().fp4) return detail::fp8_linear(x_in, weight_in, bias_in, out_dtype, *fp8);
    return detail::fp4_recipe_linear(x_in, weight_in, bias_in, out_dtype, *fp8);
  }
  const bool weight_in_product = product_rounds_weight(x_in, weight_in);
  const auto cast = weight_in_product
                        ? amp::autocast_inputs(OpKind::linear, {&x_in, &bias_in})
                        : amp::autocast_inputs(OpKind::linear, {&x_in, &weight_in, &bias_in});
  const Tensor& x = cast[0];
  const Tensor& weight = weight_in_product ? weight_in : cast[1];
  const Tensor& bias = weight_in_product ? cast[1] : cast[2];
  detail::check_floating("linear", x, "input");
  detail::check_floating("linear", weight, "weight");
  if (!weight_in_product) detail::check_same_dtype("linear", x, weight);
  MIXP_CHECK(weight.ndim() == 2, "linear: weight must be [out, in], got ",
             weight.shape().to_string());
  MIXP_CHECK(x.ndim() >= 1 && x.size(-1) == weight.size(1), "linear: input ", x.shape().to_string(),
             " does not end in the weight's in-features ", weight.size(1), " (weight ",
             weight.shape().to_string(), ")");
  if (bias.defined()) {
    detail::check_floating("linear", bias, "bias");
    MIXP_CHECK(bias.ndim() == 1 && bias.size(0) == weight.size(0), "linear: bias must be [",
               weight.size(0), "], got ", bias.shape().to_string());
  }
  const DType out = out_dtype.value_or(x.dtype());
  const int64_t in = weight.size(1), n_out = weight.size(0);
  const int64_t rows = x.numel() / std::max<int64_t>(in, 1);
  std::vector<int64_t> dims(x.shape().dims().begin(), x.shape().dims().end());
  dims.back() = n_out;
  const Shape out_shape(dims);
  Tensor y = detail::gemm({.m = rows, .n = n_out, .k = in, .trans_b = true}, x, weight, out_shape,
                          out, bias);
  if (auto node = bias.defined()
                      ? autograd::make_node<LinearBackward>("linear", {&x, &weight, &bias})
                      : autograd::make_node<LinearBackward>("linear", {&x, &weight})) {
    node->x = autograd::SavedTensor(x);
    node->weight = autograd::SavedTensor(weight);
    if (bias.defined()) node->bias_dtype = bias.dtype();
    autograd::set_history(y, node);
  }
  return cast.output(y);
}

}  // namespace mixp::ops
