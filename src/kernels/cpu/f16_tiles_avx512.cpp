// kernels/f16_tiles.h on AVX-512 F. A tile of up to 6 rows by 64 columns keeps 24 fp32 sums in
// registers: per step of k, 4 loads of the B panel, 6 broadcasts of A and 24 FMAs. Each thread
// widens all of A into a buffer of its own (a batch of 64 rows is 200 KiB at k = 784: cheaper
// than a barrier at which one thread would sleep), then takes panels of 64 columns of C as it
// asks for them: packs the panel's B, rounding fp32 to f16's values (vcvtps2ph to nearest even,
// then back), and runs every row over it while it is in L2. Turning the roles round for a
// layer's forward (C^T = B^T A^T, the weight's rows the broadcast operand, read in place, and A
// transposed into one panel), as the bf16 tiles do up to 64 rows, took 0.99x the time of an
// mlp amp-fp16 step: not worth a second path.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>

#include "kernels/cpu/transpose16_avx512.h"
#include "kernels/f16_tiles.h"

namespace mixp::kernels::avx512 {
namespace {

constexpr int64_t kPanel = 64, kRowTile = 6;

__mmask16 first_lanes(int64_t count) {
  return count >= 16 ? __mmask16(0xffff) : __mmask16((1u << count) - 1);
}

// f16's value of each fp32 lane (nearest even; subnormals, overflow to infinity and NaN as the
// conversion to f16 gives them), back in fp32.
__m512 f16_value(__m512 v) {
  return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// 16 values of B from p (f32 rounded to f16's values, or f16 widened), the first `count` of
// them; the others +0.
__m512 load_b(const void* p, bool b_f32, int64_t count) {
  const __mmask16 m = first_lanes(count);
  if (b_f32) return f16_value(_mm512_maskz_loadu_ps(m, p));
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

const void* b_at(const void* b, bool b_f32, int64_t index) {
  return b_f32 ? static_cast<const void*>(static_cast<const float*>(b) + index)
               : static_cast<const void*>(static_cast<const uint16_t*>(b) + index);
}

// Columns [j0, j0 + cols) of B into panel [k][width] (width: cols rounded up to 16, the padding
// zero). B stored [k][n]: each row's columns as they are. B stored [n][k] (trans_b): 16 of its
// rows by 16 of their columns at a time, transposed in registers.
void pack_panel(const GemmShape& s, const void* b, bool b_f32, int64_t j0, int64_t cols,
                int64_t width, float* panel) {
  if (!s.trans_b) {
    for (int64_t kk = 0; kk < s.k; ++kk) {
      for (int64_t q = 0; q < width; q += 16) {
        const __m512 v = load_b(b_at(b, b_f32, kk * s.n + j0 + q), b_f32, cols - q);
        _mm512_storeu_ps(panel + kk * width + q, v);
      }
    }
    return;
  }
  for (int64_t q = 0; q < width; q += 16) {
    const int64_t rows = std::min<int64_t>(16, cols - q);
    for (int64_t k0 = 0; k0 < s.k; k0 += 16) {
      const int64_t depth = std::min<int64_t>(16, s.k - k0);
      __m512 v[16];
      for (int64_t r = 0; r < 16; ++r) {
        v[r] = r < rows ? load_b(b_at(b, b_f32, (j0 + q + r) * s.k + k0), b_f32, depth)
                        : _mm512_setzero_ps();
      }
      transpose16(v);  // v[t]: term k0 + t of the 16 columns
      for (int64_t t = 0; t < depth; ++t) _mm512_storeu_ps(panel + (k0 + t) * width + q, v[t]);
    }
  }
}

// op(A) f16, widened exactly into wide [m][k]: A [m][k] as it is; A [k][m] (trans_a) 16 x 16
// at a time, transposed in registers.
void widen_a(const GemmShape& s, const uint16_t* a, float* wide) {
  if (!s.trans_a) {
    const int64_t total = s.m * s.k;
    for (int64_t i = 0; i < total; i += 16) {
      const __mmask16 m = first_lanes(total - i);
      _mm512_mask_storeu_ps(wide + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, a + i)));
    }
    return;
  }
  for (int64_t i0 = 0; i0 < s.m; i0 += 16) {
    const int64_t width = std::min<int64_t>(16, s.m - i0);
    for (int64_t k0 = 0; k0 < s.k; k0 += 16) {
      const int64_t depth = std::min<int64_t>(16, s.k - k0);
      __m512 v[16];
      for (int64_t t = 0; t < 16; ++t) {
        v[t] = t < depth ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(first_lanes(width),
                                                                    a + (k0 + t) * s.m + i0))
                         : _mm512_setzero_ps();
      }
      transpose16(v);  // v[r]: row i0 + r of op(A), terms k0 on
      for (int64_t r = 0; r < width; ++r) {
        _mm512_mask_storeu_ps(wide + (i0 + r) * s.k + k0, first_lanes(depth), v[r]);
      }
    }
  }
}

struct Tile {
  const float* a;      // the tile's first row of widened A, rows s.k apart
  const float* panel;  // [k][ldb]
  int64_t k, ldb;
  int64_t cols;       // valid columns of the tile, at most 16 NR
  const float* bias;  // the tile's first column's, or null
  void* c;            // the tile's first element of C, rows ldc apart
  int64_t ldc;
  F16TileOut out;
};

// MR rows by 16 NR columns: the sums in registers over all of k, then plus the bias and stored
// into C as t.out says, the last vector masked to the valid columns.
template <int MR, int NR>
void tile(const Tile& t) {
  __m512 acc[MR][NR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 4
    for (int q = 0; q < NR; ++q) acc[r][q] = _mm512_setzero_ps();
  }
  const float* bp = t.panel;
  for (int64_t kk = 0; kk < t.k; ++kk) {
    __m512 bv[NR];
#pragma GCC unroll 4
    for (int q = 0; q < NR; ++q) bv[q] = _mm512_loadu_ps(bp + 16 * q);
    bp += t.ldb;
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(t.a[r * t.k + kk]);
#pragma GCC unroll 4
      for (int q = 0; q < NR; ++q) acc[r][q] = _mm512_fmadd_ps(av, bv[q], acc[r][q]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 4
    for (int q = 0; q < NR; ++q) {
      const __mmask16 m = first_lanes(t.cols - 16 * q);
      const __m512 v =
          t.bias ? _mm512_add_ps(acc[r][q], _mm512_maskz_loadu_ps(m, t.bias + 16 * q)) : acc[r][q];
      if (t.out == F16TileOut::f16) {
        uint16_t* row = static_cast<uint16_t*>(t.c) + r * t.ldc + 16 * q;
        _mm256_mask_storeu_epi16(row, m,
                                 _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      } else {
        float* row = static_cast<float*>(t.c) + r * t.ldc + 16 * q;
        _mm512_mask_storeu_ps(row, m, t.out == F16TileOut::f32 ? v : f16_value(v));
      }
    }
  }
}

using TileFn = void (*)(const Tile&);

template <int MR>
TileFn tile_for(int64_t nr) {
  return nr == 1 ? tile<MR, 1> : nr == 2 ? tile<MR, 2> : nr == 3 ? tile<MR, 3> : tile<MR, 4>;
}

TileFn tile_for(int64_t mr, int64_t nr) {
  switch (mr) {
    case 1: return tile_for<1>(nr);
    case 2: return tile_for<2>(nr);
    case 3: return tile_for<3>(nr);
    case 4: return tile_for<4>(nr);
    case 5: return tile_for<5>(nr);
    default: return tile_for<6>(nr);
  }
}

// Every row of C by panel j.
void run_panel(const GemmShape& s, const float* wide_a, const float* panel, int64_t j0,
               int64_t cols, int64_t width, void* c, F16TileOut out, const float* bias) {
  Tile t{.a = nullptr,
         .panel = panel,
         .k = s.k,
         .ldb = width,
         .cols = cols,
         .bias = bias ? bias + j0 : nullptr,
         .c = nullptr,
         .ldc = s.n,
         .out = out};
  const TileFn full = tile_for(kRowTile, width / 16);
  for (int64_t i = 0; i < s.m; i += kRowTile) {
    const int64_t rows = std::min(kRowTile, s.m - i);
    t.a = wide_a + i * s.k;
    t.c = out == F16TileOut::f16 ? static_cast<void*>(static_cast<uint16_t*>(c) + i * s.n + j0)
                                 : static_cast<void*>(static_cast<float*>(c) + i * s.n + j0);
    (rows == kRowTile ? full : tile_for(rows, width / 16))(t);
  }
}

}  // namespace

void matmul_f16_tiles(const GemmShape& s, const uint16_t* a, const void* b, DType b_dtype, void* c,
                      F16TileOut out, const float* bias, void* workspace, int threads) {
  const bool b_f32 = b_dtype == DType::f32;
  const int64_t strips = (s.n + kPanel - 1) / kPanel;
  const int64_t per_thread = s.m * s.k + s.k * kPanel;
  // A region costs tens of microseconds on these machines; small products run on one thread.
  const bool parallel =
      threads > 1 && strips > 1 && double(s.m) * double(s.n) * double(s.k) >= double(1 << 22);
#pragma omp parallel num_threads(threads) if (parallel)
  {
    float* wide_a = static_cast<float*>(workspace) + omp_get_thread_num() * per_thread;
    float* panel = wide_a + s.m * s.k;
    widen_a(s, a, wide_a);
#pragma omp for schedule(dynamic, 1) nowait
    for (int64_t j = 0; j < strips; ++j) {
      const int64_t j0 = j * kPanel, cols = std::min(kPanel, s.n - j0);
      const int64_t width = (cols + 15) / 16 * 16;
      pack_panel(s, b, b_f32, j0, cols, width, panel);
      run_panel(s, wide_a, panel, j0, cols, width, c, out, bias);
    }
  }
}

}  // namespace mixp::kernels::avx512
