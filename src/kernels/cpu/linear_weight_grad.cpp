// A linear layer's weight and bias gradients on AVX-512 BF16, as mixp's own blocked product of
// the pair tiles in kernels/pair_gemm.h:
//   dw[o][i] = sum_t dy[t][o] x[t][i],   db[o] = sum_t dy[t][o].
// oneDNN 2.6 runs this pass (its inner product backward) on its older gemm kernel; this one
// takes 0.90-1.04x its time on gpt's shapes, and a gpt step about 5% less
// (docs/performance.md, "The pair tiles").
//
// The sum runs over t, the rows of both operands, so both are packed by pairs of rows, a block
// of kBlockPairs pairs at a time: dy as the broadcast operand (word (o, p) at p * width + o),
// x as the vector one, one panel of 64 columns at a time ([pairs][64][2], 128 KiB, in L2), which
// every row tile of 6 then reads straight through. Packing dy adds its columns to db on the way,
// so the bias costs no pass of its own. Each block's product adds into an fp32 copy of dw; after
// the last block the sums are rounded once to bf16, to nearest even, subnormals kept. An fp32
// dw (an autocast linear's fp32 weight) gets the rounded sums widened back; with one block and
// whole vectors of in, the tiles store them so straight into dw, without the fp32 copy.
//
// Threads take ranges of o (the broadcast rows) when out >= in, else ranges of i; each packs
// the whole of the other operand's block. Every dw and db element is summed in the same order
// whatever the split, so the bits do not depend on the thread count.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/convert_kernels.h"
#include "kernels/gemm.h"
#include "kernels/pair_gemm.h"
#include "mixp/error.h"

namespace mixp::kernels {
namespace {

// 512 pairs: 4 blocks for gpt's 4096 rows, and the fp32 sums read and written 4 times; 128
// and 256 pairs measured 3-5% slower.
constexpr int64_t kBlockPairs = 512;
constexpr int64_t kRowTile = 6, kColumnStrip = 64, kLanes = 16;

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// The fp32 sums' row length: in, padded to whole vectors.
int64_t sums_width(int64_t in) { return round_up(in, kLanes); }

// Row pairs per block: kBlockPairs, or all of them when fewer.
int64_t block_pairs(int64_t rows) { return std::min(kBlockPairs, (rows + 1) / 2); }

// One thread's pack buffers, in bf16 elements: dy's block for all of out (a thread packs at
// most that much) and one panel of x.
int64_t pack_elements(int64_t rows, int64_t out) {
  return 2 * block_pairs(rows) * (out + kColumnStrip);
}

struct Range {
  int64_t begin, end;
};

// Part `part` of `parts` of [0, n), in whole units of `unit` but the last.
Range share(int64_t n, int64_t unit, int part, int parts) {
  const int64_t units = (n + unit - 1) / unit, per = (units + parts - 1) / parts;
  return {.begin = std::min(n, part * per * unit), .end = std::min(n, (part + 1) * per * unit)};
}

// One block into an fp32 dw of whole vectors: the tiles round and widen into dw itself, and no
// fp32 copy of dw is needed.
bool stores_directly(int64_t rows, int64_t in, DType dw_dtype) {
  return dw_dtype == DType::f32 && (rows + 1) / 2 <= kBlockPairs && in % kLanes == 0;
}

int64_t sums_bytes(int64_t rows, int64_t in, int64_t out, DType dw_dtype) {
  return stores_directly(rows, in, dw_dtype) ? 0 : int64_t(sizeof(float)) * out * sums_width(in);
}

}  // namespace

int64_t linear_weight_grad_workspace_bytes(int64_t rows, int64_t in, int64_t out, DType dw_dtype,
                                           int threads) {
  return sums_bytes(rows, in, out, dw_dtype) +
         int64_t(sizeof(uint16_t)) * threads * pack_elements(rows, out);
}

void linear_weight_grad_fast(int64_t rows, int64_t in, int64_t out, const void* dy_bits,
                             const void* x_bits, void* dw_bits, DType dw_dtype, float* db,
                             void* workspace, int threads) {
  MIXP_ASSERT(gemm_fast_has_bf16(), "linear_weight_grad_fast without AVX-512 BF16");
  MIXP_ASSERT(rows >= 1 && in >= 1 && out >= 1 && threads >= 1, "linear_weight_grad_fast: rows ",
              rows, " in ", in, " out ", out, " threads ", threads);
  const auto* dy = static_cast<const uint16_t*>(dy_bits);
  MIXP_ASSERT(dw_dtype == DType::bf16 || dw_dtype == DType::f32,
              "linear_weight_grad_fast: dw of ", name_of(dw_dtype));
  const auto* x = static_cast<const uint16_t*>(x_bits);
  const bool wide = dw_dtype == DType::f32;
  const int64_t pairs = (rows + 1) / 2;
  const bool direct = stores_directly(rows, in, dw_dtype);
  const int64_t ldc = direct ? in : sums_width(in);
  float* sums = direct ? static_cast<float*>(dw_bits) : static_cast<float*>(workspace);
  auto* packs = reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(workspace) +
                                            sums_bytes(rows, in, out, dw_dtype));
  if (db) std::fill(db, db + out, 0.0f);
  const bool split_out = out >= in;
  // A region costs tens of microseconds on these machines; small products run on one thread.
  const bool parallel = threads > 1 && double(rows) * double(in) * double(out) >= 1 << 24;
#pragma omp parallel num_threads(threads) if (parallel)
  {
    const int parts = omp_get_num_threads(), part = omp_get_thread_num();
    const Range o = split_out ? share(out, kRowTile, part, parts) : Range{.begin = 0, .end = out};
    const Range i = split_out ? Range{.begin = 0, .end = in} : share(in, kColumnStrip, part, parts);
    // db's columns this thread sums: its own o, or else its share of them among the threads
    // that have columns of x (they all pack all of dy).
    int busy = parts;
    while (busy > 1 && share(in, kColumnStrip, busy - 1, parts).begin == in) --busy;
    const Range sum = split_out     ? o
                      : part < busy ? share(out, kLanes, part, busy)
                                    : Range{.begin = out, .end = out};
    const int64_t width = o.end - o.begin, strip = i.end - i.begin;
    const int64_t padded = round_up(strip, kLanes);
    uint16_t* a = packs + part * pack_elements(rows, out);
    uint16_t* b = a + 2 * block_pairs(rows) * out;
    if (width > 0 && strip > 0) {
      for (int64_t p0 = 0; p0 < pairs; p0 += kBlockPairs) {
        const int64_t block = std::min(kBlockPairs, pairs - p0);
        const int64_t t0 = 2 * p0, block_rows = std::min(2 * block, rows - t0);
        const uint16_t* dy_rows = dy + t0 * out;
        // dy's block, packed in up to three column ranges so that only `sum` adds to db.
        const int64_t cuts[4] = {o.begin, std::clamp(sum.begin, o.begin, o.end),
                                 std::clamp(sum.end, o.begin, o.end), o.end};
        for (int c = 0; c < 3; ++c) {
          const int64_t from = cuts[c], to = cuts[c + 1];
          if (from == to) continue;
          uint16_t* dst = a + 2 * (from - o.begin);
          if (c == 1 && db) {
            avx512_bf16::pack_row_pairs_summing(dy_rows + from, out, block_rows, to - from, dst,
                                                2 * width, db + from);
          } else {
            avx512_bf16::pack_row_pairs(dy_rows + from, out, block_rows, to - from, dst, 2 * width);
          }
        }
        // x's block one panel of 64 columns at a time. Panels, not the whole block with its
        // strips side by side: from that layout the tiles ran at 79% of the one-core peak, from
        // panels at 95-97%.
        for (int64_t j = 0; j < padded; j += kColumnStrip) {
          const int64_t width_j = std::min(kColumnStrip, padded - j);
          const int64_t cols = std::min(width_j, strip - j);
          uint16_t* panel = b;  // consumed before the next strip's packing
          avx512_bf16::pack_row_pairs(x + t0 * in + i.begin + j, in, block_rows, cols, panel,
                                      2 * width_j);
          if (cols < width_j) {  // padding columns multiply into sums nobody reads; keep them 0
            for (int64_t p = 0; p < block; ++p) {
              std::memset(panel + p * 2 * width_j + 2 * cols, 0,
                          sizeof(uint16_t) * size_t(2 * (width_j - cols)));
            }
          }
          PairGemm g;
          g.a = reinterpret_cast<const uint32_t*>(a);
          g.a_row = 1;
          g.a_pair = width;
          g.b = panel;
          g.ldb = 2 * width_j;
          g.c = sums + o.begin * ldc + i.begin + j;
          g.ldc = ldc;
          g.m = width;
          g.n = width_j;
          g.pairs = block;
          g.accumulate = p0 > 0;
          g.widened = direct;
          avx512_bf16::pair_gemm(g);
        }
      }
      for (int64_t r = o.begin; r < o.end && !direct; ++r) {
        if (wide) {
          avx512_bf16::round_to_bf16_widened(sums + r * ldc + i.begin, strip,
                                             static_cast<float*>(dw_bits) + r * in + i.begin);
        } else {
          avx512_bf16::f32_to_bf16(sums + r * ldc + i.begin,
                                   static_cast<uint16_t*>(dw_bits) + r * in + i.begin,
                                   size_t(strip));
        }
      }
    }
  }
}

}  // namespace mixp::kernels
