// bf16 products with a bf16 result on AVX-512 BF16, from mixp's own pair tiles
// (kernels/pair_gemm.h): C = A op(B) (+ bias), the sums in fp32 and each rounded once to bf16
// (nearest even, subnormals kept). The linear layers' forward (B = W^T) and input-gradient
// (B = W) products of a gpt step, where oneDNN's brgemm ran them at about 80% of the peak, and
// those of an autocast linear whose weight is fp32: the packing rounds it to bf16, so no bf16
// copy of the weight is made.
//
// A's rows already hold their k in pairs, so A is read in place, as the broadcast operand. B is
// packed once per call into panels of 64 columns, [k / 2][64][2] (for a weight, about 1 MiB),
// the threads sharing the packing. Each thread then takes a range of C's rows and, for blocks
// of kBlockRows rows (their A in L2), runs every panel over the block: a tile of 6 x 64 sums
// stays in registers over all of k, then is rounded and stored. One parallel region per call.
#include <omp.h>

#include <algorithm>

#include "kernels/gemm.h"
#include "kernels/pair_gemm.h"
#include "mixp/error.h"

namespace mixp::kernels {
namespace {

constexpr int64_t kPanel = 64, kRowTile = 6;
// 96 rows of A: 288 KiB for k = 1536, beside one 192 KiB panel in L2.
constexpr int64_t kBlockRows = 96;

int64_t panel_elements(int64_t k) { return k * kPanel; }  // k / 2 pairs of 64 x 2

}  // namespace

namespace {

// Up to 64 rows with B stored [n][k] (a linear layer's forward, B = W^T), the roles turn: C^T =
// B^T A^T, the weight's rows the broadcast operand, read (and, from fp32, rounded) once each
// straight from memory, and A packed as the one panel of 64 columns. Packing the weight instead
// cost more than the product at 64 rows: each packed value serves only 64 rows.
bool weight_rows(const GemmShape& s) { return s.trans_b && s.m <= kPanel; }

}  // namespace

// k up to 4096: a panel (k / 2 pairs of 64 columns) then fits in L2 with its block of A. At
// k = 4096 the tiles measured 0.84-0.91x oneDNN's time, at 8192 1.03x, where oneDNN blocks k.
// The panels need whole vectors of n; the weight_rows path takes any n, since B's rows are
// its tiles' rows (a classifier's 10 outputs: one region of oneDNN and a bf16 copy of the
// weight less per step).
bool matmul_pairs_supported(const GemmShape& s) {
  return s.batch == 1 && !s.trans_a && s.m >= 1 && s.k >= 2 && s.k <= 4096 && s.k % 2 == 0 &&
         s.n >= 1 && (weight_rows(s) || (s.n >= 16 && s.n % 16 == 0)) && gemm_fast_has_bf16();
}

namespace {

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

struct Range {
  int64_t begin, end;
};

// Part `part` of `parts` of [0, n), in whole units of `unit` but the last.
Range share(int64_t n, int64_t unit, int part, int parts) {
  const int64_t units = (n + unit - 1) / unit, per = (units + parts - 1) / parts;
  return {.begin = std::min(n, part * per * unit), .end = std::min(n, (part + 1) * per * unit)};
}

}  // namespace

int64_t matmul_pairs_workspace_bytes(const GemmShape& s, int threads) {
  if (weight_rows(s)) {  // the fp32 sums of C^T [n][m rounded up to 16], and A's panel per thread
    const int64_t width = round_up(s.m, 16);
    return int64_t(sizeof(float)) * s.n * width +
           int64_t(sizeof(uint16_t)) * std::max(threads, 1) * s.k * width;
  }
  return int64_t(sizeof(uint16_t)) * ((s.n + kPanel - 1) / kPanel) * panel_elements(s.k);
}

namespace {

// Panel j of B (64 columns from j * 64, by pairs of k), rounded to bf16 as it is packed when B
// is fp32.
void pack_panel(const GemmShape& s, const void* b_data, bool b_f32, int64_t j, uint16_t* panel) {
  const int64_t cols = std::min(kPanel, s.n - j * kPanel);
  if (b_f32) {
    const auto* b = static_cast<const float*>(b_data);
    if (s.trans_b) {  // B stored [n][k]: rows j * 64 on of it, by pairs of their columns
      avx512_bf16::pack_column_pairs_f32(b + j * kPanel * s.k, s.k, cols, s.k, panel, 2 * cols);
    } else {  // B stored [k][n]: columns j * 64 on, by pairs of rows
      avx512_bf16::pack_row_pairs_f32(b + j * kPanel, s.n, s.k, cols, panel, 2 * cols);
    }
    return;
  }
  const auto* b = static_cast<const uint16_t*>(b_data);
  if (s.trans_b) {
    avx512_bf16::pack_column_pairs(b + j * kPanel * s.k, s.k, cols, s.k, panel, 2 * cols);
  } else {
    avx512_bf16::pack_row_pairs(b + j * kPanel, s.n, s.k, cols, panel, 2 * cols);
  }
}

// Rows [first, last) of C by panel j.
void run_panel(const GemmShape& s, const uint16_t* a, const uint16_t* panel, int64_t j,
               int64_t first, int64_t last, uint16_t* c, const float* bias) {
  PairGemm g;
  g.a = reinterpret_cast<const uint32_t*>(a + first * s.k);
  g.a_row = s.k / 2;
  g.a_pair = 1;
  g.b = panel;
  g.ldb = 2 * std::min(kPanel, s.n - j * kPanel);
  g.c_bf16 = c + first * s.n + j * kPanel;
  g.bias = bias ? bias + j * kPanel : nullptr;
  g.ldc = s.n;
  g.m = last - first;
  g.n = std::min(kPanel, s.n - j * kPanel);
  g.pairs = s.k / 2;
  avx512_bf16::pair_gemm(g);
}

// The weight_rows path: each thread packs all of A by pairs of its columns into a panel of its
// own (its padding columns zero), runs the tiles of its rows of B^T (in units of 48, whole
// tiles of 6 and whole blocks of 16 for the transposition) and rounds its sums of C^T into its
// columns of C. A shared panel, each thread packing its share of A's rows, needs a barrier,
// at which the early thread sleeps (OpenMP's workers do not spin here) until woken, tens of
// microseconds on these VMs; packing all of A twice costs about 1% of an mlp amp-bf16 step's
// core time instead. Every sum is the same as the panels' path gives: vdpbf16ps pairs the same
// two products.
void matmul_weight_rows(const GemmShape& s, const uint16_t* a, const void* b_data, bool b_f32,
                        uint16_t* c, const float* bias, void* workspace, bool parallel,
                        int threads) {
  const int64_t width = round_up(s.m, 16), pairs = s.k / 2;
  float* sums = static_cast<float*>(workspace);
  auto* panels = reinterpret_cast<uint16_t*>(sums + s.n * width);
#pragma omp parallel num_threads(threads) if (parallel)
  {
    const int parts = omp_get_num_threads(), part = omp_get_thread_num();
    const Range mine = share(s.n, 48, part, parts);
    if (mine.end > mine.begin) {
      uint16_t* panel = panels + part * s.k * width;
      avx512_bf16::pack_column_pairs(a, s.k, s.m, s.k, panel, 2 * width);
      if (width > s.m) {
        for (int64_t p = 0; p < pairs; ++p) {
          std::fill(panel + p * 2 * width + 2 * s.m, panel + (p + 1) * 2 * width, uint16_t(0));
        }
      }
      PairGemm g;
      if (b_f32) {
        g.a_f32 = static_cast<const float*>(b_data) + mine.begin * s.k;
      } else {
        g.a = reinterpret_cast<const uint32_t*>(static_cast<const uint16_t*>(b_data) +
                                                mine.begin * s.k);
      }
      g.a_row = pairs;
      g.a_pair = 1;
      g.b = panel;
      g.ldb = 2 * width;
      g.c = sums + mine.begin * width;
      g.ldc = width;
      g.m = mine.end - mine.begin;
      g.n = width;
      g.pairs = pairs;
      avx512_bf16::pair_gemm(g);
      avx512_bf16::transpose_to_bf16(sums + mine.begin * width, width, mine.end - mine.begin, s.m,
                                     bias ? bias + mine.begin : nullptr, c + mine.begin, s.n);
    }
  }
}

}  // namespace

void matmul_pairs_bf16(const GemmShape& s, const void* a_bits, const void* b_data, DType b_dtype,
                       void* c_bits, const float* bias, void* workspace, int threads) {
  MIXP_ASSERT(matmul_pairs_supported(s) && threads >= 1 &&
                  (b_dtype == DType::bf16 || b_dtype == DType::f32),
              "matmul_pairs_bf16: m ", s.m, " n ", s.n, " k ", s.k, " batch ", s.batch,
              " trans_a ", s.trans_a, " threads ", threads, " B ", name_of(b_dtype));
  const auto* a = static_cast<const uint16_t*>(a_bits);
  auto* c = static_cast<uint16_t*>(c_bits);
  auto* panels = static_cast<uint16_t*>(workspace);
  const bool b_f32 = b_dtype == DType::f32;
  const int64_t strips = (s.n + kPanel - 1) / kPanel;
  // A region costs tens of microseconds on these machines; small products run on one thread.
  const bool parallel = threads > 1 && double(s.m) * double(s.n) * double(s.k) >= double(1 << 22);
  // Up to one block of rows (a batch of 64 images), the threads split the panels instead of the
  // rows: each packs its panels and runs all rows over each while it is in L2, with no barrier.
  // Every element's sum is the same either way: tiles start at multiples of 6 rows in both.
  const bool split_panels = s.m <= kBlockRows && strips >= threads;
  if (weight_rows(s)) {
    matmul_weight_rows(s, a, b_data, b_f32, c, bias, workspace, parallel, threads);
    return;
  }
#pragma omp parallel num_threads(threads) if (parallel)
  {
    const int parts = omp_get_num_threads(), part = omp_get_thread_num();
    if (split_panels) {
#pragma omp for schedule(static) nowait
      for (int64_t j = 0; j < strips; ++j) {
        uint16_t* panel = panels + j * panel_elements(s.k);
        pack_panel(s, b_data, b_f32, j, panel);
        run_panel(s, a, panel, j, 0, s.m, c, bias);
      }
    } else {
#pragma omp for schedule(static)
      for (int64_t j = 0; j < strips; ++j) {
        pack_panel(s, b_data, b_f32, j, panels + j * panel_elements(s.k));
      }  // the implied barrier: every panel is packed before any product reads it
      const int64_t tiles = (s.m + kRowTile - 1) / kRowTile, per = (tiles + parts - 1) / parts;
      const int64_t first = std::min(s.m, part * per * kRowTile);
      const int64_t last = std::min(s.m, (part + 1) * per * kRowTile);
      for (int64_t i0 = first; i0 < last; i0 += kBlockRows) {
        const int64_t rows = std::min(kBlockRows, last - i0);
        for (int64_t j = 0; j < strips; ++j) {
          run_panel(s, a, panels + j * panel_elements(s.k), j, i0, i0 + rows, c, bias);
        }
      }
    }
  }
}

}  // namespace mixp::kernels
