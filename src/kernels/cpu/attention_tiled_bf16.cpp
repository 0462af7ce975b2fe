// The tiled bf16 attention (attention_tiled_bf16.h; the math is in
// kernels/scaled_dot_product_attention.h). The chunked path computes a chunk's scores for all T
// keys of every query, causal or not, and passes [32, T, T] fp32 matrices through memory between
// its products and the softmax; here each (batch, head) pair is one task that keeps its operands
// in cache:
// - K and V are packed once per pair into the pair layouts of kernels/pair_gemm.h;
// - the queries go in blocks of 128 rows, whose scores (128 x T fp32) stay in L2 from the product
//   through the softmax to P V;
// - causal blocks compute only the keys below their last row (rounded up to 16, per tile of 6
//   rows), about half of the T x T products.
// The numerics are the chunked path's: fp32 scores, the same row functions, P (and in backward
// dS) rounded once to bf16 for the products, each product accumulated in fp32 and rounded once.
// Only the order of each product's fp32 sums differs.
#include "kernels/cpu/attention_tiled_bf16.h"

#include <omp.h>

#include <algorithm>
#include <type_traits>

#include "kernels/convert_kernels.h"
#include "kernels/cpu/parallel.h"
#include "kernels/pair_gemm.h"
#include "mixp/runtime.h"
#include "mixp/tensor.h"

namespace mixp::kernels::attention {
namespace {

namespace isa = kernels::avx512_bf16;

constexpr int64_t kBlockRows = 128;

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

const uint16_t* bits(const bfloat16* p) { return reinterpret_cast<const uint16_t*>(p); }
const uint32_t* words(const uint16_t* p) { return reinterpret_cast<const uint32_t*>(p); }

// fp32 to bf16 with the AVX-512 BF16 kernel itself: this path runs only there, and its many
// short rows would otherwise each pay for convert()'s checks and dispatch.
void narrow(const float* src, int64_t n, uint16_t* dst) {
  kernels::avx512_bf16::f32_to_bf16(src, dst, size_t(n));
}

// [rows][Dh] fp32 rounded into `rows` rows of an operand, row_stride apart.
void narrow_into(const float* src, int64_t rows, int64_t dh, bfloat16* dst, int64_t row_stride) {
  if (row_stride == dh) {
    narrow(src, rows * dh, reinterpret_cast<uint16_t*>(dst));
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    narrow(src + r * dh, dh, reinterpret_cast<uint16_t*>(dst + r * row_stride));
  }
}

// The sizes of one pair's work and its scratch layouts.
struct Layout {
  int64_t t, dh;
  int64_t keys16;  // T rounded up to 16: the columns of the transposed packings
  int64_t width;   // the row length of the score-shaped buffers, T rounded up to 32
  explicit Layout(const Dims& d)
      : t(d.t), dh(d.dh), keys16(round_up(d.t, 16)), width(round_up(d.t, 32)) {}
  int64_t transposed_size() const { return dh / 2 * 2 * keys16; }           // [Dh/2][keys16][2]
  int64_t rows_size(int64_t rows) const { return round_up(rows, 2) * dh; }  // [rows/2][Dh][2]
};

// [Dh/2][keys16][2] from T rows of Dh (B = X^T for q k^T or dO v^T), the padding keys zero.
void pack_transposed(const Layout& l, const bfloat16* x, int64_t row_stride, uint16_t* out) {
  isa::pack_column_pairs(bits(x), row_stride, l.t, l.dh, out, 2 * l.keys16);
  for (int64_t w = 0; w < l.dh / 2; ++w) {
    std::fill(out + w * 2 * l.keys16 + 2 * l.t, out + (w + 1) * 2 * l.keys16, uint16_t(0));
  }
}

// One block of query rows [i0, i1) and the keys it sees.
struct Block {
  int64_t i0, i1, keys;
  int64_t rows() const { return i1 - i0; }
};

Block block_at(const Dims& d, int64_t i0) {
  const int64_t i1 = std::min(d.t, i0 + kBlockRows);
  return Block{.i0 = i0, .i1 = i1, .keys = d.causal ? i1 : d.t};
}

// s[r][j] = q[i0 + r] . k[j] (unscaled) for the keys each row sees (more, up to a tile's limit).
void block_scores(const Dims& d, const Layout& l, const Block& b, const bfloat16* q,
                  int64_t row_stride, const uint16_t* k_transposed, float* s) {
  isa::pair_gemm({.a = words(bits(q + b.i0 * row_stride)),
                  .a_row = row_stride / 2,
                  .a_pair = 1,
                  .b = k_transposed,
                  .ldb = 2 * l.keys16,
                  .c = s,
                  .ldc = l.width,
                  .m = b.rows(),
                  .n = round_up(b.keys, 16),
                  .pairs = l.dh / 2,
                  .row_limit = d.causal ? b.i0 : -1});
}

// c[r][:] = sum_j a[r][j] x[j][:] over the keys of the block, rounded once to bf16 by the tiles
// into the block's rows of c, row_stride apart: a (P or dS, bf16, row length width) zero beyond
// each row's visible keys, x packed by pairs of keys.
void block_times_keys(const Dims& d, const Layout& l, const Block& b, const uint16_t* a,
                      const uint16_t* x_pairs, bfloat16* c, int64_t row_stride) {
  isa::pair_gemm({.a = words(a),
                  .a_row = l.width / 2,
                  .a_pair = 1,
                  .b = x_pairs,
                  .ldb = 2 * l.dh,
                  .ldc = row_stride,
                  .m = b.rows(),
                  .n = l.dh,
                  .pairs = (b.keys + 1) / 2,
                  .pair_limit = d.causal ? b.i0 : -1,
                  .c_bf16 = reinterpret_cast<uint16_t*>(c + b.i0 * row_stride)});
}

// acc[j][:] += sum_r a[r][j] y[r][:] for the block's keys j: a (P or dS) packed by pairs of
// rows, y (dO or q) likewise. Causal: key j is seen by the rows from j - i0 on.
void keys_accumulate(const Dims& d, const Layout& l, const Block& b, const uint16_t* a_pairs,
                     const uint16_t* y_pairs, float* acc) {
  isa::pair_gemm({.a = words(a_pairs),
                  .a_row = 1,
                  .a_pair = l.width,
                  .b = y_pairs,
                  .ldb = 2 * l.dh,
                  .c = acc,
                  .ldc = l.dh,
                  .m = b.keys,
                  .n = l.dh,
                  .pairs = (b.rows() + 1) / 2,
                  .accumulate = true,
                  .first_term = d.causal ? b.i0 : -1});
}

// One thread's buffers, carved from one workspace tensor per call (so that the memory report
// counts them: about 0.7 MiB a thread for gpt's T = 256), each 64-byte aligned.
struct Scratch {
  uint16_t *k_transposed, *v_transposed, *k_pairs, *v_pairs, *p16, *a_pairs, *y_pairs;
  float *s, *dp, *dk, *dv;
};

class ScratchSpace {
 public:
  explicit ScratchSpace(const Layout& l) : layout_(l) {
    Scratch none{};
    per_thread_ = carve(layout_, nullptr, none);
    space_ = empty(Shape{num_threads(), per_thread_}, DType::u8, MemoryTag::workspace);
  }
  // The calling thread's buffers (inside kernels::parallel_for, or outside it on thread 0).
  Scratch for_this_thread() {
    Scratch out{};
    carve(layout_, space_.data<uint8_t>() + int64_t(omp_get_thread_num()) * per_thread_, out);
    return out;
  }

 private:
  // Lays the buffers out from `base` (sizes only when base is null); returns the bytes used.
  static int64_t carve(const Layout& l, uint8_t* base, Scratch& out) {
    int64_t used = 0;
    auto take = [&](auto*& p, int64_t elements) {
      using T = std::remove_reference_t<decltype(*p)>;
      p = base == nullptr ? nullptr : reinterpret_cast<T*>(base + used);
      used += round_up(elements * int64_t(sizeof(T)), 64);
    };
    take(out.k_transposed, l.transposed_size());
    take(out.v_transposed, l.transposed_size());
    take(out.k_pairs, l.rows_size(l.t));
    take(out.v_pairs, l.rows_size(l.t));
    take(out.p16, kBlockRows * l.width);
    take(out.a_pairs, kBlockRows * l.width);
    take(out.y_pairs, l.rows_size(kBlockRows));
    take(out.s, kBlockRows * l.width);
    take(out.dp, kBlockRows * l.width);
    take(out.dk, l.t * l.dh);
    take(out.dv, l.t * l.dh);
    return used;
  }

  Layout layout_;
  int64_t per_thread_ = 0;
  Tensor space_;
};

}  // namespace

void tiled_bf16_forward(const Dims& d, const bfloat16* q, const bfloat16* k, const bfloat16* v,
                        const HeadRows& in, bfloat16* out, const HeadRows& out_rows, float* lse) {
  const Layout l(d);
  const float scale = inverse_sqrt_head_size<float>(d);
  const int64_t ld = in.row_stride;
  ScratchSpace space(l);
  kernels::parallel_for(d.bh, 1, [&](int64_t begin, int64_t end) {
    const Scratch m = space.for_this_thread();
    uint16_t *kt = m.k_transposed, *vp = m.v_pairs, *p16 = m.p16;
    float* s = m.s;
    for (int64_t pair = begin; pair < end; ++pair) {
      const int64_t at = in.at(pair);
      pack_transposed(l, k + at, ld, kt);
      isa::pack_row_pairs(bits(v + at), ld, d.t, d.dh, vp, 2 * d.dh);
      for (int64_t i0 = 0; i0 < d.t; i0 += kBlockRows) {
        const Block b = block_at(d, i0);
        block_scores(d, l, b, q + at, ld, kt, s);
        isa::softmax_rows_to_bf16(s, l.width, b.rows(), d.visible(b.i0), d.causal ? 1 : 0, scale,
                                  p16, l.width, round_up(b.keys, 2), lse + pair * d.t + b.i0);
        block_times_keys(d, l, b, p16, vp, out + out_rows.at(pair), out_rows.row_stride);
      }
    }
  });
}

void tiled_bf16_backward(const Dims& d, const bfloat16* q, const bfloat16* k, const bfloat16* v,
                         const HeadRows& in, const float* lse, const bfloat16* g,
                         const HeadRows& g_rows, bfloat16* dq, bfloat16* dk, bfloat16* dv) {
  const Layout l(d);
  const float scale = inverse_sqrt_head_size<float>(d);
  const bool scores_grad = dq != nullptr || dk != nullptr;
  const int64_t ld = in.row_stride, g_ld = g_rows.row_stride;
  ScratchSpace space(l);
  kernels::parallel_for(d.bh, 1, [&](int64_t begin, int64_t end) {
    const Scratch m = space.for_this_thread();
    uint16_t *kt = m.k_transposed, *vt = m.v_transposed, *kp = m.k_pairs, *p16 = m.p16;
    uint16_t *a_pairs = m.a_pairs, *y_pairs = m.y_pairs;
    float *s = m.s, *dp = m.dp, *dk_acc = m.dk, *dv_acc = m.dv;
    for (int64_t pair = begin; pair < end; ++pair) {
      const int64_t at = in.at(pair);
      const bfloat16* gp = g + g_rows.at(pair);
      pack_transposed(l, k + at, ld, kt);
      if (scores_grad) pack_transposed(l, v + at, ld, vt);
      if (dq != nullptr) isa::pack_row_pairs(bits(k + at), ld, d.t, d.dh, kp, 2 * d.dh);
      std::fill(dk_acc, dk_acc + d.t * d.dh, 0.0f);
      std::fill(dv_acc, dv_acc + d.t * d.dh, 0.0f);
      for (int64_t i0 = 0; i0 < d.t; i0 += kBlockRows) {
        const Block b = block_at(d, i0);
        const int64_t extent = round_up(b.keys, 2);
        block_scores(d, l, b, q + at, ld, kt, s);
        isa::probabilities_rows(s, l.width, b.rows(), d.visible(b.i0), d.causal ? 1 : 0, scale,
                                lse + pair * d.t + b.i0, extent);
        if (dv != nullptr) {  // dV += P^T dO, P rounded to bf16 as it is packed
          isa::pack_row_pairs_f32(s, l.width, b.rows(), b.keys, a_pairs, 2 * l.width);
          isa::pack_row_pairs(bits(gp + b.i0 * g_ld), g_ld, b.rows(), d.dh, y_pairs, 2 * d.dh);
          keys_accumulate(d, l, b, a_pairs, y_pairs, dv_acc);
        }
        if (!scores_grad) continue;
        block_scores(d, l, b, gp, g_ld, vt, dp);  // dP = dO V^T
        // dS from the unrounded P, in bf16 (score_grad_row's arithmetic, rounded as it goes).
        isa::score_grad_rows_to_bf16(s, dp, l.width, b.rows(), d.visible(b.i0), d.causal ? 1 : 0,
                                     scale, p16, l.width, extent);
        if (dq != nullptr) {  // dQ = dS K
          block_times_keys(d, l, b, p16, kp, dq + at, ld);
        }
        if (dk != nullptr) {  // dK += dS^T Q
          isa::pack_row_pairs(p16, l.width, b.rows(), b.keys, a_pairs, 2 * l.width);
          isa::pack_row_pairs(bits(q + at + b.i0 * ld), ld, b.rows(), d.dh, y_pairs, 2 * d.dh);
          keys_accumulate(d, l, b, a_pairs, y_pairs, dk_acc);
        }
      }
      if (dk != nullptr) narrow_into(dk_acc, d.t, d.dh, dk + at, ld);
      if (dv != nullptr) narrow_into(dv_acc, d.t, d.dh, dv + at, ld);
    }
  });
}

}  // namespace mixp::kernels::attention
