// scaled_dot_product_attention: softmax(q k^T / sqrt(Dh) + mask) v, fused, with its own backward.
// Shape contract: q, k, v [B, H, T, Dh], the same shape and dtype (f32, f64, f16 or bf16), every
// size at least 1; the result is [B, H, T, Dh] in q's dtype. causal: query i sees keys j <= i.
// Scores, softmax and products are computed and accumulated in fp32 (f64 for f64); the result
// rounds once. Saved for backward: q, k, v and the per-row log-sum-exp of the scaled scores
// (fp32; f64 for f64), from which backward recomputes the probabilities P.
// Backward, with S = q k^T / sqrt(Dh), P = exp(S - lse) (0 where masked), dO the gradient:
//   dV = P^T dO,  dP = dO V^T,  dS = P (dP - rowsum(P dP)) / sqrt(Dh),
//   dQ = dS K,    dK = dS^T Q.
// bf16 inputs (the amp-bf16 and bf16 presets): the four products with P or dS as an operand
// (P V; P^T dO, dS K, dS^T Q) run as bf16 GEMMs accumulating in fp32, P and dS rounded once to
// bf16 (to nearest, even) as PyTorch's bf16 matmuls see them under autocast; the softmax, the
// log-sum-exp and dS itself (from the unrounded P) stay fp32. The reference rounds P and dS at
// the same points. f32, f16 (no bf16-like units for f16 on the CPU) and f64 keep P and dS in
// the accumulation dtype. The arithmetic is kernels/scaled_dot_product_attention.h's.
// Under an enabled amp::Fp8Autocast scope the six products run as FP8 GEMMs (fp8_attention
// below): q, k, v and P quantized to the input format, dO and dS to the gradient format, each
// in the layout its product reduces along; the softmax and dS stay fp32.
#include "kernels/scaled_dot_product_attention.h"
#include "ops/fp8_ops.h"
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

using kernels::attention::Dims;

// The sizes of q, k and v, all [B, H, T, Dh], checked for `op` (the fp32/bf16 and fp8 paths).
Dims attention_dims(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                    bool causal) {
  MIXP_CHECK(q.ndim() == 4 && q.shape() == k.shape() && q.shape() == v.shape(), op,
             ": q, k and v must all be [B, H, T, Dh], got ", q.shape().to_string(), ", ",
             k.shape().to_string(), " and ", v.shape().to_string());
  MIXP_CHECK(q.numel() > 0, op, ": every size must be at least 1, got ", q.shape().to_string());
  return Dims{
      .bh = q.shape()[0] * q.shape()[1], .t = q.shape()[2], .dh = q.shape()[3], .causal = causal};
}

struct AttentionBackward : autograd::Node {
  autograd::SavedTensor q, k, v, lse;
  Dims d;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor qv = q.get(), kv = k.get(), vv = v.get();
    const Tensor g = grads[0].to(qv.dtype()).detach();
    const Tensor* inputs[3] = {&qv, &kv, &vv};
    std::vector<Tensor> result(3);
    for (size_t i = 0; i < 3; ++i) {
      if (next[i].node) result[i] = detail::empty_like(*inputs[i]);
    }
    kernels::attention_backward(qv, kv, vv, lse.get(), g, d, result[0], result[1], result[2]);
    return result;
  }
  void release() override {
    q.reset();
    k.reset();
    v.reset();
    lse.reset();
  }
};

// ---- fp8: the products by amp::fp8_gemm, quantized per the state's recipe ----

constexpr amp::Fp8Role kAttentionRoles[] = {amp::Fp8Role::input,    amp::Fp8Role::input,
                                            amp::Fp8Role::input,    amp::Fp8Role::input,
                                            amp::Fp8Role::gradient, amp::Fp8Role::gradient};
enum Fp8Slot { slot_q = 0, slot_k, slot_v, slot_p, slot_do, slot_ds };

struct Fp8Quantizer {
  amp::Fp8Recipe recipe;
  std::shared_ptr<amp::Fp8State::Site> site;
  float scales[6] = {1, 1, 1, 1, 1, 1};  // the forward's scales of q, k, v, p (delayed scaling)
  bool record = true;
  // t: [BH, rows, cols] with the reduction along cols.
  amp::Fp8Tensor operator()(const Tensor& t, Fp8Slot slot, bool record_amax) const {
    amp::Fp8Meta& meta = site->metas[size_t(slot)];
    const float scale = slot >= slot_do ? meta.scale : scales[slot];
    const amp::Fp8Tensor q =
        amp::quantize(t, amp::fp8_dtype(recipe.format, meta.role),
                      detail::activation_scaling(recipe.scaling), scale, recipe.mx_scale_rounding);
    if (record_amax && record) meta.record(q.amax);
    return q;
  }
};

// Probabilities [BH, T, T] from fp8 scores; lse is filled when `fill_lse`, else read.
Tensor fp8_probabilities(const amp::Fp8Tensor& qq, const amp::Fp8Tensor& qk, const Dims& d,
                         Tensor& lse, bool fill_lse) {
  Tensor p = amp::fp8_gemm(qq, qk);
  if (fill_lse) {
    lse = empty(Shape{d.bh, d.t}, DType::f32, MemoryTag::activation, p.device());
    kernels::attention_softmax_rows(p, lse, d);
  } else {
    kernels::attention_probabilities_rows(p, lse, d);
  }
  return p;
}

Tensor as_dtype(Tensor t, const Shape& shape, DType dtype) {
  t = t.view(shape);
  return t.dtype() == dtype ? t : t.to(dtype).detach();
}

struct Fp8AttentionBackward : autograd::Node {
  autograd::SavedTensor q, k, v, lse;
  Dims d;
  Fp8Quantizer quant;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    NoGradGuard no_grad;
    const Tensor qv = q.get(), kv = k.get(), vv = v.get(), lv = lse.get();
    const Shape s3{d.bh, d.t, d.dh};
    const Tensor q3 = qv.view(s3), k3 = kv.view(s3), v3 = vv.view(s3);
    Tensor l = lv;
    const Tensor p =
        fp8_probabilities(quant(q3, slot_q, false), quant(k3, slot_k, false), d, l, false);
    const Tensor g = grads[0].view(s3);
    std::vector<Tensor> result(3);
    const amp::Fp8Tensor qg = quant(g, slot_do, true);
    if (next[2].node) {  // dV = P^T dO
      const Tensor dv = amp::fp8_gemm(quant(detail::transpose_last2(p), slot_p, false),
                                      quant(detail::transpose_last2(g), slot_do, false));
      result[2] = as_dtype(dv, vv.shape(), vv.dtype());
    }
    if (next[0].node || next[1].node) {
      Tensor ds = amp::fp8_gemm(qg, quant(v3, slot_v, false));  // dP = dO V^T
      kernels::attention_score_grad_rows(p, ds, d);
      if (next[0].node) {  // dQ = dS K
        const Tensor dq = amp::fp8_gemm(quant(ds, slot_ds, true),
                                        quant(detail::transpose_last2(k3), slot_k, false));
        result[0] = as_dtype(dq, qv.shape(), qv.dtype());
      }
      if (next[1].node) {  // dK = dS^T Q
        const Tensor dk = amp::fp8_gemm(quant(detail::transpose_last2(ds), slot_ds, !next[0].node),
                                        quant(detail::transpose_last2(q3), slot_q, false));
        result[1] = as_dtype(dk, kv.shape(), kv.dtype());
      }
    }
    return result;
  }
  void release() override {
    q.reset();
    k.reset();
    v.reset();
    lse.reset();
    quant.site.reset();
  }
};

}  // namespace

namespace detail {

Tensor fp8_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, bool causal,
                     amp::Fp8State& state) {
  const Tensor* inputs[] = {&q_in, &k_in, &v_in};
  const Fp8OpEntry entry = enter_fp8_op(OpKind::scaled_dot_product_attention, inputs);
  const Tensor &q = q_in, &k = k_in, &v = v_in;
  constexpr const char* op = "scaled_dot_product_attention (fp8)";
  for (const Tensor* t : inputs) {
    MIXP_CHECK(t->defined() && (t->dtype() == DType::f32 || t->dtype() == DType::bf16), op,
               ": q, k and v must be f32 or bf16");
  }
  const Dims d = attention_dims(op, q, k, v, causal);
  Fp8Quantizer quant;
  quant.recipe = state.recipe();
  quant.site = state.site(amp::fp8_next_site(), "attention", kAttentionRoles);
  quant.record = grad_mode_enabled();
  for (int s = 0; s < 4; ++s) quant.scales[s] = quant.site->metas[size_t(s)].scale;
  const DType out_dtype = entry.autocast_output.value_or(q.dtype());
  Tensor out, lse;
  {
    NoGradGuard no_grad;
    const Shape s3{d.bh, d.t, d.dh};
    const Tensor p = fp8_probabilities(quant(q.view(s3), slot_q, true),
                                       quant(k.view(s3), slot_k, true), d, lse, true);
    const Tensor o =
        amp::fp8_gemm(quant(p, slot_p, true), quant(transpose_last2(v.view(s3)), slot_v, true));
    out = as_dtype(o, q.shape(), out_dtype);
  }
  if (auto node = autograd::make_node<Fp8AttentionBackward>(op, {&q, &k, &v})) {
    node->q = autograd::SavedTensor(q);
    node->k = autograd::SavedTensor(k);
    node->v = autograd::SavedTensor(v);
    node->lse = autograd::SavedTensor(lse);
    node->d = d;
    node->quant = quant;
    autograd::set_history(out, node);
  }
  return out;
}

}  // namespace detail

Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                    bool causal) {
  if (amp::Fp8State* fp8 = amp::fp8_active(); fp8 && !fp8->recipe().fp4) {
    return detail::fp8_attention(q_in, k_in, v_in, causal, *fp8);
  }
  const auto cast =
      amp::autocast_inputs(OpKind::scaled_dot_product_attention, {&q_in, &k_in, &v_in});
  const Tensor &q = cast[0], &k = cast[1], &v = cast[2];
  constexpr const char* op = "scaled_dot_product_attention";
  detail::check_floating(op, q, "query");
  detail::check_floating(op, k, "key");
  detail::check_floating(op, v, "value");
  detail::check_same_dtype(op, q, k);
  detail::check_same_dtype(op, q, v);
  const Dims d = attention_dims(op, q, k, v, causal);
  Tensor out = detail::empty_like(q);
  Tensor lse = empty(Shape{d.bh, d.t}, detail::accumulation_dtype(q.dtype()), MemoryTag::activation, q.device());
  {
    NoGradGuard no_grad;
    kernels::attention_forward(q, k, v, d, out, lse);
  }
  if (auto node = autograd::make_node<AttentionBackward>(op, {&q, &k, &v})) {
    node->q = autograd::SavedTensor(q);
    node->k = autograd::SavedTensor(k);
    node->v = autograd::SavedTensor(v);
    node->lse = autograd::SavedTensor(lse);
    node->d = d;
    autograd::set_history(out, node);
  }
  return cast.output(out);
}

}  // namespace mixp::ops
