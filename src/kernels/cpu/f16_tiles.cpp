// kernels/f16_tiles.h's shape rule and workspace size, outside the AVX-512 file: they run on
// any CPU, before the registry has chosen.
#include "kernels/f16_tiles.h"

#include <algorithm>

namespace mixp::kernels {

bool f16_tiles_supported(const GemmShape& s) {
  const int64_t batch = s.trans_a ? s.k : s.m, other = s.trans_a ? s.m : s.k;
  return s.batch == 1 && s.m >= 1 && s.k >= 1 && s.n >= 1 && batch <= kF16TileBatch &&
         other <= 4096;
}

// Per thread: A widened and one panel of B.
int64_t f16_tiles_workspace_bytes(const GemmShape& s, int threads) {
  return int64_t(sizeof(float)) * std::max(threads, 1) * (s.m * s.k + s.k * 64);
}

}  // namespace mixp::kernels
