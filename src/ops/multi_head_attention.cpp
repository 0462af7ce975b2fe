// multi_head_attention: split_heads, scaled_dot_product_attention and the merge of the heads as
// one op (see mixp/ops.h). Shape contract: qkv [B, T, 3C] with every size at least 1 and heads
// >= 1 dividing C; the result is [B, T, C] in the attention's dtype.
// Where the tiled bf16 attention applies, q, k and v are read in place from qkv (row stride
// 3C, head h at column h Dh of its part), the heads are written into their columns of the
// result, and backward writes the gradient of qkv the same way: the values of the composed ops,
// bit for bit, without the split's and the merge's copies (four passes over qkv or the result
// in a gpt step). Saved for backward: qkv and the per-row log-sum-exp, as the attention saves.
// Elsewhere (other dtypes, CPUs or head sizes, FP8 recipes, reference mode) it is the composition
// itself.
#include "mixp/amp/fp8.h"
#include "ops/attention_internal.h"
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

Tensor composed(const Tensor& qkv, int64_t heads, bool causal) {
  const std::vector<Tensor> per_head = split_heads(qkv, heads);  // [B, H, T, Dh]
  const Tensor y = scaled_dot_product_attention(per_head[0], per_head[1], per_head[2], causal);
  return permute(y, {0, 2, 1, 3}).reshape({qkv.size(0), qkv.size(1), qkv.size(2) / 3});
}

// The rows of q in qkv [B, T, 3C] (k and v: C and 2C further) and of the heads in [B, T, C].
attention::HeadRows packed_rows(const attention::Dims& d, int64_t heads, int64_t width) {
  return attention::HeadRows{
      .heads = heads, .batch_stride = d.t * width, .head_stride = d.dh, .row_stride = width};
}

struct MultiHeadAttentionBackward : autograd::Node {
  autograd::SavedTensor qkv, lse;
  attention::Dims d;
  int64_t heads = 1;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor x = qkv.get();
    const Tensor g = grads[0].to(DType::bf16).detach();
    const int64_t c = x.size(2) / 3;
    Tensor dqkv = empty(x.shape(), DType::bf16);
    const bfloat16* in = x.data<bfloat16>();
    bfloat16* out = dqkv.data<bfloat16>();
    attention::tiled_bf16_backward(d, in, in + c, in + 2 * c, packed_rows(d, heads, 3 * c),
                                   lse.get().data<float>(), g.data<bfloat16>(),
                                   packed_rows(d, heads, c), out, out + c, out + 2 * c);
    return {dqkv};
  }
  void release() override {
    qkv.reset();
    lse.reset();
  }
};

}  // namespace

Tensor multi_head_attention(const Tensor& qkv_in, int64_t heads, bool causal) {
  constexpr const char* op = "multi_head_attention";
  MIXP_CHECK(qkv_in.defined(), op, ": the input is undefined");
  MIXP_CHECK(qkv_in.ndim() == 3 && qkv_in.size(2) % 3 == 0 && qkv_in.numel() > 0, op,
             ": the input must be [B, T, 3C] with every size at least 1, got ",
             qkv_in.shape().to_string());
  const int64_t c = qkv_in.size(2) / 3;
  MIXP_CHECK(heads >= 1 && c % heads == 0, op, ": ", heads,
             " heads do not divide the width C = ", c, " of input ", qkv_in.shape().to_string());
  // FP8 recipes quantize the attention's own inputs: the composition keeps their path. FP4
  // recipes keep attention in bf16.
  if (const amp::Fp8State* fp8 = amp::fp8_active(); fp8 && !fp8->recipe().fp4)
    return composed(qkv_in, heads, causal);
  const auto cast = amp::autocast_inputs(OpKind::multi_head_attention, {&qkv_in});
  const Tensor& qkv = cast[0];
  const int64_t b = qkv.size(0), t = qkv.size(1);
  const attention::Dims d{.bh = b * heads, .t = t, .dh = c / heads, .causal = causal};
  if (reference_mode() || qkv.dtype() != DType::bf16 || !attention::tiled_bf16_applies(d)) {
    return cast.output(composed(qkv, heads, causal));
  }
  Tensor out = empty(Shape{b, t, c}, DType::bf16);
  Tensor lse = empty(Shape{d.bh, t}, DType::f32);
  {
    NoGradGuard no_grad;
    const bfloat16* in = qkv.data<bfloat16>();
    attention::tiled_bf16_forward(d, in, in + c, in + 2 * c, packed_rows(d, heads, 3 * c),
                                  out.data<bfloat16>(), packed_rows(d, heads, c),
                                  lse.data<float>());
  }
  if (auto node = autograd::make_node<MultiHeadAttentionBackward>(op, {&qkv})) {
    node->qkv = autograd::SavedTensor(qkv);
    node->lse = autograd::SavedTensor(lse);
    node->d = d;
    node->heads = heads;
    autograd::set_history(out, node);
  }
  return cast.output(out);
}

}  // namespace mixp::ops
