// The CPU candidates of kernels/multi_head_attention.h.
#include "kernels/multi_head_attention.h"

#include <cstring>

#include "core/parallel.h"
#include "kernels/cpu/attention_tiled_bf16.h"
#include "kernels/scaled_dot_product_attention.h"

namespace mixp::kernels {
namespace {

using attention::Dims;
using attention::HeadRows;

int64_t width_of(const Tensor& qkv) { return qkv.size(2) / 3; }  // C

// The rows of q in qkv [B, T, 3C] (k and v: C and 2C further), and of the heads in [B, T, C].
HeadRows packed_rows(const Dims& d, int64_t heads, int64_t row_width) {
  return HeadRows{.heads = heads,
                  .batch_stride = d.t * row_width,
                  .head_stride = d.dh,
                  .row_stride = row_width};
}

// body(strided, dense) for the first element of every row of every (batch, head) pair: its
// index in the strided rows (`rows`, from element `offset`) and in a dense [BH, T, Dh].
template <bool Parallel, typename Body>
void for_each_head_row(const Dims& d, int64_t offset, const HeadRows& rows, Body body) {
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t pair = begin; pair < end; ++pair) {
      for (int64_t i = 0; i < d.t; ++i) {
        body(offset + rows.at(pair) + i * rows.row_stride, (pair * d.t + i) * d.dh);
      }
    }
  };
  if constexpr (Parallel) {
    parallel_for(d.bh, 1, run);
  } else {
    run(0, d.bh);
  }
}

// The heads of `strided` into dense [BH, T, Dh] of the same dtype.
template <bool Parallel>
void gather_heads(const Tensor& strided, int64_t offset, const HeadRows& rows, Tensor& dense,
                  const Dims& d) {
  const int64_t size = size_of(dense.dtype());
  const auto* from = static_cast<const uint8_t*>(strided.raw_data());
  auto* to = static_cast<uint8_t*>(dense.raw_data());
  for_each_head_row<Parallel>(d, offset, rows, [&](int64_t s, int64_t x) {
    std::memcpy(to + x * size, from + s * size, size_t(d.dh * size));
  });
}

// Dense [BH, T, Dh] into the heads of `strided` of the same dtype.
template <bool Parallel>
void scatter_heads(const Tensor& dense, Tensor& strided, int64_t offset, const HeadRows& rows,
                   const Dims& d) {
  const int64_t size = size_of(dense.dtype());
  const auto* from = static_cast<const uint8_t*>(dense.raw_data());
  auto* to = static_cast<uint8_t*>(strided.raw_data());
  for_each_head_row<Parallel>(d, offset, rows, [&](int64_t s, int64_t x) {
    std::memcpy(to + s * size, from + x * size, size_t(d.dh * size));
  });
}

template <bool Parallel>
Tensor dense_head(const Tensor& qkv, int64_t part, const Dims& d) {
  const int64_t c = width_of(qkv);
  Tensor out = empty(Shape{d.bh, d.t, d.dh}, qkv.dtype(), MemoryTag::workspace);
  gather_heads<Parallel>(qkv, part * c, packed_rows(d, c / d.dh, 3 * c), out, d);
  return out;
}

template <bool Parallel>
void split_forward(const Tensor& qkv, const Dims& d, Tensor& out, Tensor& lse) {
  const int64_t c = width_of(qkv);
  const Tensor q = dense_head<Parallel>(qkv, 0, d), k = dense_head<Parallel>(qkv, 1, d);
  const Tensor v = dense_head<Parallel>(qkv, 2, d);
  Tensor heads = empty(Shape{d.bh, d.t, d.dh}, qkv.dtype(), MemoryTag::workspace);
  attention_forward(q, k, v, d, heads, lse);
  scatter_heads<Parallel>(heads, out, 0, packed_rows(d, c / d.dh, c), d);
}

template <bool Parallel>
void split_backward(const Tensor& qkv, const Tensor& lse, const Tensor& g, const Dims& d,
                    Tensor& dqkv) {
  const int64_t c = width_of(qkv), heads = c / d.dh;
  const Tensor q = dense_head<Parallel>(qkv, 0, d), k = dense_head<Parallel>(qkv, 1, d);
  const Tensor v = dense_head<Parallel>(qkv, 2, d);
  Tensor dense_g = empty(Shape{d.bh, d.t, d.dh}, g.dtype(), MemoryTag::workspace);
  gather_heads<Parallel>(g, 0, packed_rows(d, heads, c), dense_g, d);
  Tensor grads[3];
  for (Tensor& t : grads) t = empty(Shape{d.bh, d.t, d.dh}, qkv.dtype(), MemoryTag::workspace);
  attention_backward(q, k, v, lse, dense_g, d, grads[0], grads[1], grads[2]);
  for (int64_t part = 0; part < 3; ++part) {
    scatter_heads<Parallel>(grads[part], dqkv, part * c, packed_rows(d, heads, 3 * c), d);
  }
}

bool tiled_forward_applies(const Tensor& qkv, const Dims& d, const Tensor&, const Tensor&) {
  return qkv.dtype() == DType::bf16 && d.dh % 16 == 0;
}

void tiled_forward(const Tensor& qkv, const Dims& d, Tensor& out, Tensor& lse) {
  const int64_t c = width_of(qkv), heads = c / d.dh;
  const bfloat16* in = qkv.data<bfloat16>();
  attention::tiled_bf16_forward(d, in, in + c, in + 2 * c, packed_rows(d, heads, 3 * c),
                                out.data<bfloat16>(), packed_rows(d, heads, c), lse.data<float>());
}

bool tiled_backward_applies(const Tensor& qkv, const Tensor&, const Tensor&, const Dims& d,
                            const Tensor&) {
  return qkv.dtype() == DType::bf16 && d.dh % 16 == 0;
}

void tiled_backward(const Tensor& qkv, const Tensor& lse, const Tensor& g, const Dims& d,
                    Tensor& dqkv) {
  const int64_t c = width_of(qkv), heads = c / d.dh;
  const bfloat16* in = qkv.data<bfloat16>();
  bfloat16* out = dqkv.data<bfloat16>();
  attention::tiled_bf16_backward(d, in, in + c, in + 2 * c, packed_rows(d, heads, 3 * c),
                                 lse.data<float>(), g.data<bfloat16>(), packed_rows(d, heads, c),
                                 out, out + c, out + 2 * c);
}

}  // namespace

Kernel<MultiHeadAttentionForwardFn> multi_head_attention_forward(
    "multi_head_attention_forward",
    {{.name = "tiled_bf16",
      .isa = Isa::avx512_bf16,
      .applies = tiled_forward_applies,
      .fn = tiled_forward},
     {.name = "split", .fn = split_forward<true>},
     {.name = "split_serial", .fn = split_forward<false>, .fallback = true}});

Kernel<MultiHeadAttentionBackwardFn> multi_head_attention_backward(
    "multi_head_attention_backward",
    {{.name = "tiled_bf16",
      .isa = Isa::avx512_bf16,
      .applies = tiled_backward_applies,
      .fn = tiled_backward},
     {.name = "split", .fn = split_backward<true>},
     {.name = "split_serial", .fn = split_backward<false>, .fallback = true}});

}  // namespace mixp::kernels
