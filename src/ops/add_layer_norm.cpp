// add_layer_norm: sum = add(a, b), normalized = layer_norm(sum, weight, bias, eps, out_dtype),
// with the same values and gradients, bit for bit, as the two ops; a transformer's residual add
// and the layer norm after it. Shape contract: a and b of one shape [..., C], C >= 1; weight
// and bias as layer_norm's.
// Where the sum is fp32 (a and b fp32, or under autocast one fp32 and one bf16 or f16, as add
// reads them), one kernel computes both per row, and one backward node takes the gradients of
// both results: ds = g_sum + layer_norm's input gradient from g_normalized, in fp32, rounded
// once for a narrow input; dweight and dbias as layer_norm's. That is one pass over the rows
// each way where the two ops and the gradients' sum took three. Otherwise the two ops run.
// Saved: the sum (which layer_norm would save) and the rows' mean and rstd.
#include <cmath>
#include <optional>

#include "kernels/add_layer_norm.h"
#include "kernels/layer_norm.h"
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

struct AddLayerNormBackward : autograd::Node {
  autograd::SavedTensor sum, weight, mean, rstd;
  DType a_dtype = DType::f32, b_dtype = DType::f32, y_dtype = DType::f32;
  DType weight_dtype = DType::f32, bias_dtype = DType::f32;
  bool has_bias = false;

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  void release() override {
    sum.reset();
    weight.reset();
    mean.reset();
    rstd.reset();
  }
};

// `g` in `dtype`, rounded once where it is narrower.
Tensor in_dtype(const Tensor& g, DType dtype) {
  if (!g.defined() || g.dtype() == dtype) return g;
  NoGradGuard no_grad;
  return g.to(dtype).detach();
}

std::vector<Tensor> AddLayerNormBackward::apply(std::vector<Tensor>&& grads) {
  const Tensor s = sum.get(), w = weight.get(), m = mean.get(), r = rstd.get();
  const Tensor g_sum = in_dtype(grads[0], DType::f32), g_y = in_dtype(grads[1], y_dtype);
  const bool want_a = next[0].node != nullptr, want_b = next[1].node != nullptr;
  const Shape affine{s.size(-1)};
  Tensor dw = g_y.defined() && w.defined() && next[2].node
                  ? empty(affine, weight_dtype, MemoryTag::gradient, s.device())
                  : Tensor();
  Tensor dbias = g_y.defined() && has_bias && next[3].node
                     ? empty(affine, bias_dtype, MemoryTag::gradient, s.device())
                     : Tensor();
  // The add's narrow input, whose gradient the fused kernel rounds as it writes ds.
  const bool a_narrow = a_dtype != DType::f32, b_narrow = b_dtype != DType::f32;
  const DType narrow_dtype = a_narrow ? a_dtype : b_dtype;
  Tensor ds, ds_narrow;
  if (!g_y.defined()) {
    ds = g_sum;
  } else if (!g_sum.defined()) {
    ds = detail::empty_like(s);
    kernels::layer_norm_backward(s, g_y, w, m, r, ds, dw, dbias);
  } else {
    ds = detail::empty_like(s);
    if ((a_narrow && want_a) || (b_narrow && want_b)) {
      ds_narrow = empty(s.shape(), narrow_dtype, MemoryTag::activation, s.device());
    }
    kernels::add_layer_norm_backward(s, g_y, g_sum, w, m, r, ds, ds_narrow, dw, dbias);
  }
  auto for_input = [&](bool wanted, DType dtype) {
    if (!wanted) return Tensor();
    if (dtype == DType::f32) return ds;
    return ds_narrow.defined() ? ds_narrow : in_dtype(ds, dtype);
  };
  return {for_input(want_a, a_dtype), for_input(want_b, b_dtype), dw, dbias};
}

bool affine_fits(const Tensor& t, int64_t c) {
  return !t.defined() || (is_floating(t.dtype()) && t.ndim() == 1 && t.size(0) == c);
}

// Whether the fused kernel computes this call: an fp32 sum of operands that add's and
// layer_norm's policy rows leave as they are, and arguments layer_norm accepts. Anything else
// (and every error) goes through the two ops.
bool fused(const Tensor& a, const Tensor& b, const Tensor& weight, const Tensor& bias, double eps,
           std::optional<DType> out_dtype) {
  if (!a.defined() || !b.defined() || !(a.shape() == b.shape()) || a.ndim() < 1 || a.size(-1) < 1) {
    return false;
  }
  const bool both_f32 = a.dtype() == DType::f32 && b.dtype() == DType::f32;
  const bool mixed = amp::autocast_enabled() && amp::detail::reads_mixed_inputs(a, b);
  const bool y_ok = !out_dtype || *out_dtype == DType::f32 || *out_dtype == DType::bf16 ||
                    *out_dtype == DType::f16;
  return (both_f32 || mixed) && y_ok && std::isfinite(eps) && eps >= 0 &&
         affine_fits(weight, a.size(-1)) && affine_fits(bias, a.size(-1));
}

}  // namespace

SumAndNorm add_layer_norm(const Tensor& a, const Tensor& b, const Tensor& weight,
                          const Tensor& bias, double eps, std::optional<DType> out_dtype) {
  if (!fused(a, b, weight, bias, eps, out_dtype)) {
    Tensor s = add(a, b);
    return {.sum = s, .normalized = layer_norm(s, weight, bias, eps, out_dtype)};
  }
  Tensor s = empty(a.shape(), DType::f32, MemoryTag::activation, a.device());
  // Both policy rows leave these inputs as they are; they are applied for autocast's counts.
  { const auto cast = amp::autocast_inputs(OpKind::add, {&a, &b}); }
  { const auto cast = amp::autocast_inputs(OpKind::layer_norm, {&s, &weight, &bias}); }
  std::vector<int64_t> row_dims(a.shape().dims().begin(), a.shape().dims().end() - 1);
  Tensor y = empty(a.shape(), out_dtype.value_or(DType::f32), MemoryTag::activation, a.device());
  Tensor mean = empty(Shape(row_dims), DType::f32, MemoryTag::activation, a.device());
  Tensor rstd = empty(Shape(row_dims), DType::f32, MemoryTag::activation, a.device());
  kernels::add_layer_norm(a, b, weight, bias, eps, s, y, mean, rstd);
  if (auto node =
          autograd::make_node<AddLayerNormBackward>("add_layer_norm", {&a, &b, &weight, &bias})) {
    node->num_outputs = 2;
    node->sum = autograd::SavedTensor(s);
    node->weight = autograd::SavedTensor(weight);
    node->mean = autograd::SavedTensor(mean);
    node->rstd = autograd::SavedTensor(rstd);
    node->a_dtype = a.dtype();
    node->b_dtype = b.dtype();
    node->y_dtype = y.dtype();
    if (weight.defined()) node->weight_dtype = weight.dtype();
    if (bias.defined()) node->bias_dtype = bias.dtype();
    node->has_bias = bias.defined();
    autograd::set_history(s, node, 0);
    autograd::set_history(y, node, 1);
  }
  return {.sum = s, .normalized = y};
}

}  // namespace mixp::ops
