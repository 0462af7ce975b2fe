// The CPU candidates of kernels/linear_grads.h.
#include "kernels/linear_grads.h"

#include "kernels/cpu/parallel.h"
#include "kernels/f16_tiles.h"
#include "kernels/gemm_product.h"
#include "kernels/round_to_f16.h"
#include "mixp/runtime.h"

namespace mixp::kernels {
namespace {

constexpr int64_t kFusedMinRows = 512;

bool fused_applies(const Tensor& g, const Tensor& x, const Tensor& dw, const Tensor&) {
  const bool rows_pay = dw.dtype() == DType::f32 || g.size(0) >= kFusedMinRows;
  return g.dtype() == DType::bf16 && x.dtype() == DType::bf16 &&
         (dw.dtype() == DType::bf16 || dw.dtype() == DType::f32) && gemm_fast_has_bf16() &&
         rows_pay && g.size(0) >= 1 && dw.size(0) > 0 && dw.size(1) > 0;
}

bool fused_bf16(const Tensor& g, const Tensor& x, Tensor& dw, Tensor& db) {
  const int64_t rows = g.size(0), in = dw.size(1), out = dw.size(0);
  const int threads = num_threads();
  Tensor space =
      empty(Shape{linear_weight_grad_workspace_bytes(rows, in, out, dw.dtype(), threads)},
            DType::u8, MemoryTag::workspace);
  Tensor sums =
      db.defined() ? empty(Shape{out}, DType::f32, MemoryTag::workspace, db.device()) : Tensor();
  linear_weight_grad_fast(rows, in, out, g.raw_data(), x.raw_data(), dw.raw_data(), dw.dtype(),
                          db.defined() ? sums.data<float>() : nullptr, space.data<uint8_t>(),
                          threads);
  if (db.defined()) db.copy_(sums);
  return db.defined();
}

bool unfused(const Tensor& g, const Tensor& x, Tensor& dw, Tensor&) {
  const GemmShape s{.m = dw.size(0), .n = dw.size(1), .k = g.size(0), .trans_a = true};
  if (dw.dtype() == g.dtype()) {
    gemm_product(s, g, x, Tensor(), dw);
  } else {  // rounded to g's dtype first, then widened
    Tensor narrow = empty(dw.shape(), g.dtype(), MemoryTag::workspace, dw.device());
    gemm_product(s, g, x, Tensor(), narrow);
    dw.copy_(narrow);
  }
  return false;
}

bool f16_into_f32_applies(const Tensor& g, const Tensor& x, const Tensor& dw, const Tensor&) {
  return g.dtype() == DType::f16 && x.dtype() == DType::f16 && dw.dtype() == DType::f32;
}

// The fp32 sums straight into dw, then rounded to f16's values there: the bits of unfused's
// f16 copy widened, in one pass over dw where the copy took a write and a read of its own.
bool f16_into_f32(const Tensor& g, const Tensor& x, Tensor& dw, Tensor&) {
  const GemmShape s{.m = dw.size(0), .n = dw.size(1), .k = g.size(0), .trans_a = true};
  gemm_product(s, g, x, Tensor(), dw);
  round_to_f16_values(dw, dw);
  return false;
}

GemmShape weight_grad_shape(const Tensor& g, const Tensor& dw) {
  return {.m = dw.size(0), .n = dw.size(1), .k = g.size(0), .trans_a = true};
}

bool tiles_f16_applies(const Tensor& g, const Tensor& x, const Tensor& dw, const Tensor& db) {
  return f16_into_f32_applies(g, x, dw, db) && f16_tiles_supported(weight_grad_shape(g, dw));
}

// The fp32 tiles (kernels/f16_tiles.h) round each sum to f16's value as they store it into dw:
// no pass over dw after the product, nor fp32 copies of g and x for it.
bool tiles_f16(const Tensor& g, const Tensor& x, Tensor& dw, Tensor&) {
  const GemmShape s = weight_grad_shape(g, dw);
  const int threads = num_threads();
  Tensor space =
      empty(Shape{f16_tiles_workspace_bytes(s, threads)}, DType::u8, MemoryTag::workspace);
  avx512::matmul_f16_tiles(s, static_cast<const uint16_t*>(g.raw_data()), x.raw_data(), DType::f16,
                           dw.raw_data(), F16TileOut::f16_values_in_f32, nullptr,
                           space.data<uint8_t>(), threads);
  return false;
}

// overlapped_bf16 applies up to one panel of the pair tiles' rows, where each product is too
// short to pay for a region of its own, and from 2^24 multiply-adds each, where the two would
// each open one (below, both run on the calling thread and there is no region to save).
constexpr int64_t kOverlapMaxRows = 64;
constexpr double kOverlapMinProducts = double(1 << 24);

bool overlapped_applies(const Tensor& g, const Tensor& x, const Tensor& w, const Tensor& dx,
                        const Tensor& dw, const Tensor& db) {
  const GemmShape dx_shape{.m = g.size(0), .n = w.size(1), .k = w.size(0)};
  const double products = double(g.size(0)) * double(w.size(0)) * double(w.size(1));
  return g.size(0) <= kOverlapMaxRows && products >= kOverlapMinProducts &&
         w.dtype() == DType::f32 && dx.dtype() == DType::bf16 && fused_applies(g, x, dw, db) &&
         matmul_pairs_supported(dx_shape) && num_threads() > 1;
}

// dx on one thread and dW (with db) on the other: each kernel's bits do not depend on its
// thread count, so they are those of the separate calls.
bool overlapped_bf16(const Tensor& g, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw,
                     Tensor& db) {
  const int64_t rows = g.size(0), in = dw.size(1), out = dw.size(0);
  const GemmShape dx_shape{.m = rows, .n = in, .k = out};
  Tensor dx_space =
      empty(Shape{matmul_pairs_workspace_bytes(dx_shape, 1)}, DType::u8, MemoryTag::workspace);
  Tensor dw_space = empty(Shape{linear_weight_grad_workspace_bytes(rows, in, out, dw.dtype(), 1)},
                          DType::u8, MemoryTag::workspace);
  Tensor sums =
      db.defined() ? empty(Shape{out}, DType::f32, MemoryTag::workspace, db.device()) : Tensor();
  const void *g_bits = g.raw_data(), *x_bits = x.raw_data(), *w_data = w.raw_data();
  void *dx_bits = dx.raw_data(), *dw_bits = dw.raw_data();
  float* db_sums = db.defined() ? sums.data<float>() : nullptr;
  const DType dw_dtype = dw.dtype();
  parallel_for(2, 1, [&](int64_t begin, int64_t end) {
    for (int64_t part = begin; part < end; ++part) {
      if (part == 0) {
        matmul_pairs_bf16(dx_shape, g_bits, w_data, DType::f32, dx_bits, nullptr,
                          dx_space.data<uint8_t>(), 1);
      } else {
        linear_weight_grad_fast(rows, in, out, g_bits, x_bits, dw_bits, dw_dtype, db_sums,
                                dw_space.data<uint8_t>(), 1);
      }
    }
  });
  if (db.defined()) db.copy_(sums);
  return db.defined();
}

bool separate(const Tensor& g, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw,
              Tensor& db) {
  gemm_product({.m = g.size(0), .n = w.size(1), .k = w.size(0)}, g, w, Tensor(), dx);
  return linear_weight_grads(g, x, dw, db);
}

}  // namespace

Kernel<LinearGradsFn> linear_grads(
    "linear_grads",
    {{.name = "overlapped_bf16", .applies = overlapped_applies, .fn = overlapped_bf16},
     {.name = "separate", .fn = separate, .fallback = true}});

Kernel<LinearWeightGradsFn> linear_weight_grads(
    "linear_weight_grads",
    {{.name = "fused_bf16", .applies = fused_applies, .fn = fused_bf16},
     {.name = "tiles_f16", .isa = Isa::avx512, .applies = tiles_f16_applies, .fn = tiles_f16},
     {.name = "f16_into_f32", .applies = f16_into_f32_applies, .fn = f16_into_f32},
     {.name = "unfused", .fn = unfused, .fallback = true}});

}  // namespace mixp::kernels
