// The copy behind permute and transpose. Private to mixp.
#pragma once

#include <vector>

#include "kernels/registry.h"

namespace mixp::kernels {

/// out = x with its dimensions reordered, both contiguous: out.shape[d] = x.shape[order[d]],
/// each element copied bit for bit (any dtype, the same in both). order is a permutation of
/// x's dimensions.
using PermuteFn = void(const Tensor& x, const std::vector<int>& order, Tensor& out);
extern Kernel<PermuteFn> permute_copy;

}  // namespace mixp::kernels
