// The tiled bf16 attention on AVX-512 BF16 (attention_tiled_bf16.cpp): the candidates of
// kernels/scaled_dot_product_attention.h and kernels/multi_head_attention.h for bf16 inputs with
// a head size that is a multiple of 16. Private to mixp's CPU kernels.
#pragma once

#include "kernels/attention_rows.h"

namespace mixp::kernels::attention {

/// q, k, v (rows as `in` says) bf16 -> out (rows as `out_rows` says) bf16 and lse [BH, T] fp32,
/// as the chunked path computes them (P rounded once to bf16 for P V), in blocks of 128 query
/// rows per (batch, head) pair. Causal tiles skip the keys their rows never see. Row strides
/// must be even; Dh a multiple of 16.
void tiled_bf16_forward(const Dims& d, const bfloat16* q, const bfloat16* k, const bfloat16* v,
                        const HeadRows& in, bfloat16* out, const HeadRows& out_rows, float* lse);

/// The gradients of tiled_bf16_forward from dO = g (rows as `g_rows` says), written where `in`
/// says; dq, dk or dv may be null (not needed).
void tiled_bf16_backward(const Dims& d, const bfloat16* q, const bfloat16* k, const bfloat16* v,
                         const HeadRows& in, const float* lse, const bfloat16* g,
                         const HeadRows& g_rows, bfloat16* dq, bfloat16* dk, bfloat16* dv);

}  // namespace mixp::kernels::attention
