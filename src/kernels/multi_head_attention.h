// multi_head_attention's arithmetic (ops/multi_head_attention.cpp) on the packed projection,
// chosen by the registry. Private to mixp.
#pragma once

#include "kernels/attention_rows.h"
#include "kernels/registry.h"

namespace mixp::kernels {

/// kernels/scaled_dot_product_attention.h's attention of the heads of qkv [B, T, 3C] (q, k and v
/// of head h at columns h Dh, C + h Dh and 2C + h Dh; C = heads Dh, d.bh = B heads) into out
/// [B, T, C] (head h at columns h Dh), the same bits as splitting the heads, attending and
/// merging them. out has qkv's dtype; lse [BH, T] is f32 (f64 for f64). Candidates:
///   tiled_bf16: bf16 with Dh a multiple of 16 on AVX-512 BF16, reading and writing the heads in
///               place (no copies of the heads);
///   split / split_serial: the heads copied to [BH, T, Dh] and back, around
///               kernels::attention_forward (in parallel, or on one thread: the fallback).
using MultiHeadAttentionForwardFn = void(const Tensor& qkv, const attention::Dims& d, Tensor& out,
                                         Tensor& lse);
extern Kernel<MultiHeadAttentionForwardFn> multi_head_attention_forward;

/// dqkv [B, T, 3C] (qkv's dtype) from qkv, the forward's lse and g = dO [B, T, C] of qkv's dtype,
/// by the same candidates around kernels::attention_backward.
using MultiHeadAttentionBackwardFn = void(const Tensor& qkv, const Tensor& lse, const Tensor& g,
                                          const attention::Dims& d, Tensor& dqkv);
extern Kernel<MultiHeadAttentionBackwardFn> multi_head_attention_backward;

}  // namespace mixp::kernels
