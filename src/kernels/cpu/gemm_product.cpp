// The CPU candidates of kernels/gemm_product.h.
#include "kernels/gemm_product.h"

#include <algorithm>

#include "kernels/f16_tiles.h"
#include "kernels/round_to_f16.h"
#include "mixp/error.h"
#include "mixp/runtime.h"

namespace mixp::kernels {
namespace {

DType accumulation_of(const Tensor& a) { return a.dtype() == DType::f64 ? DType::f64 : DType::f32; }

// b in a's dtype: an f32 b with a narrow a is rounded to a's dtype, as the contract reads it.
Tensor b_as_a(const Tensor& a, const Tensor& b) {
  return b.dtype() == a.dtype() ? b : b.to(a.dtype());
}

// b as oneDNN's product takes it: an f32 b with an f16 a, whose product runs in fp32 (this CPU
// has no fp16 arithmetic), becomes b.to(f16).to(f32), the widening the product would make of
// the cast, in one pass that writes fp32 where the cast and the widening were two.
Tensor b_for_onednn(const Tensor& a, const Tensor& b) {
  if (a.dtype() != DType::f16 || b.dtype() != DType::f32) return b_as_a(a, b);
  Tensor rounded = empty(b.shape(), DType::f32, MemoryTag::workspace, b.device());
  round_to_f16_values(b, rounded);
  return rounded;
}

// op(a) op(b) (+ bias) into c of the accumulation dtype by oneDNN. oneDNN adds the bias itself,
// in the same pass (a separate pass over C cost about 1% of a gpt step).
void product_onednn(const GemmShape& s, const Tensor& a, const Tensor& b, const Tensor& bias,
                    Tensor& c) {
  const DType in = a.dtype();
  const Tensor wide_bias = bias.defined() ? bias.to(DType::f32) : Tensor();
  const float* bias_data = wide_bias.defined() ? wide_bias.data<float>() : nullptr;
  if (in == DType::f32 || (in == DType::bf16 && gemm_fast_has_bf16())) {
    gemm_fast(s, in, a.raw_data(), b.raw_data(), c.data<float>(), DType::f32, bias_data);
    return;
  }
  const Tensor wa = a.to(DType::f32), wb = b.dtype() == DType::f32 ? b : b.to(DType::f32);
  gemm_fast(s, DType::f32, wa.raw_data(), wb.raw_data(), c.data<float>(), DType::f32, bias_data);
}

// op(a) op(b) (+ bias) into c of the accumulation dtype by the plain loops, the bias added to the
// stored sums.
void product_reference(const GemmShape& s, const Tensor& a, const Tensor& b, const Tensor& bias,
                       Tensor& c) {
  const DType acc = c.dtype();
  gemm_reference(s, a.dtype(), a.raw_data(), b.raw_data(), c.raw_data());
  if (!bias.defined()) return;
  const Tensor wide_bias = bias.to(acc);
  const int64_t n = s.n, rows = c.numel() / std::max<int64_t>(n, 1);
  auto add_rows = [&]<typename T>() {
    T* out = c.data<T>();
    const T* bv = wide_bias.data<T>();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < n; ++j) out[r * n + j] += bv[j];
    }
  };
  if (acc == DType::f64)
    add_rows.operator()<double>();
  else
    add_rows.operator()<float>();
}

// Rows of C computed per pass when the output is narrower than the sums: the fp32 product then
// exists for one block of at most about 8 MiB at a time, not whole (a bf16 gpt step's peak held
// the fp32 product of its widest layer, 24 MiB, beside that layer's bf16 result). The blocks are
// of equal size, in multiples of 64 rows, and as few as the bound allows: smaller ones made the
// gpt step slower (more calls, each repacking B). Each element's sum is the same either way.
int64_t rows_per_block(const GemmShape& s) {
  constexpr int64_t kBlockBytes = int64_t(8) << 20;
  const int64_t bytes = s.m * std::max<int64_t>(s.n, 1) * int64_t(sizeof(float));
  const int64_t blocks = (bytes + kBlockBytes - 1) / kBlockBytes;
  const int64_t rows = (s.m + blocks - 1) / std::max<int64_t>(blocks, 1);
  return (rows + 63) / 64 * 64;
}

using ProductFn = void (*)(const GemmShape&, const Tensor&, const Tensor&, const Tensor&, Tensor&);
using PrepareBFn = Tensor (*)(const Tensor& a, const Tensor& b);

// The product into out directly when out has the accumulation dtype; else block by block of
// rows into an fp32 (f64) block, each rounded into its rows of out. b is prepared once.
template <ProductFn product, PrepareBFn prepare_b>
void product_in_blocks(const GemmShape& s, const Tensor& a, const Tensor& b_in, const Tensor& bias,
                       Tensor& out) {
  const DType acc = accumulation_of(a);
  const Tensor b = prepare_b(a, b_in);
  if (out.dtype() == acc) {
    product(s, a, b, bias, out);
    return;
  }
  auto block = [&](const GemmShape& part, const Tensor& a_part, Tensor out_part) {
    Tensor c = empty(out_part.shape(), acc, MemoryTag::workspace, out_part.device());
    product(part, a_part, b, bias, c);
    out_part.copy_(c);
  };
  const int64_t rows = rows_per_block(s);
  if (s.batch != 1 || s.trans_a || rows >= s.m) {
    block(s, a, out);
    return;
  }
  // Rows of A (stored [m, k]) and of C are contiguous: block by block.
  const Tensor a2 = a.view(Shape{s.m, s.k}), out2 = out.view(Shape{s.m, s.n});
  for (int64_t begin = 0; begin < s.m; begin += rows) {
    GemmShape part = s;
    part.m = std::min(rows, s.m - begin);
    block(part, a2.slice(begin, begin + part.m), out2.slice(begin, begin + part.m));
  }
}

// A bf16 product into a bf16 result is rounded as the product stores its fp32 sums: one pass
// over a result half the size, where rounding after it would read the sums back and write them
// again (about 5% of a bf16 gpt step). oneDNN's rounding needs no fp32 block of ours: the
// product goes whole, one parallel region instead of three for gpt's widest layers (each
// region wakes the sleeping worker: about 2% of a gpt amp-bf16 step against 8 MiB blocks).
bool rounds_bf16_in_product(const GemmShape&, const Tensor& a, const Tensor&, const Tensor&,
                            const Tensor& out) {
  return out.dtype() == DType::bf16 && a.dtype() == DType::bf16 && gemm_fast_has_bf16();
}

void onednn_bf16(const GemmShape& s, const Tensor& a, const Tensor& b_in, const Tensor& bias,
                 Tensor& out) {
  const Tensor b = b_as_a(a, b_in);
  const Tensor wide_bias = bias.defined() ? bias.to(DType::f32) : Tensor();
  gemm_fast(s, DType::bf16, a.raw_data(), b.raw_data(), out.raw_data(), DType::bf16,
            wide_bias.defined() ? wide_bias.data<float>() : nullptr);
}

// From kPairTileMinRows rows on, mixp's own pair tiles do the product and its rounding: 0.86-0.99x
// oneDNN's time on gpt's linear layers, and about 9% off the step (docs/performance.md, "The
// pair tiles"). With an fp32 b (an autocast linear's weight) they take every row count: their
// packing rounds b, where oneDNN needs a bf16 copy of it first. oneDNN does the rest.
constexpr int64_t kPairTileMinRows = 512;

bool pairs_apply(const GemmShape& s, const Tensor& a, const Tensor& b, const Tensor& bias,
                 const Tensor& out) {
  return rounds_bf16_in_product(s, a, b, bias, out) &&
         (b.dtype() == DType::f32 || s.m >= kPairTileMinRows) && matmul_pairs_supported(s);
}

void pairs_bf16(const GemmShape& s, const Tensor& a, const Tensor& b, const Tensor& bias,
                Tensor& out) {
  const Tensor wide_bias = bias.defined() ? bias.to(DType::f32) : Tensor();
  const int threads = num_threads();
  Tensor space =
      empty(Shape{matmul_pairs_workspace_bytes(s, threads)}, DType::u8, MemoryTag::workspace);
  matmul_pairs_bf16(s, a.raw_data(), b.raw_data(), b.dtype(), out.raw_data(),
                    wide_bias.defined() ? wide_bias.data<float>() : nullptr, space.data<uint8_t>(),
                    threads);
}

// An f16 a, with an f32 b (an autocast linear's weight) or an f16 one, a batch of up to
// kF16TileBatch rows: mixp's fp32 tiles widen a and round b to f16's values as they pack them,
// where the oneDNN candidate needs a pass over b first (about 9% of an mlp amp-fp16 step) and fp32
// copies of a and of the result.
bool f16_tiles_apply(const GemmShape& s, const Tensor& a, const Tensor& b, const Tensor&,
                     const Tensor& out) {
  return a.dtype() == DType::f16 && (b.dtype() == DType::f32 || b.dtype() == DType::f16) &&
         (out.dtype() == DType::f16 || out.dtype() == DType::f32) && f16_tiles_supported(s);
}

void tiles_f16(const GemmShape& s, const Tensor& a, const Tensor& b, const Tensor& bias,
               Tensor& out) {
  const Tensor wide_bias = bias.defined() ? bias.to(DType::f32) : Tensor();
  const int threads = num_threads();
  Tensor space =
      empty(Shape{f16_tiles_workspace_bytes(s, threads)}, DType::u8, MemoryTag::workspace);
  avx512::matmul_f16_tiles(
      s, static_cast<const uint16_t*>(a.raw_data()), b.raw_data(), b.dtype(), out.raw_data(),
      out.dtype() == DType::f16 ? F16TileOut::f16 : F16TileOut::f32,
      wide_bias.defined() ? wide_bias.data<float>() : nullptr, space.data<uint8_t>(), threads);
}

bool not_f64(const GemmShape&, const Tensor& a, const Tensor&, const Tensor&, const Tensor&) {
  return a.dtype() != DType::f64;
}

}  // namespace

Kernel<GemmProductFn> gemm_product(
    "gemm_product",
    {{.name = "pairs_bf16", .applies = pairs_apply, .fn = pairs_bf16},
     {.name = "onednn_bf16", .applies = rounds_bf16_in_product, .fn = onednn_bf16},
     {.name = "tiles_f16", .isa = Isa::avx512, .applies = f16_tiles_apply, .fn = tiles_f16},
     {.name = "onednn", .applies = not_f64, .fn = product_in_blocks<product_onednn, b_for_onednn>},
     {.name = "reference", .fn = product_in_blocks<product_reference, b_as_a>, .fallback = true}});

}  // namespace mixp::kernels
