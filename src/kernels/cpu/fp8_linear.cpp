// The CPU candidates of kernels/fp8_linear.h: tiles or rows split over the threads, and the
// fallback, the same loops on one thread.
#include "kernels/fp8_linear.h"

#include <algorithm>
#include <cstring>

#include "core/parallel.h"
#include "mixp/error.h"

namespace mixp::kernels {
namespace {

// body(begin, end) over [0, n), split over the threads or on this one.
template <typename Body>
void run_range(int64_t n, int64_t grain, bool parallel, Body body) {
  if (parallel) {
    parallel_for(n, grain, body);
  } else {
    body(0, n);
  }
}

template <bool Parallel>
void add_bias_rows(Tensor& y, const Tensor& bias) {
  const int64_t n = y.size(-1), rows = y.numel() / std::max<int64_t>(n, 1);
  float* yv = y.data<float>();
  const float* bv = bias.data<float>();
  run_range(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)), Parallel,
            [&](int64_t begin, int64_t end) {
              for (int64_t r = begin; r < end; ++r)
                for (int64_t j = 0; j < n; ++j) yv[r * n + j] += bv[j];
            });
}

template <typename T, int64_t kTile>
void transpose_tiles(const T* s, T* o, int64_t batch, int64_t rows, int64_t cols, bool parallel) {
  const int64_t tr = (rows + kTile - 1) / kTile, tc = (cols + kTile - 1) / kTile;
  run_range(batch * tr * tc, 8, parallel, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / (tr * tc), r0 = t / tc % tr * kTile, c0 = t % tc * kTile;
      const int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
      const T* sb = s + b * rows * cols;
      T* ob = o + b * rows * cols;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) ob[c * rows + r] = sb[r * cols + c];
    }
  });
}

template <bool Parallel>
void transpose_last2(const Tensor& src, Tensor& out) {
  const int64_t batch = src.ndim() == 3 ? src.size(0) : 1;
  const int64_t rows = src.size(-2), cols = src.size(-1);
  const int size = size_of(src.dtype());
  MIXP_ASSERT(size == 4 || size == 1, "fp8_transpose_last2 of ", name_of(src.dtype()));
  if (size == 4) {
    transpose_tiles<uint32_t, 32>(static_cast<const uint32_t*>(src.raw_data()),
                                  static_cast<uint32_t*>(out.raw_data()), batch, rows, cols,
                                  Parallel);
  } else {
    transpose_tiles<uint8_t, 64>(static_cast<const uint8_t*>(src.raw_data()),
                                 static_cast<uint8_t*>(out.raw_data()), batch, rows, cols,
                                 Parallel);
  }
}

}  // namespace

Kernel<Fp8AddBiasRowsFn> fp8_add_bias_rows(
    "fp8_add_bias_rows", {{.name = "openmp", .fn = add_bias_rows<true>},
                          {.name = "scalar", .fn = add_bias_rows<false>, .fallback = true}});

Kernel<Fp8TransposeLast2Fn> fp8_transpose_last2(
    "fp8_transpose_last2", {{.name = "openmp", .fn = transpose_last2<true>},
                            {.name = "scalar", .fn = transpose_last2<false>, .fallback = true}});

}  // namespace mixp::kernels
