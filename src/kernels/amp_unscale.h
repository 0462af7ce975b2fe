// The GradScaler's kernels: its fused check-and-unscale of a gradient and its count of what
// fp16 would flush. Private to mixp.
#pragma once

#include <cstdint>

#include "kernels/registry.h"

namespace mixp::kernels {

/// Checks every element of `grad` (any floating dtype, FP8 included) for inf and NaN and, when
/// `multiply`, multiplies it by `inv` in place, in fp32 (f64 for f64) with one rounding back
/// to the dtype, in one pass: PyTorch's _amp_foreach_non_finite_check_and_unscale_ for one
/// tensor. Returns the index of the first non-finite element, or -1; the same for any thread
/// count.
using UnscaleAndCheckFn = int64_t(Tensor& grad, float inv, bool multiply);
extern Kernel<UnscaleAndCheckFn> unscale_and_check;

struct FlushCount {
  int64_t flushable = 0;  ///< elements with |g| <= 2^-25, which fp16 rounds to zero
  double max_abs = 0;     ///< the largest finite |g|
};
/// What fp16 would flush of a (scaled) gradient, and its largest finite magnitude.
using CountFp16FlushableFn = FlushCount(const Tensor& grad);
extern Kernel<CountFp16FlushableFn> count_fp16_flushable;

}  // namespace mixp::kernels
