// layer_norm: y = (x - mean) * rstd * weight + bias over the last dimension, with mean and the
// biased variance of each row and rstd = 1 / sqrt(var + eps), computed in fp32 (f64 for f64
// inputs); the result has x's dtype (or out_dtype: bf16 or f16 for an f32 x), rounded once.
// Shape contract: x [..., C] with C >= 1; weight and bias [C] (any floating dtype each) or
// undefined (no scale, no shift); the result has x's shape. Its gradient is read in its dtype.
// Backward, with xhat = (x - mean) * rstd and gw = g * weight (g without weight):
//   dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) per row,
//   dweight = sum over rows of g * xhat, dbias = sum over rows of g, accumulated in fp32 (f64
//   for f64) and returned in the weight's and the bias's dtype.
// Saved: x in its dtype, and the per-row mean and rstd in fp32 (f64 for f64).
#include <cmath>
#include <optional>

#include "kernels/layer_norm.h"
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

struct LayerNormBackward : autograd::Node {
  autograd::SavedTensor x, weight, mean, rstd;
  DType weight_dtype = DType::f32, bias_dtype = DType::f32, y_dtype = DType::f32;
  bool has_bias = false;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor xv = x.get(), wv = weight.get(), mv = mean.get(), rv = rstd.get();
    // g in the result's dtype, read widened as it is (a bf16 result's gradient needs no fp32 copy).
    const Tensor g = grads[0].dtype() == y_dtype ? grads[0] : grads[0].to(y_dtype).detach();
    const bool want_dx = next[0].node != nullptr;
    const bool want_dw = wv.defined() && next[1].node, want_db = has_bias && next[2].node;
    const Shape affine{xv.size(-1)};
    Tensor dx = want_dx ? detail::empty_like(xv) : Tensor();
    Tensor dw = want_dw ? empty(affine, weight_dtype, MemoryTag::gradient, xv.device()) : Tensor();
    Tensor db = want_db ? empty(affine, bias_dtype, MemoryTag::gradient, xv.device()) : Tensor();
    kernels::layer_norm_backward(xv, g, wv, mv, rv, dx, dw, db);
    return {dx, dw, db};
  }
  void release() override {
    x.reset();
    weight.reset();
    mean.reset();
    rstd.reset();
  }
};

void check_affine(const Tensor& x, const Tensor& t, const char* what) {
  if (!t.defined()) return;
  detail::check_floating("layer_norm", t, what);
  MIXP_CHECK(t.ndim() == 1 && t.size(0) == x.size(-1), "layer_norm: the ", what, " must be [",
             x.size(-1), "] for input ", x.shape().to_string(), ", got ", t.shape().to_string());
}

}  // namespace

Tensor layer_norm(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in, double eps,
                  std::optional<DType> out_dtype) {
  const auto cast = amp::autocast_inputs(OpKind::layer_norm, {&x_in, &weight_in, &bias_in});
  const Tensor &x = cast[0], &weight = cast[1], &bias = cast[2];
  detail::check_floating("layer_norm", x);
  MIXP_CHECK(x.ndim() >= 1 && x.size(-1) >= 1,
             "layer_norm: the input must be [..., C] with C >= 1, got ", x.shape().to_string());
  MIXP_CHECK(std::isfinite(eps) && eps >= 0,
             "layer_norm: eps must be finite and non-negative, got ", eps);
  check_affine(x, weight, "weight");
  check_affine(x, bias, "bias");
  const DType y_dtype = out_dtype.value_or(x.dtype());
  MIXP_CHECK(y_dtype == x.dtype() ||
                 (x.dtype() == DType::f32 && (y_dtype == DType::bf16 || y_dtype == DType::f16)),
             "layer_norm: out_dtype must be the input's dtype (", name_of(x.dtype()),
             ") or, for an f32 input, bf16 or f16; got ", name_of(y_dtype));
  std::vector<int64_t> row_dims(x.shape().dims().begin(), x.shape().dims().end() - 1);
  Tensor y = empty(x.shape(), y_dtype, MemoryTag::activation, x.device());
  Tensor mean = empty(Shape(row_dims), detail::accumulation_dtype(x.dtype()), MemoryTag::activation, x.device());
  Tensor rstd = empty(Shape(row_dims), detail::accumulation_dtype(x.dtype()), MemoryTag::activation, x.device());
  kernels::layer_norm(x, weight, bias, eps, y, mean, rstd);
  if (auto node = autograd::make_node<LayerNormBackward>("layer_norm", {&x, &weight, &bias})) {
    node->x = autograd::SavedTensor(x);
    node->weight = autograd::SavedTensor(weight);
    node->mean = autograd::SavedTensor(mean);
    node->rstd = autograd::SavedTensor(rstd);
    if (weight.defined()) node->weight_dtype = weight.dtype();
    if (bias.defined()) node->bias_dtype = bias.dtype();
    node->y_dtype = y_dtype;
    node->has_bias = bias.defined();
    autograd::set_history(y, node);
  }
  // An explicit out_dtype is kept; otherwise the policy's rule applies.
  return out_dtype ? y : cast.output(y);
}

}  // namespace mixp::ops
