// The AVX-512 implementation of the GradScaler's check-and-unscale (kernels/amp_unscale.h) for
// fp32 gradients. Light on purpose: the ISA file includes it, and no inline function may cross
// files compiled for different ISAs. Private to mixp.
#pragma once

#include <cstdint>

namespace mixp::kernels::avx512 {

/// Checks x[0, n) for inf and NaN and, when `multiply`, sets x[i] = x[i] * inv (one correctly
/// rounded fp32 product, as the scalar loop's), 16 elements a step in one pass over memory.
/// Returns the index of the first non-finite element, or -1.
int64_t unscale_f32(float* x, int64_t n, float inv, bool multiply);

}  // namespace mixp::kernels::avx512
