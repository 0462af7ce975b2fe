// split_heads: the q, k and v of multi-head attention from one packed projection, in one pass.
// Shape contract: qkv [B, T, 3C] of any dtype, heads >= 1 dividing C; the result is three
// tensors [B, heads, T, C / heads] (copies): q from columns [0, C), k from [C, 2C), v from
// [2C, 3C), head h from its part's columns [h Dh, (h + 1) Dh). The same values as
// split(qkv, C, 2) followed by reshape [B, T, heads, Dh] and permute {0, 2, 1, 3}, which copies
// twice each way; this reads and writes each element once.
// Backward: the three gradients put back into [B, T, 3C] in one pass, zeros for a part that
// got none.
#include <cstring>

#include "ops/op_helpers.h"

namespace mixp::ops {
namespace {

struct Heads {
  int64_t batch, t, c, heads, head_size;
};

// Row (b, s) of the packed [B, T, 3C] holds, per part and head, head_size contiguous elements
// that belong at (b, head, s) of that part's [B, heads, T, Dh]. to_packed: the other way.
void move_heads(const Heads& h, size_t element, char* packed, char* const parts[3],
                bool to_packed) {
  const size_t run = size_t(h.head_size) * element;
  kernels::parallel_for(
      h.batch * h.t, std::max<int64_t>(1, 4096 / (3 * h.c)), [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
          const int64_t b = row / h.t, s = row % h.t;
          char* from = packed + size_t(row * 3 * h.c) * element;
          for (int part = 0; part < 3; ++part) {
            if (parts[part] == nullptr) continue;
            for (int64_t head = 0; head < h.heads; ++head) {
              char* packed_run = from + size_t(part * h.c + head * h.head_size) * element;
              char* part_run =
                  parts[part] + size_t(((b * h.heads + head) * h.t + s) * h.head_size) * element;
              if (to_packed) {
                std::memcpy(packed_run, part_run, run);
              } else {
                std::memcpy(part_run, packed_run, run);
              }
            }
          }
        }
      });
}

struct SplitHeadsBackward : autograd::Node {
  Heads h{};
  DType dtype = DType::f32;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor dqkv = zeros(Shape{h.batch, h.t, 3 * h.c}, dtype);
    std::vector<Tensor> g(3);
    char* parts[3] = {nullptr, nullptr, nullptr};
    for (size_t i = 0; i < 3; ++i) {
      if (!grads[i].defined()) continue;
      g[i] = grads[i].to(dtype).detach();
      parts[i] = static_cast<char*>(g[i].raw_data());
    }
    move_heads(h, size_t(size_of(dtype)), static_cast<char*>(dqkv.raw_data()), parts, true);
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
  const Heads h{
      .batch = qkv.size(0), .t = qkv.size(1), .c = c, .heads = heads, .head_size = c / heads};
  std::vector<Tensor> out;
  char* parts[3];
  for (int i = 0; i < 3; ++i) {
    out.push_back(empty(Shape{h.batch, heads, h.t, h.head_size}, qkv.dtype()));
    parts[i] = static_cast<char*>(out.back().raw_data());
  }
  move_heads(h, size_t(size_of(qkv.dtype())),
             const_cast<char*>(static_cast<const char*>(qkv.raw_data())), parts, false);
  if (auto node = autograd::make_node<SplitHeadsBackward>("split_heads", {&qkv})) {
    node->num_outputs = 3;
    node->h = h;
    node->dtype = qkv.dtype();
    for (size_t i = 0; i < 3; ++i) autograd::set_history(out[i], node, uint32_t(i));
  }
  return cast.output(out);
}

}  // namespace mixp::ops
