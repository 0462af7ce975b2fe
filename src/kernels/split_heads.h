// The copies behind split_heads: the q, k and v of multi-head attention out of one packed
// projection, and their gradients back into it. Private to mixp.
#pragma once

#include "kernels/registry.h"

namespace mixp::kernels {

/// From qkv [B, T, 3C], the parts [B, heads, T, C / heads]: q from columns [0, C), k from
/// [C, 2C), v from [2C, 3C), head h of a part from its columns [h Dh, (h + 1) Dh), each element
/// copied bit for bit (any dtype, the same in all four). Every tensor is contiguous.
using SplitHeadsFn = void(const Tensor& qkv, int64_t heads, Tensor& q, Tensor& k, Tensor& v);
extern Kernel<SplitHeadsFn> split_heads;

/// The inverse of split_heads: q, k and v written into their columns of qkv. A part that is
/// undefined leaves its columns of qkv as they are.
using MergeHeadsFn = void(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                          Tensor& qkv);
extern Kernel<MergeHeadsFn> merge_heads;

}  // namespace mixp::kernels
