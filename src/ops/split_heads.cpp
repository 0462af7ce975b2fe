// split_heads: the q, k and v of multi-head attention from one packed projection, in one pass.
// Shape contract: qkv [B, T, 3C] of any dtype, heads >= 1 dividing C; the result is three
// tensors [B, heads, T, C / heads] (copies): q from columns [0, C), k from [C, 2C), v from
// [2C, 3C), head h from its part's columns [h Dh, (h + 1) Dh). The same values as
// split(qkv, C, 2) followed by reshape [B, T, heads, Dh] and permute {0, 2, 1, 3}, which copies
// twice each way; this reads and writes each element once.
// Backward: the three gradients put back into [B, T, 3C] in one pass, zeros for a part that
// got none.
#include "kernels/split_heads.h"
#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

struct SplitHeadsBackward : autograd::Node {
  Shape qkv_shape;
  int64_t heads = 1;
  DType dtype = DType::f32;
  Device device = Device::cpu;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor dqkv = zeros(qkv_shape, dtype, MemoryTag::activation, device);
    std::vector<Tensor> g(3);
    for (size_t i = 0; i < 3; ++i) {
      if (grads[i].defined()) g[i] = grads[i].to(dtype).detach();
    }
    kernels::merge_heads(g[0], g[1], g[2], heads, dqkv);
    return {dqkv};
  }
};

}  // namespace

std::vector<Tensor> split_heads(const Tensor& qkv_in, int64_t heads) {
  const auto cast = amp::autocast_inputs(OpKind::split_heads, {&qkv_in});
  const Tensor& qkv = cast[0];
  MIXP_CHECK(qkv.defined(), "split_heads: the input is undefined");
  MIXP_CHECK(qkv.ndim() == 3 && qkv.size(2) % 3 == 0,
             "split_heads: the input must be [B, T, 3C], got ", qkv.shape().to_string());
  const int64_t c = qkv.size(2) / 3;
  MIXP_CHECK(heads >= 1 && c % heads == 0, "split_heads: ", heads,
             " heads do not divide the width C = ", c, " of input ", qkv.shape().to_string());
  std::vector<Tensor> out;
  for (int i = 0; i < 3; ++i)
    out.push_back(empty(Shape{qkv.size(0), heads, qkv.size(1), c / heads}, qkv.dtype(), MemoryTag::activation, qkv.device()));
  kernels::split_heads(qkv, heads, out[0], out[1], out[2]);
  if (auto node = autograd::make_node<SplitHeadsBackward>("split_heads", {&qkv})) {
    node->num_outputs = 3;
    node->qkv_shape = qkv.shape();
    node->heads = heads;
    node->dtype = qkv.dtype();
    node->device = qkv.device();
    for (size_t i = 0; i < 3; ++i) autograd::set_history(out[i], node, uint32_t(i));
  }
  return cast.output(out);
}

}  // namespace mixp::ops
