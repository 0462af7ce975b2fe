// multi_head_attention: split_heads, scaled_dot_product_attention and the merge of the heads as
// one op (see mixp/ops.h). Shape contract: qkv [B, T, 3C] with every size at least 1 and heads
// >= 1 dividing C; the result is [B, T, C] in the attention's dtype.
// kernels/multi_head_attention.h computes the values of the composed ops, bit for bit: where the
// tiled bf16 attention applies, q, k and v are read in place from qkv (row stride 3C, head h at
// column h Dh of its part), the heads are written into their columns of the result, and
// backward writes the gradient of qkv the same way, without the split's and the merge's copies
// (four passes over qkv or the result in a gpt step); elsewhere (other dtypes, CPUs or head
// sizes, reference mode) the heads are copied out and back around the attention's kernels.
// Saved for backward: qkv and the per-row log-sum-exp, as the attention saves. Under FP8
// recipes it is the composition itself.
#include "kernels/multi_head_attention.h"
#include "mixp/amp/fp8.h"
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

Tensor composed(const Tensor& qkv, int64_t heads, bool causal) {
  const std::vector<Tensor> per_head = split_heads(qkv, heads);  // [B, H, T, Dh]
  const Tensor y = scaled_dot_product_attention(per_head[0], per_head[1], per_head[2], causal);
  return permute(y, {0, 2, 1, 3}).reshape({qkv.size(0), qkv.size(1), qkv.size(2) / 3});
}

struct MultiHeadAttentionBackward : autograd::Node {
  autograd::SavedTensor qkv, lse;
  kernels::attention::Dims d;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor x = qkv.get();
    const Tensor g = grads[0].to(x.dtype()).detach();
    Tensor dqkv = empty(x.shape(), x.dtype(), MemoryTag::activation, x.device());
    kernels::multi_head_attention_backward(x, lse.get(), g, d, dqkv);
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
  const kernels::attention::Dims d{.bh = b * heads, .t = t, .dh = c / heads, .causal = causal};
  Tensor out = empty(Shape{b, t, c}, qkv.dtype(), MemoryTag::activation, qkv.device());
  Tensor lse = empty(Shape{d.bh, t}, detail::accumulation_dtype(qkv.dtype()), MemoryTag::activation, qkv.device());
  {
    NoGradGuard no_grad;
    kernels::multi_head_attention_forward(qkv, d, out, lse);
  }
  if (auto node = autograd::make_node<MultiHeadAttentionBackward>(op, {&qkv})) {
    node->qkv = autograd::SavedTensor(qkv);
    node->lse = autograd::SavedTensor(lse);
    node->d = d;
    autograd::set_history(out, node);
  }
  return cast.output(out);
}

}  // namespace mixp::ops
