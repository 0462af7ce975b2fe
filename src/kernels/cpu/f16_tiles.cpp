// kernels/f16_tiles.h's shape rule and workspace size, outside the AVX-512 file: they run on
// any CPU, before the registry has chosen.
#include "kernels/f16_tiles.h"

#include <algorithm>

namespace mixp::kernels {

bool f16_tiles_supported(const GemmShape& s) {
  return s.batch == 1 && !s.trans_a && s.m >= 1 && s.m <= kF16TileMaxRows && s.k >= 1 &&
         s.k <= 4096 && s.n >= 1;
}

// Per thread: A widened and one panel of B.
int64_t f16_tiles_workspace_bytes(const GemmShape& s, int threads) {
  return int64_t(sizeof(float)) * std::max(threads, 1) * (s.m * s.k + s.k * 64);
}

}  // namespace mixp::kernels
