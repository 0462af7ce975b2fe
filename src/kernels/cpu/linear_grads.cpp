// The CPU candidates of kernels/linear_grads.h.
#include "kernels/linear_grads.h"

#include "kernels/gemm_product.h"
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

}  // namespace

Kernel<LinearWeightGradsFn> linear_weight_grads(
    "linear_weight_grads", {{.name = "fused_bf16", .applies = fused_applies, .fn = fused_bf16},
                            {.name = "unfused", .fn = unfused, .fallback = true}});

}  // namespace mixp::kernels
