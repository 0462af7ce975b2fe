// bf16 products with a bf16 result on AVX-512 BF16, from mixp's own pair tiles
// (kernels/pair_gemm.h): C = A op(B) (+ bias), the sums in fp32 and each rounded once to bf16
// (nearest even, subnormals kept). The linear layers' forward (B = W^T) and input-gradient
// (B = W) products of a gpt step, where oneDNN's brgemm ran them at about 80% of the peak.
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

// k up to 4096: a panel (k / 2 pairs of 64 columns) then fits in L2 with its block of A. At
// k = 4096 the tiles measured 0.84-0.91x oneDNN's time, at 8192 1.03x, where oneDNN blocks k.
bool matmul_pairs_supported(const GemmShape& s) {
  return s.batch == 1 && !s.trans_a && s.m >= 1 && s.k >= 2 && s.k <= 4096 && s.k % 2 == 0 &&
         s.n >= 16 && s.n % 16 == 0 && gemm_fast_has_bf16();
}

int64_t matmul_pairs_workspace_bytes(const GemmShape& s) {
  return int64_t(sizeof(uint16_t)) * ((s.n + kPanel - 1) / kPanel) * panel_elements(s.k);
}

void matmul_pairs_bf16(const GemmShape& s, const void* a_bits, const void* b_bits, void* c_bits,
                       const float* bias, void* workspace, int threads) {
  MIXP_ASSERT(matmul_pairs_supported(s) && threads >= 1, "matmul_pairs_bf16: m ", s.m, " n ", s.n,
              " k ", s.k, " batch ", s.batch, " trans_a ", s.trans_a, " threads ", threads);
  const auto* a = static_cast<const uint16_t*>(a_bits);
  const auto* b = static_cast<const uint16_t*>(b_bits);
  auto* c = static_cast<uint16_t*>(c_bits);
  auto* panels = static_cast<uint16_t*>(workspace);
  const int64_t strips = (s.n + kPanel - 1) / kPanel;
#pragma omp parallel num_threads(threads)
  {
    const int parts = omp_get_num_threads(), part = omp_get_thread_num();
#pragma omp for schedule(static)
    for (int64_t j = 0; j < strips; ++j) {
      const int64_t cols = std::min(kPanel, s.n - j * kPanel);
      uint16_t* panel = panels + j * panel_elements(s.k);
      if (s.trans_b) {  // B stored [n][k]: rows j * 64 on of it, by pairs of their columns
        avx512_bf16::pack_column_pairs(b + j * kPanel * s.k, s.k, cols, s.k, panel, 2 * cols);
      } else {  // B stored [k][n]: columns j * 64 on, by pairs of rows
        avx512_bf16::pack_row_pairs(b + j * kPanel, s.n, s.k, cols, panel, 2 * cols);
      }
    }  // the implied barrier: every panel is packed before any product reads it
    const int64_t tiles = (s.m + kRowTile - 1) / kRowTile, per = (tiles + parts - 1) / parts;
    const int64_t first = std::min(s.m, part * per * kRowTile);
    const int64_t last = std::min(s.m, (part + 1) * per * kRowTile);
    for (int64_t i0 = first; i0 < last; i0 += kBlockRows) {
      const int64_t rows = std::min(kBlockRows, last - i0);
      for (int64_t j = 0; j < strips; ++j) {
        const int64_t cols = std::min(kPanel, s.n - j * kPanel);
        PairGemm g;
        g.a = reinterpret_cast<const uint32_t*>(a + i0 * s.k);
        g.a_row = s.k / 2;
        g.a_pair = 1;
        g.b = panels + j * panel_elements(s.k);
        g.ldb = 2 * cols;
        g.c_bf16 = c + i0 * s.n + j * kPanel;
        g.bias = bias ? bias + j * kPanel : nullptr;
        g.ldc = s.n;
        g.m = rows;
        g.n = cols;
        g.pairs = s.k / 2;
        avx512_bf16::pair_gemm(g);
      }
    }
  }
}

}  // namespace mixp::kernels
