// linear in FP8: y = dequant(q(x)) dequant(q(W))^T + bias, the product by amp::fp8_gemm (what an
// FP8 tensor core computes), the bias added in fp32, one rounding to the output dtype.
// Shape contract: that of linear (x [..., in], weight [out, in], bias [out] or undefined); x and
// weight f32 or bf16 (bias any floating dtype). The output dtype is out_dtype, else the
// enclosing bf16/f16 Autocast's dtype, else x's.
// Quantization (per the state's recipe): x to the input role's format with the site's input
// meta, W to the weight format, cached for the step by the state; backward quantizes the output
// gradient g to the gradient format (E5M2 under HYBRID) and computes
//   dX = q(g) q(W^T)^T      (W quantized along `out`, the reduction dimension of dX)
//   dW = q(g^T) q(x^T)^T    (both quantized along the rows)
//   dbias = sum of g over rows, fp32 accumulation (not quantized).
// Amax of x and W is recorded in forward when grad mode is on; that of g in backward.
#include "kernels/fp8_linear.h"
#include "ops/fp8_ops.h"
#include "ops/op_helpers.h"

namespace mixp::ops::detail {

amp::Fp8Scaling activation_scaling(amp::Fp8Scaling recipe) {
  return recipe == amp::Fp8Scaling::block_128x128 ? amp::Fp8Scaling::block_1x128 : recipe;
}

Fp8OpEntry enter_fp8_op(OpKind op, std::span<const Tensor* const> inputs) {
  std::optional<DType> autocast_output;
  if (amp::autocast_enabled()) autocast_output = amp::autocast_dtype();
  OpInfo row = op_info(op);
  row.policy = CastPolicy::keep;
  return {.suspended = amp::autocast_inputs(row, inputs), .autocast_output = autocast_output};
}

void check_quantized_linear(const char* op, const Tensor& x, const Tensor& weight,
                            const Tensor& bias) {
  MIXP_CHECK(x.defined() && (x.dtype() == DType::f32 || x.dtype() == DType::bf16), op,
             ": the input must be f32 or bf16, got ",
             x.defined() ? name_of(x.dtype()) : "an undefined tensor");
  MIXP_CHECK(weight.defined() && (weight.dtype() == DType::f32 || weight.dtype() == DType::bf16),
             op, ": the weight must be f32 or bf16");
  MIXP_CHECK(weight.ndim() == 2, op, ": weight must be [out, in], got ",
             weight.shape().to_string());
  MIXP_CHECK(x.ndim() >= 1 && x.size(-1) == weight.size(1), op, ": input ", x.shape().to_string(),
             " does not end in the weight's in-features ", weight.size(1));
  if (bias.defined()) {
    check_floating(op, bias, "bias");
    MIXP_CHECK(bias.ndim() == 1 && bias.size(0) == weight.size(0), op, ": bias must be [",
               weight.size(0), "], got ", bias.shape().to_string());
  }
}

Tensor add_bias_and_round(Tensor y, const Tensor& bias, DType out) {
  NoGradGuard no_grad;
  if (bias.defined()) kernels::fp8_add_bias_rows(y, bias.to(DType::f32));
  return out == DType::f32 ? y : y.to(out).detach();
}

Tensor transpose_last2(const Tensor& t) {
  MIXP_ASSERT(t.ndim() == 2 || t.ndim() == 3, "transpose_last2 of ", t.shape().to_string());
  NoGradGuard no_grad;
  const Tensor src = t.dtype() == DType::f32 ? t : t.to(DType::f32);
  const int64_t rows = t.size(-2), cols = t.size(-1);
  Tensor out = t.ndim() == 3 ? empty({t.size(0), cols, rows}, DType::f32, MemoryTag::workspace)
                             : empty({cols, rows}, DType::f32, MemoryTag::workspace);
  kernels::fp8_transpose_last2(src, out);
  return out;
}

namespace {

bool per_tensor(amp::Fp8Scaling s) {
  return s == amp::Fp8Scaling::delayed || s == amp::Fp8Scaling::current ||
         s == amp::Fp8Scaling::none;
}

// A per-tensor quantization of x^T is the transpose of x's codes (one scale for both), so
// backward transposes bytes instead of quantizing again.
amp::Fp8Tensor transposed_codes(const amp::Fp8Tensor& q) {
  amp::Fp8Tensor t = q;
  t.data = empty({q.data.size(1), q.data.size(0)}, q.data.dtype(), MemoryTag::workspace);
  kernels::fp8_transpose_last2(q.data, t.data);
  return t;
}

constexpr amp::Fp8Role kLinearRoles[] = {amp::Fp8Role::input, amp::Fp8Role::weight,
                                         amp::Fp8Role::gradient};

struct Fp8LinearBackward : autograd::Node {
  autograd::SavedTensor x, weight;
  std::shared_ptr<amp::Fp8State::Site> site;
  amp::Fp8Recipe recipe;
  float x_scale = 1.0f, w_scale = 1.0f;  // the forward's scales (delayed scaling)
  amp::Fp8Tensor qx, qw;                 // the forward's codes, kept for per-tensor scaling
  DType bias_dtype = DType::f32;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor xv = x.get(), wv = weight.get();
    const int64_t in = wv.size(1), out = wv.size(0), rows = xv.numel() / std::max<int64_t>(in, 1);
    const amp::Fp8Scaling act = activation_scaling(recipe.scaling);
    const DType gdt = amp::fp8_dtype(recipe.format, amp::Fp8Role::gradient);
    const DType xdt = amp::fp8_dtype(recipe.format, amp::Fp8Role::input);
    const DType wdt = amp::fp8_dtype(recipe.format, amp::Fp8Role::weight);
    amp::Fp8Meta& gmeta = site->metas[2];
    const amp::MxScaleRounding mx = recipe.mx_scale_rounding;
    NoGradGuard no_grad;
    Tensor g = grads[0].reshape({rows, out});
    if (g.dtype() != DType::f32 && g.dtype() != DType::bf16) g = g.to(DType::f32);
    Tensor dx, dw, db;
    const amp::Fp8Tensor qg = amp::quantize(g, gdt, act, gmeta.scale, mx);
    gmeta.record(qg.amax);
    if (next[0].node) {
      const amp::Fp8Tensor qwt =
          per_tensor(recipe.scaling)
              ? transposed_codes(qw)
              : amp::quantize(transpose_last2(wv), wdt, recipe.scaling, w_scale, mx);
      dx = amp::fp8_gemm(qg, qwt).view(xv.shape());
      if (dx.dtype() != xv.dtype()) dx = dx.to(xv.dtype());
    }
    if (next[1].node) {
      const amp::Fp8Tensor qgt = per_tensor(recipe.scaling)
                                     ? transposed_codes(qg)
                                     : amp::quantize(transpose_last2(g), gdt, act, gmeta.scale, mx);
      const amp::Fp8Tensor qxt =
          per_tensor(recipe.scaling)
              ? transposed_codes(qx)
              : amp::quantize(transpose_last2(xv.reshape({rows, in})), xdt, act, x_scale, mx);
      dw = amp::fp8_gemm(qgt, qxt);
      if (dw.dtype() != wv.dtype()) dw = dw.to(wv.dtype());
    }
    if (next.size() > 2 && next[2].node) db = ops::sum(g, {0}).to(bias_dtype).detach();
    if (next.size() == 2) return {dx, dw};
    return {dx, dw, db};
  }
  void release() override {
    x.reset();
    weight.reset();
    site.reset();
    qx = amp::Fp8Tensor();
    qw = amp::Fp8Tensor();
  }
};

}  // namespace

Tensor fp8_linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in,
                  std::optional<DType> out_dtype, amp::Fp8State& state) {
  const Tensor* inputs[] = {&x_in, &weight_in, &bias_in};
  const Fp8OpEntry entry = enter_fp8_op(OpKind::linear, inputs);
  const Tensor &x = x_in, &weight = weight_in, &bias = bias_in;
  constexpr const char* op = "linear (fp8)";
  check_quantized_linear(op, x, weight, bias);
  const DType out = out_dtype.value_or(entry.autocast_output.value_or(x.dtype()));
  const int64_t in = weight.size(1), n_out = weight.size(0);
  const int64_t rows = x.numel() / std::max<int64_t>(in, 1);
  const amp::Fp8Recipe& recipe = state.recipe();
  std::shared_ptr<amp::Fp8State::Site> site =
      state.site(amp::fp8_next_site(), "linear", kLinearRoles);
  const bool record = grad_mode_enabled();
  amp::Fp8Meta &xmeta = site->metas[0], &wmeta = site->metas[1];
  const float x_scale = xmeta.scale, w_scale = wmeta.scale;
  Tensor y;
  amp::Fp8Tensor qx, qw;
  {
    NoGradGuard no_grad;
    qx = amp::quantize(x.reshape({rows, in}), amp::fp8_dtype(recipe.format, amp::Fp8Role::input),
                       activation_scaling(recipe.scaling), x_scale, recipe.mx_scale_rounding);
    if (record) xmeta.record(qx.amax);
    qw = state.cached_weight(weight, wmeta, record);
    std::vector<int64_t> dims(x.shape().dims().begin(), x.shape().dims().end());
    dims.back() = n_out;
    y = add_bias_and_round(amp::fp8_gemm(qx, qw), bias, out).view(Shape(dims));
  }
  if (auto node = bias.defined() ? autograd::make_node<Fp8LinearBackward>(op, {&x, &weight, &bias})
                                 : autograd::make_node<Fp8LinearBackward>(op, {&x, &weight})) {
    node->x = autograd::SavedTensor(x);
    node->weight = autograd::SavedTensor(weight);
    node->site = site;
    node->recipe = recipe;
    node->x_scale = x_scale;
    node->w_scale = w_scale;
    if (per_tensor(recipe.scaling)) {
      node->qx = qx;
      node->qw = qw;
    }
    if (bias.defined()) node->bias_dtype = bias.dtype();
    autograd::set_history(y, node);
  }
  return y;
}

}  // namespace mixp::ops::detail
