// The 16-point random Hadamard transform of kernels/fp4.h: NVFP4's treatment of the inputs of
// the weight-gradient GEMM, which spreads an outlier over its 16 neighbours before they share a
// block scale.
#include "kernels/cpu/parallel.h"
#include "kernels/fp4.h"

namespace mixp::kernels {

void hadamard16_rows(float* x, int64_t rows, int64_t cols, const float* signs) {
  const int64_t chunks = rows * (cols / 16);
  parallel_for(chunks, 1024, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float* v = x + i * 16;
      float a[16];
      for (int j = 0; j < 16; ++j) a[j] = v[j] * signs[j];
      // Sylvester order: stage h pairs j and j + h within blocks of 2h.
      for (int h = 1; h < 16; h *= 2) {
        for (int j = 0; j < 16; j += 2 * h) {
          for (int k = j; k < j + h; ++k) {
            const float u = a[k], w = a[k + h];
            a[k] = u + w;
            a[k + h] = u - w;
          }
        }
      }
      for (int j = 0; j < 16; ++j) v[j] = a[j] * 0.25f;
    }
  });
}

}  // namespace mixp::kernels
